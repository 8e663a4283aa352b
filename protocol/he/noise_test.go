//go:build !race

// The 10,000-encryption noise test takes about 20 s normally but minutes
// under the race detector, so race builds skip it; `make test` runs it
// once more without -race.

package he

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
	"github.com/tuneinsight/lattigo/v5/schemes/bgv"
)

// noiseLog2 returns log2 of the largest |coefficient| of the RLWE noise of ct
// under sk, given the values it should decrypt to.
func noiseLog2(p Params, ct *rlwe.Ciphertext, sk *rlwe.SecretKey, want []int64) float64 {
	pt := bgv.NewPlaintext(p.Parameters, p.Level())
	if err := bgv.NewEncoder(p.Parameters).Encode(want, pt); err != nil {
		panic(err)
	}
	diff := ct.CopyNew()
	p.RingQ().AtLevel(p.Level()).Sub(diff.Value[0], pt.Value, diff.Value[0])
	_, _, maxLog2 := rlwe.Norm(diff, rlwe.NewDecryptor(p.Parameters, sk))
	return maxLog2
}

// TestNoiseMargin10k proves the parameter set's noise margin and flooding:
// the sum of 10,000 fresh owner ciphertexts (values up to 2^45 each, so the
// sum uses almost all of the plaintext range) has a noise that the members'
// flooding (uniform in [-2^SmudgingLog2, 2^SmudgingLog2]) hides by at least 40
// bits, and the sum plus proxy noise and a mask, key-switched by 2 of 3
// members with their noise shares and flooding, unmasked, decrypts exactly,
// with at least 8 bits of noise budget left.
func TestNoiseMargin10k(t *testing.T) {
	const owners = 10000
	if testing.Short() {
		t.Skip("10,000 encryptions; run without -short")
	}
	t.Parallel()
	p := params(t)
	members, cpk := committee(t, p, Committee{N: 3, Threshold: 2})
	user := GenerateKeyPair(p)
	slots := p.Slots()

	// Two workers, each with its own encryptor and partial sum.
	const workers = 2
	sums := p.NewCiphertexts(workers)
	wants := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			enc, _ := NewEncryptor(p, cpk)
			wants[w] = make([]int64, slots)
			ct := p.NewCiphertext()
			for o := w; o < owners; o += workers {
				v := randVec(rng, slots, 1<<45)
				for i, x := range v {
					wants[w][i] += x
				}
				if err := enc.Encrypt(v, ct); err != nil {
					panic(err)
				}
				p.AddInto(sums[w], ct)
			}
		}()
	}
	wg.Wait()
	sum := sums[0]
	p.AddInto(sum, sums[1])
	want := wants[0]
	for i := range want {
		want[i] += wants[1][i]
	}
	before := noiseLog2(p, sum, committeeSecret(t, members), want)

	rng := rand.New(rand.NewPCG(5, 5))
	plain := NewPlain(p)
	proxyNoise := randVec(rng, slots, 1<<40)
	if err := plain.AddInt64(sum, proxyNoise); err != nil {
		t.Fatal(err)
	}
	mask, _ := p.NewMask(nil)
	if err := plain.AddMask(sum, mask); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		want[i] += proxyNoise[i]
	}
	active := []Point{2, 3}
	var shares []*mhe.PublicKeySwitchShare
	for _, pt := range active {
		noise := randVec(rng, slots, 1<<40)
		for i := range want {
			want[i] += noise[i]
		}
		s, err := members[pt-1].KeySwitchShare(sum, user.Public, active, noise)
		if err != nil {
			t.Fatal(err)
		}
		shares = append(shares, s)
	}
	out, err := CombineKeySwitch(p, sum, shares)
	if err != nil {
		t.Fatal(err)
	}
	if err := plain.Unmask(out, mask); err != nil {
		t.Fatal(err)
	}
	got, err := NewDecryptor(p, user.Secret).DecryptSwitched([]*rlwe.Ciphertext{out}, slots)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("slot %d: %d, want %d", i, got[i], want[i])
		}
	}
	twice := make([]int64, len(want))
	for i, v := range want {
		twice[i] = SwitchFactor * v // the switch doubles the plaintext
	}
	after := noiseLog2(p, out, user.Secret, twice)
	budget := p.NoiseBudgetLog2()
	hidden := SmudgingLog2 - before
	t.Logf("noise after %d-ciphertext sum: 2^%.1f; flooding 2^%d per member hides it by %.1f bits (and what the proofs allow with statistical distance 2^%.1f); after key switch: 2^%.1f; budget 2^%.1f; margin %.1f bits",
		owners, before, SmudgingLog2, hidden, FloodingDistanceLog2(p.N(), owners, 3), after, budget, budget-after)
	if hidden < 40 {
		t.Errorf("flooding 2^%d hides the 2^%.1f noise of the sum by %.1f bits, want at least 40", SmudgingLog2, before, hidden)
	}
	if budget-after < 8 {
		t.Fatalf("noise margin %.1f bits, want at least 8", budget-after)
	}
}
