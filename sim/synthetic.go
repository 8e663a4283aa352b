package sim

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
)

// Synthetic returns a CSV of rows x d features and k classes (label column
// "label"), for benchmarks at sizes the bundled data does not have. Rows are
// z = A s + e with s ~ N(0, I_r) over r = min(10, d) latent factors whose
// scales decay (so that there are leading components to find), noise e of
// standard deviation 0.3, and a class offset of norm 2 along a random
// direction. It is deterministic in its arguments.
func Synthetic(rows, d, k int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, uint64(d)))
	r := min(10, d)
	a := make([][]float64, d) // d x r loadings
	for i := range a {
		a[i] = make([]float64, r)
		for j := range a[i] {
			a[i][j] = rng.NormFloat64() * 3 / math.Sqrt(float64(d)) * math.Pow(0.7, float64(j))
		}
	}
	offsets := make([][]float64, k)
	for c := range offsets {
		offsets[c] = make([]float64, d)
		norm := 0.0
		for i := range d {
			offsets[c][i] = rng.NormFloat64()
			norm += offsets[c][i] * offsets[c][i]
		}
		for i := range d {
			offsets[c][i] *= 2 / math.Sqrt(norm)
		}
	}
	var b bytes.Buffer
	for i := range d {
		fmt.Fprintf(&b, "f%d,", i+1)
	}
	b.WriteString("label\n")
	s := make([]float64, r)
	buf := make([]byte, 0, 32)
	for range rows {
		c := rng.IntN(k)
		for j := range s {
			s[j] = rng.NormFloat64()
		}
		for i := range d {
			x := offsets[c][i] + 0.3*rng.NormFloat64()
			for j := range s {
				x += a[i][j] * s[j]
			}
			buf = strconv.AppendFloat(buf[:0], x, 'g', 6, 64)
			b.Write(buf)
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "c%d\n", c)
	}
	return b.Bytes()
}
