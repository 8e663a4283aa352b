package dp

import (
	"fmt"
	"math/big"
	"testing"
)

// The benchmarks read crypto/rand (nil reader), as production does.

func BenchmarkSample(b *testing.B) {
	for _, c := range samplerCases() {
		b.Run(c.name, func(b *testing.B) {
			s, err := NewSampler(c.sigma2, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Sample(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkFill(b *testing.B) {
	const n = 4096
	dst := make([]int64, n)
	for _, c := range samplerCases() {
		b.Run(c.name, func(b *testing.B) {
			s, err := NewSampler(c.sigma2, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := s.Fill(dst); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/draw")
		})
	}
}

// BenchmarkParallelFill fills 300,000 values at sigma = 2^40, the size of a
// large noise share in the protocol.
func BenchmarkParallelFill(b *testing.B) {
	const n = 300_000
	sigma2 := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), 80))
	dst := make([]int64, n)
	for _, workers := range []int{1, 0} {
		name := fmt.Sprintf("workers=%d", workers)
		if workers == 0 {
			name = "workers=GOMAXPROCS"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				if err := ParallelFill(dst, sigma2, nil, workers); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/draw")
		})
	}
}

func BenchmarkEpsilonFor(b *testing.B) {
	for b.Loop() {
		EpsilonFor(2.63, 1e-10)
	}
}

func BenchmarkRhoFor(b *testing.B) {
	for b.Loop() {
		if _, err := RhoFor(1, 1e-6); err != nil {
			b.Fatal(err)
		}
	}
}
