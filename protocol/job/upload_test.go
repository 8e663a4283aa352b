package job

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/tuneinsight/lattigo/v5/ring"
)

// TestProofGroups: an upload of 10 ciphertexts is proven in two groups, 0-7
// and 8-9, each proof with the group's last ciphertext; each group verifies
// as the proxy and a member check it, and nothing else does: a proof moved
// to another ciphertext of its group, two ciphertexts of a group swapped, a
// group cut elsewhere, one group's proof for the other, a ciphertext of
// another encryption in a group, another owner.
func TestProofGroups(t *testing.T) {
	p := heParams(t)
	kp := he.GenerateKeyPair(p)
	key, err := p.ProofKey(kp.Public)
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := he.NewEncryptor(p, kp.Public)
	const count = 10
	cts, wits, err := enc.EncryptWitnessed(make([]int64, count*p.N()))
	if err != nil || len(cts) != count {
		t.Fatal(err, len(cts))
	}
	others, _, err := enc.EncryptWitnessed(make([]int64, p.N()))
	if err != nil {
		t.Fatal(err)
	}
	const jobID, owner = "job", "hospital-a"
	proofs, digests, err := ProveUpload(p, key, jobID, owner, cts, wits, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range cts {
		_, ends := ProofEnds(i, count)
		if carries := len(proofs[i]) > 0; carries != (i == 7 || i == 9) || carries != ends {
			t.Errorf("ciphertext %d carries a proof: %v", i, carries)
		}
		if digests[i].Proof != sha256.Sum256(proofs[i]) {
			t.Errorf("ciphertext %d: the statement's proof digest is not its proof's", i)
		}
	}
	if first, size := ProofGroup(9, count); first != 8 || size != 2 {
		t.Fatalf("group of ciphertext 9: %d, %d", first, size)
	}
	parts := make([]Part, count)
	c1s := make([]ring.Poly, count)
	for i, ct := range cts {
		parts[i] = Part{C0Digest: C0Digest(p, ct), C1: p.AppendPoly(nil, ct.Value[1]), Proof: proofs[i]}
		c1s[i] = p.RingQ().AtLevel(p.Level()).NewPoly()
	}
	for _, g := range [][2]int{{0, 8}, {8, 10}} {
		if err := VerifyParts(p, key, jobID, owner, g[0], count, parts[g[0]:g[1]], c1s[g[0]:g[1]]); err != nil {
			t.Errorf("group %v, as a member checks it: %v", g, err)
		}
		if got, err := VerifyCiphertexts(p, key, jobID, owner, g[0], count, cts[g[0]:g[1]], proofs[g[1]-1], true); err != nil || len(got) != g[1]-g[0] || got[len(got)-1].Proof == nil || got[0].C0 == nil {
			t.Errorf("group %v, as the proxy checks it: %v", g, err)
		}
	}
	group := func(edit func(ps []Part)) []Part {
		ps := append([]Part(nil), parts[:8]...)
		edit(ps)
		return ps
	}
	otherPart := Part{C0Digest: C0Digest(p, others[0]), C1: p.AppendPoly(nil, others[0].Value[1])}
	cases := []struct {
		what  string
		first int
		parts []Part
		msg   string
	}{
		{"the proof with the group's first ciphertext", 0, group(func(ps []Part) { ps[0].Proof, ps[7].Proof = ps[7].Proof, nil }), "carries a proof"},
		{"two ciphertexts swapped", 0, group(func(ps []Part) { ps[2], ps[5] = ps[5], ps[2] }), "not proven well formed"},
		{"a ciphertext of another encryption", 0, group(func(ps []Part) { ps[3] = otherPart }), "not proven well formed"},
		{"the other group's proof", 0, group(func(ps []Part) { ps[7].Proof = proofs[9] }), "not proven well formed"},
		{"a group cut elsewhere", 1, append(append([]Part(nil), parts[1:8]...), parts[7]), "not a proof group"},
		{"a short group", 0, parts[:7], "not a proof group"},
	}
	for _, tc := range cases {
		err := VerifyParts(p, key, jobID, owner, tc.first, count, tc.parts, c1s[:len(tc.parts)])
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v, want an error containing %q", tc.what, err, tc.msg)
		}
	}
	if err := VerifyParts(p, key, jobID, "hospital-b", 8, count, parts[8:], c1s[8:]); !errors.Is(err, ErrUnproven) {
		t.Errorf("another owner's group: got %v", err)
	}
	if _, err := VerifyCiphertexts(p, key, jobID, owner, 8, count, cts[8:], proofs[7], false); !errors.Is(err, ErrUnproven) {
		t.Errorf("the proxy given the first group's proof for the second: got %v", err)
	}
	t.Logf("proofs: %d bytes for ciphertexts 0-7, %d for 8-9 (one ciphertext alone: %d)", len(proofs[7]), len(proofs[9]), zk.Size(p.N(), 1))
}
