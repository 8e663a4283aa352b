package power

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"math/big"

	"gonum.org/v1/gonum/mat"
)

// QMatrix is a public d x p matrix in integers at scale 2^H, row-major:
// what owners multiply their rows by. A QMatrix is not safe for concurrent
// mutation; owners only read it.
type QMatrix struct {
	D, P int
	H    uint
	Data []int64
}

// At returns entry (i, j).
func (q *QMatrix) At(i, j int) int64 { return q.Data[i*q.P+j] }

// Hash is the SHA-256 of the matrix's shape and entries: what a round's spec
// names.
func (q *QMatrix) Hash() [32]byte {
	h := sha256.New()
	h.Write([]byte("fedpca power Q v1\x00"))
	var b [8]byte
	for _, x := range []uint64{uint64(q.D), uint64(q.P), uint64(q.H)} {
		binary.LittleEndian.PutUint64(b[:], x)
		h.Write(b[:])
	}
	buf := make([]byte, 0, 8*1024)
	for i, x := range q.Data {
		buf = binary.LittleEndian.AppendUint64(buf, uint64(x))
		if len(buf) == cap(buf) || i == len(q.Data)-1 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// CheckQ verifies, in integers, that q is a public matrix a round may use:
// its shape is (d, p) at scale 2^h, every entry is within [-2^h, 2^h], and
// the largest absolute row sum of the Gram matrix G = Qq^T Qq is at most
// 2^(2h). The row sum bounds the largest eigenvalue of G (Gershgorin), so
// ||Qq||_2 <= 2^h and a row changes the round's statistic by at most B^2 2^h
// in Frobenius norm: the sensitivity the calibration assumes.
func CheckQ(q *QMatrix, d, p int, h uint) error {
	switch {
	case q == nil:
		return fmt.Errorf("power: no public matrix")
	case q.D != d || q.P != p || q.H != h:
		return fmt.Errorf("power: public matrix is %d x %d at 2^%d, the job's is %d x %d at 2^%d", q.D, q.P, q.H, d, p, h)
	case len(q.Data) != d*p:
		return fmt.Errorf("power: public matrix has %d entries, want %d", len(q.Data), d*p)
	case d > MaxD || h > MaxQBits:
		return fmt.Errorf("power: public matrix %d x %d at 2^%d beyond the limits", d, p, h)
	}
	one := int64(1) << h
	for i, x := range q.Data {
		if x > one || x < -one {
			return fmt.Errorf("power: public matrix entry (%d, %d) = %d outside [-2^%d, 2^%d]", i/p, i%p, x, h, h)
		}
	}
	g := gram(q)
	limit := new(big.Int).Lsh(big.NewInt(1), 2*h)
	var row, t big.Int
	for i := range p {
		row.SetInt64(0)
		for j := range p {
			x := g[i*p+j]
			if x < 0 {
				x = -x
			}
			row.Add(&row, t.SetInt64(x))
		}
		if row.Cmp(limit) > 0 {
			return fmt.Errorf("power: public matrix's Gram row %d sums to %s > 2^%d: its spectral norm may exceed 2^h", i, row.String(), 2*h)
		}
	}
	return nil
}

// gram returns Qq^T Qq (p x p, row-major); entries fit int64 for d <= MaxD
// and |entries| <= 2^MaxQBits.
func gram(q *QMatrix) []int64 {
	p := q.P
	g := make([]int64, p*p)
	for r := range q.D {
		row := q.Data[r*p : (r+1)*p]
		for i, a := range row {
			if a == 0 {
				continue
			}
			gi := g[i*p : (i+1)*p]
			for j := i; j < p; j++ {
				gi[j] += a * row[j]
			}
		}
	}
	for i := range p {
		for j := range i {
			g[i*p+j] = g[j*p+i]
		}
	}
	return g
}

// shrink is the factor by which Quantize scales Q before rounding, and
// again for each retry: rounding adds about sqrt(d p)/2 to ||2^h Q||, and
// the shrink keeps the rounded matrix inside CheckQ's bound.
const shrink = 1 - 1.0/64

// Quantize rounds a public matrix with orthonormal columns (float64: a
// public value) to the integers round(2^h c Q) that pass CheckQ, with c =
// (1 - 2^-6)^j for the smallest j >= 1 that passes. It returns the matrix and
// c. The owners see only the integers; the user divides by them (Decode).
func Quantize(Q *mat.Dense, h uint) (*QMatrix, float64, error) {
	d, p := Q.Dims()
	scale := math.Ldexp(1, int(h))
	c := shrink
	for range 16 {
		out := &QMatrix{D: d, P: p, H: h, Data: make([]int64, d*p)}
		for i := range d {
			for j := range p {
				out.Data[i*p+j] = int64(math.Round(scale * c * Q.At(i, j)))
			}
		}
		if err := CheckQ(out, d, p, h); err == nil {
			return out, c, nil
		}
		c *= shrink
	}
	return nil, 0, fmt.Errorf("power: a %d x %d matrix at 2^%d does not pass the Gram test after 16 shrinks: are its columns orthonormal?", d, p, h)
}

// Float returns the matrix as floats in data units, Qq / 2^h.
func (q *QMatrix) Float() *mat.Dense {
	out := mat.NewDense(q.D, q.P, nil)
	s := math.Ldexp(1, -int(q.H))
	for i, x := range q.Data {
		out.Set(i/q.P, i%q.P, float64(x)*s)
	}
	return out
}

// Start returns Q_1: the orthonormalised d x p matrix of uniform entries in
// [-1, 1) drawn from the public seed by SHA-256 in counter mode (block i =
// SHA-256("fedpca power Q_1" || seed || uint64le(i)), 4 entries of 53 bits
// each). Every party derives the same matrix from the seed.
func Start(pr Params) (*mat.Dense, error) {
	if err := pr.Validate(); err != nil {
		return nil, err
	}
	d, p := pr.D, pr.P
	data := make([]float64, 0, d*p)
	var ctr [8]byte
	for i := uint64(0); len(data) < d*p; i++ {
		h := sha256.New()
		h.Write([]byte("fedpca power Q_1\x00"))
		h.Write(pr.Seed)
		binary.LittleEndian.PutUint64(ctr[:], i)
		h.Write(ctr[:])
		sum := h.Sum(nil)
		for j := 0; j < 4 && len(data) < d*p; j++ {
			u := binary.LittleEndian.Uint64(sum[8*j:]) >> 11 // 53 bits
			data = append(data, math.Ldexp(float64(u), -52)-1)
		}
	}
	return Orth(mat.NewDense(d, p, data))
}

// StartFrom returns Q_1 from a public d x p matrix instead of the seed: its
// columns orthonormalised. A genotype study starts from the top p
// components of a public reference panel (the practice of projecting onto
// reference PCs): from a random start the first round sees each component
// only through its projection on p random directions, about sqrt(p/d) of
// it, which the noise hides at large d (Hardt and Price's second
// condition); from the panel's components it sees all of it. The parent
// spec names the matrix by its hash (QMatrix.Hash of Quantize's integers),
// so every party uses the same start.
func StartFrom(pr Params, public *mat.Dense) (*mat.Dense, error) {
	if err := pr.Validate(); err != nil {
		return nil, err
	}
	if r, c := public.Dims(); r != pr.D || c != pr.P {
		return nil, fmt.Errorf("power: a public start of %d x %d for a %d x %d job", r, c, pr.D, pr.P)
	}
	return Orth(public)
}

// Orth returns an orthonormal basis of the columns of y (d x p, d >= p):
// Q_{t+1} = orth(Y_t). It runs modified Gram-Schmidt twice (each column
// orthogonalised against the previous ones, then again: "twice is enough",
// Giraud, Langou and Rozloznik 2005), O(d p^2), never forming a d x d
// matrix. It fails when a column is dependent on the previous ones to
// machine precision.
func Orth(y *mat.Dense) (*mat.Dense, error) {
	d, p := y.Dims()
	if d < p {
		return nil, fmt.Errorf("power: orth of a %d x %d matrix: fewer rows than columns", d, p)
	}
	cols := make([][]float64, p)
	for j := range p {
		cols[j] = mat.Col(nil, j, y)
	}
	for j, c := range cols {
		norm0 := math.Sqrt(dot(c, c))
		for range 2 {
			for _, prev := range cols[:j] {
				axpy(-dot(prev, c), prev, c)
			}
		}
		n := math.Sqrt(dot(c, c))
		if !(n > 1e-12*norm0) || norm0 == 0 {
			return nil, fmt.Errorf("power: orth: column %d is dependent on the others", j)
		}
		for i := range c {
			c[i] /= n
		}
	}
	out := mat.NewDense(d, p, nil)
	for j, c := range cols {
		out.SetCol(j, c)
	}
	return out, nil
}

func dot(a, b []float64) float64 {
	s := 0.0
	for i, x := range a {
		s += x * b[i]
	}
	return s
}

// axpy sets y += a x.
func axpy(a float64, x, y []float64) {
	for i, v := range x {
		y[i] += a * v
	}
}

// RoundID is the identity of round r of the job whose parent spec has ID
// parent, under public matrix q (nil for round 0): RoundIDFromHash with
// q's Hash. Owners' proofs and upload statements are bound to it
// (job.ProofBinding takes it as the job), so an upload of one round, or
// under another matrix, verifies for no other.
func RoundID(parent string, r int, q *QMatrix) string {
	if q == nil {
		return RoundIDFromHash(parent, r, nil)
	}
	h := q.Hash()
	return RoundIDFromHash(parent, r, h[:])
}

// RoundIDFromHash is the hex SHA-256 of a domain tag, the parent's ID, r
// and the matrix's hash (none for round 0).
func RoundIDFromHash(parent string, r int, qHash []byte) string {
	h := sha256.New()
	h.Write([]byte("fedpca power round v1\x00"))
	h.Write([]byte(parent))
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(r))
	h.Write(b[:])
	h.Write(qHash)
	return fmt.Sprintf("%x", h.Sum(nil))
}
