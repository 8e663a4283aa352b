package eigen

import (
	"fmt"
	"math/bits"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/he/hefloat"
)

// Layout packs a matrix of at most R rows and p columns into the slots:
// entry (r, c) sits at slot r W + c and again at r W + c + p (each row is
// stored twice, so that a rotation by t < p shifts every row cyclically),
// with R = 2^ceil(log2 d) and W = slots / R, so that the R x W grid fills
// the slots exactly once and a rotation by a multiple of W shifts the rows
// cyclically. Rows d..R-1 and columns 2p..W-1 are zero. One copy only: a
// grid repeated over the slots would carry copies whose noise differs, and
// the row rotations mix copies (measured: the copies drift apart about
// threefold per iteration under the polar steps, which wrecked the product).
type Layout struct {
	D, P, R, W, Slots int
}

// NewLayout returns the layout of d x p blocks in slots slots.
func NewLayout(d, p, slots int) (Layout, error) {
	if d < 1 || p < 1 || p > d {
		return Layout{}, fmt.Errorf("block of %d x %d: want 1 <= p <= d", d, p)
	}
	l := Layout{D: d, P: p, R: pow2(d), Slots: slots}
	l.W = slots / l.R
	if l.W < 2*p {
		return Layout{}, fmt.Errorf("d = %d, p = %d: rows of %d slots cannot hold 2p", d, p, l.W)
	}
	return l, nil
}

func pow2(x int) int {
	if x <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(x-1))
}

// Pack lays out m (d rows of p values).
func (l Layout) Pack(m [][]float64) []float64 {
	v := make([]float64, l.Slots)
	for base := 0; base < l.Slots; base += l.R * l.W {
		for r := range l.D {
			for c := range l.P {
				v[base+r*l.W+c] = m[r][c]
				v[base+r*l.W+c+l.P] = m[r][c]
			}
		}
	}
	return v
}

// Unpack reads a d x p matrix from the first grid.
func (l Layout) Unpack(v []float64) [][]float64 {
	m := make([][]float64, l.D)
	for r := range l.D {
		m[r] = make([]float64, l.P)
		for c := range l.P {
			m[r][c] = v[r*l.W+c]
		}
	}
	return m
}

// diagonals returns C's R generalised diagonals, each broadcast along the
// rows: slot (r, c) of diagonal t holds C[r][(r + t) mod R] / B for every c
// (zero where r or (r + t) mod R is d or more).
func (l Layout) diagonals(cov [][]float64, bound float64) [][]float64 {
	out := make([][]float64, l.R)
	for t := range l.R {
		v := make([]float64, l.Slots)
		for base := 0; base < l.Slots; base += l.R * l.W {
			for r := range l.D {
				j := (r + t) % l.R
				if j >= l.D {
					continue
				}
				for c := range l.W {
					v[base+r*l.W+c] = cov[r][j] / bound
				}
			}
		}
		out[t] = v
	}
	return out
}

// mask is 1 in the first p columns of every row, 0 elsewhere, times x.
func (l Layout) mask(x float64) []float64 {
	v := make([]float64, l.Slots)
	for i := range v {
		if i%l.W < l.P {
			v[i] = x
		}
	}
	return v
}

// Config holds the public parameters of a run.
type Config struct {
	D, K       int
	Iterations int      // fixed count of subspace iterations
	NS         []NSStep // the Newton-Schulz steps after each product
	Bound      float64  // B >= lambda_1, public
	Baby       int      // baby steps of the product (giant = R / Baby)
}

// NSStep is one polar step X <- X (A I - B X^T X).
type NSStep struct{ A, B float64 }

// Steep is the cubic a s - b s^3 whose maximum is 1 at s = 0.6 (slope 2.5 at
// 0, f(1) = 0.185): it lifts small singular values 2.5 times per step and
// maps [0, 1] into [0, 1] without a zero.
var Steep = NSStep{A: 1.5 / 0.6, B: 0.5 / (0.6 * 0.6 * 0.6)}

// Classic is Higham's cubic 1.5 s - 0.5 s^3, which converges to 1.
var Classic = NSStep{A: 1.5, B: 0.5}

// Block returns p = min(d, k + 10).
func Block(d, k int) int { return min(d, k+10) }

// Stats counts what a run cost (the caller times it: protocol/ reads no
// clock; Solver.AfterIteration is the hook).
type Stats struct {
	Refreshes, Rotations, Products int
}

