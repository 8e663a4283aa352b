package he

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// conversionBench sets up a 2-of-3 committee (member 2 down) and one
// ciphertext of d = 50 statistics (1,275 + 50 + 1 values).
func conversionBench(b *testing.B) (Params, []*Member, []Point, *rlwe.Ciphertext) {
	p := params(b)
	members, cpk := committee(b, p, Committee{N: 3, Threshold: 2})
	enc, _ := NewEncryptor(p, cpk)
	cts, err := enc.EncryptVector(randVec(rand.New(rand.NewPCG(1, 2)), packedLen(50, 1), 1<<40))
	if err != nil {
		b.Fatal(err)
	}
	return p, members, []Point{1, 3}, cts[0]
}

// reportMessage reports the bytes of one public share (lattigo's encoding)
// and logs them for 1 ciphertext and for 39 (d = 784, K = 10). Call it after
// the benchmark loop.
func reportMessage(b *testing.B, p Params, what string, s *ConversionShare) {
	size := s.BinarySize()
	b.ReportMetric(float64(size), "B/msg")
	n39 := p.Chunks(packedLen(784, 10))
	b.Logf("%s: %d bytes per message for 1 ciphertext, %d for the %d of d = 784, K = 10", what, size, n39*size, n39)
}

// BenchmarkEncToShare: encryption to shares of one ciphertext by 2 of 3
// members: one member's step (its share, its public share with flooding),
// the proxy's sum of the 2 public shares, the receiver's GetShare.
func BenchmarkEncToShare(b *testing.B) {
	p, members, active, ct := conversionBench(b)
	var pubs []*ConversionShare
	own := map[Point]SlotShare{}
	for _, pt := range active {
		s, pub, err := members[pt-1].EncToShare(ct, active)
		if err != nil {
			b.Fatal(err)
		}
		own[pt], pubs = s, append(pubs, pub)
	}
	agg, err := AggregateConversionShares(p, pubs)
	if err != nil {
		b.Fatal(err)
	}
	r := ConversionReceiver(active)
	b.Run("member", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := members[2].EncToShare(ct, active); err != nil {
				b.Fatal(err)
			}
		}
		reportMessage(b, p, "encryption to shares, public share", pubs[0])
	})
	b.Run("aggregate", func(b *testing.B) {
		for b.Loop() {
			if _, err := AggregateConversionShares(p, pubs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("getshare", func(b *testing.B) {
		for b.Loop() {
			if _, err := members[r-1].GetShare(ct, active, agg, own[r]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkShareToEnc: shares to encryption of one ciphertext's slot
// shares by 2 of 3 members: one member's share, the proxy's combination
// into the ciphertext.
func BenchmarkShareToEnc(b *testing.B) {
	p, members, active, ct := conversionBench(b)
	shares, _, _ := encToShares(b, p, members, active, ct)
	seed := []byte("fedpca bench job conversion 0 ciphertext 0")
	var pubs []*ConversionShare
	for _, pt := range active {
		s, err := members[pt-1].ShareToEncShare(seed, active, shares[pt])
		if err != nil {
			b.Fatal(err)
		}
		pubs = append(pubs, s)
	}
	b.Run("member", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			s := []byte(fmt.Sprintf("fedpca bench job conversion %d ciphertext 0", i))
			if _, err := members[2].ShareToEncShare(s, active, shares[3]); err != nil {
				b.Fatal(err)
			}
		}
		reportMessage(b, p, "shares to encryption, public share", pubs[0])
	})
	b.Run("combine", func(b *testing.B) {
		for b.Loop() {
			if _, err := ShareToEnc(p, seed, pubs); err != nil {
				b.Fatal(err)
			}
		}
	})
}
