package sim

import (
	"slices"
	"testing"

	"github.com/fedpca/fedpca/protocol/he"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
)

// TestCraftedSwitchRecoversSecret shows that the audit's attack is real, so
// that the refusals of TestHostileUploads and TestHostileKeySwitch mean
// something: members that switched a crafted ciphertext (c1 = 2^190 T^-1)
// without verifying it would hand the user every coefficient of the
// committee secret, flooding notwithstanding. The daemons never switch it:
// the proxy refuses the upload, and every member refuses a sum that is not
// the named owners' proven uploads.
func TestCraftedSwitchRecoversSecret(t *testing.T) {
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	members, cpk, err := he.LocalCeremony(p, he.Committee{N: 3, Threshold: 2}, []byte("fedpca crafted switch test seed"))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := he.NewEncryptor(p, cpk)
	cts, _ := enc.EncryptVector([]int64{1})
	ct := cts[0]
	CraftC1(p, ct)
	user := he.GenerateKeyPair(p)
	active := []he.Point{1, 3}
	var shares []*mhe.PublicKeySwitchShare
	for _, pt := range active {
		s, err := members[pt-1].KeySwitchShare(ct, user.Public, active, nil)
		if err != nil {
			t.Fatal(err)
		}
		shares = append(shares, s)
	}
	out, err := he.CombineKeySwitch(p, ct, shares)
	if err != nil {
		t.Fatal(err)
	}
	got := RecoverSecret(p, *rlwe.NewDecryptor(p.Parameters, user.Secret).DecryptNew(out))
	// The committee secret: the sum of the members' ternary secrets.
	rq := p.RingQ().AtLevel(p.Level())
	want := make([]int64, p.N())
	q0 := rq.SubRings[0].Modulus
	for _, m := range members {
		sk, err := p.Codecs().SecretKey.Unmarshal(m.SecretState().SecretKey)
		if err != nil {
			t.Fatal(err)
		}
		c := rq.NewPoly()
		rq.IMForm(sk.Value.Q, c)
		rq.INTT(c, c)
		for i, x := range c.Coeffs[0] {
			if x > q0/2 {
				want[i] -= int64(q0 - x)
			} else {
				want[i] += int64(x)
			}
		}
	}
	if !slices.Equal(got, want) {
		wrong := 0
		for i := range got {
			if got[i] != want[i] {
				wrong++
			}
		}
		t.Fatalf("the unverified switch of a crafted ciphertext did not reveal the secret (%d of %d coefficients wrong): the attack test is broken", wrong, len(got))
	}
	t.Logf("an unverified switch of c1 = 2^190 T^-1 reveals all %d coefficients of the committee secret", len(got))
}
