package sim

import (
	"math"
	"testing"
)

// TestBaldingNichols: the simulated populations' frequencies differ as the
// model says (F_ST estimated from the individuals, within 0.01 of the
// model's), and the missing rate is the one asked for.
func TestBaldingNichols(t *testing.T) {
	const n, d, fst = 1200, 3000, 0.1
	c, err := BaldingNichols(GenotypeParams{N: n, D: d, Populations: 2, Owners: 3, FST: fst, Missing: 0.02, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	// Per population allele frequencies from the individuals.
	var sum [2][]float64
	var cnt [2][]float64
	for k := range sum {
		sum[k], cnt[k] = make([]float64, d), make([]float64, d)
	}
	missing, calls := 0, 0
	row := make([]int8, d)
	for o, g := range c.Owners {
		for i := range g.N() {
			g.Row(i, row)
			k := c.Pops[o][i]
			for j, x := range row {
				calls++
				if x < 0 {
					missing++
					continue
				}
				sum[k][j] += float64(x)
				cnt[k][j] += 2
			}
		}
	}
	if rate := float64(missing) / float64(calls); math.Abs(rate-0.02) > 0.002 {
		t.Errorf("missing rate %.4f, want 0.02", rate)
	}
	// Two populations drawn independently from the ancestral one differ by
	// var(p1 - p2) = 2 F p (1 - p): the ratio of averages of (p1 - p2)^2,
	// less the binomial sampling variance of the sample frequencies, to
	// 2 p (1 - p) estimates F.
	num, den := 0.0, 0.0
	for j := range d {
		p1, p2 := sum[0][j]/cnt[0][j], sum[1][j]/cnt[1][j]
		p := c.Ancestral[j]
		samp := p1*(1-p1)/(cnt[0][j]-1) + p2*(1-p2)/(cnt[1][j]-1)
		num += (p1-p2)*(p1-p2) - samp
		den += 2 * p * (1 - p)
	}
	if got := num / den; math.Abs(got-fst) > 0.01 {
		t.Errorf("F_ST from the individuals %.4f, want %.2f", got, fst)
	}
	if len(c.Owners) != 3 || c.Owners[0].N() != 400 {
		t.Errorf("owners %d with %d individuals", len(c.Owners), c.Owners[0].N())
	}
}