// Solver runs the iteration for one committee and one layout.
type Solver struct {
	cfg   Config
	l     Layout
	c     *Committee
	eval  *hefloat.Evaluator
	enc   *hefloat.Encoder
	encr  *rlwe.Encryptor
	diag  []*rlwe.Ciphertext // the pre-rotated diagonals of C / B
	Stats Stats
	// AfterIteration, if set, is called after each iteration.
	AfterIteration func(iteration int)
}

// Rotations lists the rotations a solver for (d, k) needs keys for.
func Rotations(d, k, baby int) ([]int, error) {
	l, err := NewLayout(d, Block(d, k), 1<<(ParamsLiteral.LogN-1))
	if err != nil {
		return nil, err
	}
	rots := []int{1, -l.P, l.W, baby * l.W}
	for s := l.W; s < l.R*l.W; s *= 2 {
		rots = append(rots, s)
	}
	return rots, nil
}

// NewSolver encrypts C's diagonals under the committee's public key (the
// placeholder for the conversion from the owners' aggregate).
func NewSolver(c *Committee, cfg Config, cov [][]float64) (*Solver, error) {
	p := Block(cfg.D, cfg.K)
	l, err := NewLayout(cfg.D, p, c.Params.MaxSlots())
	if err != nil {
		return nil, err
	}
	if cfg.Baby < 1 || l.R%cfg.Baby != 0 {
		return nil, fmt.Errorf("baby steps %d do not divide R = %d", cfg.Baby, l.R)
	}
	s := &Solver{cfg: cfg, l: l, c: c,
		eval: hefloat.NewEvaluator(c.Params, c.Evk),
		enc:  hefloat.NewEncoder(c.Params),
		encr: rlwe.NewEncryptor(c.Params, c.PK)}
	diags := l.diagonals(cov, cfg.Bound)
	for t := range l.R {
		giant := (t / cfg.Baby) * cfg.Baby * l.W
		// Pre-rotate by -giant: rot_giant(rot_-giant(D_t) * rot_baby(Q)).
		v := rotateSlots(diags[t], -giant)
		ct, err := s.encrypt(v)
		if err != nil {
			return nil, err
		}
		s.diag = append(s.diag, ct)
	}
	return s, nil
}

func rotateSlots(v []float64, k int) []float64 {
	n := len(v)
	out := make([]float64, n)
	for i := range v {
		out[i] = v[((i+k)%n+n)%n]
	}
	return out
}

func (s *Solver) encrypt(v []float64) (*rlwe.Ciphertext, error) {
	pt := hefloat.NewPlaintext(s.c.Params, s.c.Params.MaxLevel())
	if err := s.enc.Encode(v, pt); err != nil {
		return nil, err
	}
	return s.encr.EncryptNew(pt)
}

// Layout is the solver's packing.
func (s *Solver) Layout() Layout { return s.l }

func (s *Solver) rotate(ct *rlwe.Ciphertext, k int) (*rlwe.Ciphertext, error) {
	s.Stats.Rotations++
	return s.eval.RotateNew(ct, k)
}

// ensure refreshes ct if fewer than levels levels remain above the refresh
// level.
func (s *Solver) ensure(ct *rlwe.Ciphertext, levels int) error {
	if ct.Level()-levels >= s.c.MinRefreshLevel() {
		return nil
	}
	s.Stats.Refreshes++
	return s.c.Refresh(ct)
}

// product returns (C / B) Q: sum over t of D_t * rot_{tW}(Q), by baby and
// giant steps (Horner in the giant rotation).
func (s *Solver) product(q *rlwe.Ciphertext) (*rlwe.Ciphertext, error) {
	l, b := s.l, s.cfg.Baby
	babies := []*rlwe.Ciphertext{q}
	for j := 1; j < b; j++ {
		r, err := s.rotate(babies[j-1], l.W)
		if err != nil {
			return nil, err
		}
		babies = append(babies, r)
	}
	var acc *rlwe.Ciphertext
	for g := l.R/b - 1; g >= 0; g-- {
		inner := hefloat.NewCiphertext(s.c.Params, 2, q.Level())
		inner.Scale = s.diag[0].Scale.Mul(q.Scale)
		for j := range b {
			if err := s.eval.MulThenAdd(s.diag[g*b+j], babies[j], inner); err != nil {
				return nil, err
			}
			s.Stats.Products++
		}
		if err := s.eval.Relinearize(inner, inner); err != nil {
			return nil, err
		}
		if acc != nil {
			r, err := s.rotate(acc, b*l.W)
			if err != nil {
				return nil, err
			}
			if err := s.eval.Add(inner, r, inner); err != nil {
				return nil, err
			}
		}
		acc = inner
	}
	if err := s.eval.Rescale(acc, acc); err != nil {
		return nil, err
	}
	return acc, nil
}

