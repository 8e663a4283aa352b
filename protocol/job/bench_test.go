package job

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/ring"
)

// BenchmarkUserDecryptAnalyze: the user's work after the key switch for d
// features and K = 10 classes: decrypt and decode the ciphertexts, unpack,
// build the scatters and solve PCA (k = 5).
func BenchmarkUserDecryptAnalyze(b *testing.B) {
	p := heParams(b)
	user := he.GenerateKeyPair(p)
	for _, d := range []int{50, 784} {
		l, _ := stats.NewLayout(d, 10)
		// Statistics of random clipped rows (n = 2000), so the scatters are valid.
		acc, _ := stats.NewAccumulator(l, 1<<16, 16)
		rng := rand.New(rand.NewPCG(1, uint64(d)))
		q := make([]int64, d)
		for range 2000 {
			lim := int64(1<<16) / int64(d)
			for i := range q {
				q[i] = rng.Int64N(2*lim+1) - lim
			}
			_ = acc.Add(q, rng.IntN(10))
		}
		enc, _ := he.NewEncryptor(p, user.Public)
		cts, err := enc.EncryptVector(acc.Pack())
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("d=%d/cts=%d", d, len(cts)), func(b *testing.B) {
			for b.Loop() {
				benchUser(b, p, user.Secret, l, cts)
			}
		})
	}
}

func benchUser(b *testing.B, p he.Params, sk *rlwe.SecretKey, l stats.Layout, cts []*rlwe.Ciphertext) {
	vec, err := he.NewDecryptor(p, sk).DecryptVector(cts, l.Len())
	if err != nil {
		b.Fatal(err)
	}
	rel, err := stats.Unpack(l, 16, vec)
	if err != nil {
		b.Fatal(err)
	}
	sc, err := Moments(rel).Scatters()
	if err != nil {
		b.Fatal(err)
	}
	if _, err := sc.PCA(5); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUploadProofs: an owner proves its whole upload (ProveUpload, one
// proof per group of zk.MaxGroup ciphertexts), and a member (or the proxy)
// verifies every group of it, for d features and K = 10 classes: d = 50 is
// one ciphertext, d = 784 thirty-eight.
func BenchmarkUploadProofs(b *testing.B) {
	p := heParams(b)
	kp := he.GenerateKeyPair(p)
	key, err := p.ProofKey(kp.Public)
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []int{50, 784} {
		l, _ := stats.NewLayout(d, 10)
		enc, _ := he.NewEncryptor(p, kp.Public)
		cts, wits, err := enc.EncryptWitnessed(make([]int64, l.Len()))
		if err != nil {
			b.Fatal(err)
		}
		var proofs [][]byte
		b.Run(fmt.Sprintf("prove/d=%d/cts=%d", d, len(cts)), func(b *testing.B) {
			for b.Loop() {
				if proofs, _, err = ProveUpload(p, key, "job", "owner", cts, wits, nil); err != nil {
					b.Fatal(err)
				}
			}
			size := 0
			for _, pr := range proofs {
				size += len(pr)
			}
			b.ReportMetric(float64(size), "proof-bytes")
		})
		parts := make([]Part, len(cts))
		c1s := make([]ring.Poly, len(cts))
		for i, ct := range cts {
			parts[i] = Part{C0Digest: C0Digest(p, ct), C1: p.AppendPoly(nil, ct.Value[1]), Proof: proofs[i]}
			c1s[i] = p.RingQ().AtLevel(p.Level()).NewPoly()
		}
		b.Run(fmt.Sprintf("verify/d=%d/cts=%d", d, len(cts)), func(b *testing.B) {
			for b.Loop() {
				for first := 0; first < len(cts); first += zk.MaxGroup {
					_, size := ProofGroup(first, len(cts))
					if err := VerifyParts(p, key, "job", "owner", first, len(cts), parts[first:first+size], c1s[first:first+size]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
