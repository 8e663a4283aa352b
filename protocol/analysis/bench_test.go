package analysis

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// benchMoments builds deterministic moments of n = 2d random rows in 10 classes; R = X^T X is
// symmetric positive definite.
func benchMoments(d int) Moments {
	const classes = 10
	n := 2 * d
	rng := rand.New(rand.NewPCG(uint64(d), 42))
	x := mat.NewDense(n, d, nil)
	v := make([][]float64, classes)
	for k := range v {
		v[k] = make([]float64, d)
	}
	counts := make([]float64, classes)
	for i := 0; i < n; i++ {
		k := i % classes
		counts[k]++
		for j := 0; j < d; j++ {
			z := 0.05 * (rng.NormFloat64() + float64(k%3)*0.3)
			x.Set(i, j, z)
			v[k][j] += z
		}
	}
	r := mat.NewSymDense(d, nil)
	r.SymOuterK(1, x.T())
	return Moments{R: r, V: v, N: counts}
}

func BenchmarkPCA(b *testing.B) {
	for _, d := range []int{50, 784} {
		m := benchMoments(d)
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			for b.Loop() {
				if _, err := PCA(m, 10); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDCA(b *testing.B) {
	for _, d := range []int{50, 784} {
		m := benchMoments(d)
		b.Run(fmt.Sprintf("d=%d", d), func(b *testing.B) {
			for b.Loop() {
				if _, err := DCA(m, Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