// polar is one step X (a I - b X^T X). With h_t[c] = H[(c + t) mod p][c],
// (X H)[r][c] = sum_t X[r][(c + t) mod p] h_t[c], and g_t[c] (the same
// diagonal of G = X^T X) is the column sum of X_t * X, X_t the rows shifted
// by t: p rotations for the shifts, p log2 R for the column sums.
func (s *Solver) polar(x *rlwe.Ciphertext, st NSStep) (*rlwe.Ciphertext, error) {
	l := s.l
	// Drop the slots' imaginary parts, which the polynomial would amplify
	// (X^T X is a transpose, not a conjugate transpose): X' = X + conj(X)
	// = 2 Re X, and X' (a/2 I - b/8 X'^T X') = Re X (a I - b (Re X)^T Re X).
	conj, err := s.eval.ConjugateNew(x)
	if err != nil {
		return nil, err
	}
	s.Stats.Rotations++
	if err := s.eval.Add(conj, x, conj); err != nil {
		return nil, err
	}
	x = conj
	st = NSStep{A: st.A / 2, B: st.B / 8}
	shifts := []*rlwe.Ciphertext{x}
	for t := 1; t < l.P; t++ {
		r, err := s.rotate(shifts[t-1], 1)
		if err != nil {
			return nil, err
		}
		shifts = append(shifts, r)
	}
	maskB := l.mask(-st.B)
	out := hefloat.NewCiphertext(s.c.Params, 2, x.Level())
	var h []*rlwe.Ciphertext
	for t := range l.P {
		g, err := s.eval.MulRelinNew(shifts[t], x)
		if err != nil {
			return nil, err
		}
		s.Stats.Products++
		if err := s.eval.Rescale(g, g); err != nil {
			return nil, err
		}
		for sh := l.W; sh < l.R*l.W; sh *= 2 {
			r, err := s.rotate(g, sh)
			if err != nil {
				return nil, err
			}
			if err := s.eval.Add(g, r, g); err != nil {
				return nil, err
			}
		}
		if err := s.eval.Mul(g, maskB, g); err != nil {
			return nil, err
		}
		if err := s.eval.Rescale(g, g); err != nil {
			return nil, err
		}
		if t == 0 {
			if err := s.eval.Add(g, l.mask(st.A), g); err != nil {
				return nil, err
			}
		}
		h = append(h, g)
	}
	out.Scale = shifts[0].Scale.Mul(h[0].Scale)
	for t := range l.P {
		if err := s.eval.MulThenAdd(shifts[t], h[t], out); err != nil {
			return nil, err
		}
		s.Stats.Products++
	}
	if err := s.eval.Relinearize(out, out); err != nil {
		return nil, err
	}
	if err := s.eval.Rescale(out, out); err != nil {
		return nil, err
	}
	// Restore the rows' second copy.
	r, err := s.rotate(out, -l.P)
	if err != nil {
		return nil, err
	}
	if err := s.eval.Add(out, r, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Run iterates from the public start q0 (d x p) and returns the encrypted
// block Q and C Q / B.
func (s *Solver) Run(q0 [][]float64) (q, y *rlwe.Ciphertext, err error) {
	if q, err = s.encrypt(s.l.Pack(q0)); err != nil {
		return nil, nil, err
	}
	for it := range s.cfg.Iterations {
		if err := s.ensure(q, 1+3*min(1, len(s.cfg.NS))); err != nil {
			return nil, nil, err
		}
		if q, err = s.product(q); err != nil {
			return nil, nil, err
		}
		for _, st := range s.cfg.NS {
			if err := s.ensure(q, 3); err != nil {
				return nil, nil, err
			}
			if q, err = s.polar(q, st); err != nil {
				return nil, nil, err
			}
		}
		if s.AfterIteration != nil {
			s.AfterIteration(it)
		}
	}
	if err := s.ensure(q, 1); err != nil {
		return nil, nil, err
	}
	if y, err = s.product(q); err != nil {
		return nil, nil, err
	}
	return q, y, nil
}

// Decode decrypts ct with sk (the user's key after Release) and unpacks it.
func (s *Solver) Decode(ct *rlwe.Ciphertext, sk *rlwe.SecretKey) ([][]float64, error) {
	pt := rlwe.NewDecryptor(s.c.Params, sk).DecryptNew(ct)
	v := make([]float64, s.l.Slots)
	if err := s.enc.Decode(pt, v); err != nil {
		return nil, err
	}
	return s.l.Unpack(v), nil
}
