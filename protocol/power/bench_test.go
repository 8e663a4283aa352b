package power

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkAccumulate is an owner's round statistic, sum q (q^T Qq), per
// row at d = 10,000 and p = 20 (the genotype target), rows at the clip
// norm: 2 d p multiply-adds a row in int64.
func BenchmarkAccumulate(b *testing.B) {
	pr := Params{D: 10_000, K: 10, P: 20, Rounds: 1, Seed: []byte("bench"), Bits: 8, Bound: 25_600, QBits: 14, MaxRows: 10_000}
	qq := startQ(b, pr)
	rng := rand.New(rand.NewPCG(1, 1))
	rows := make([][]int64, 64)
	for i := range rows {
		rows[i] = make([]int64, pr.D)
		for j := range rows[i] {
			rows[i][j] = int64(rng.IntN(511) - 255) // ||q|| <= 255 * 100 < B
		}
	}
	b.ResetTimer()
	for range b.N {
		acc, err := NewAccumulator(pr, qq, 64)
		if err != nil {
			b.Fatal(err)
		}
		if err := acc.Add(rows); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/row")
}
