package zk

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tuneinsight/lattigo/v5/ring"
)

// The parameters of the proof (see the package documentation).
const (
	// Reps is the number of parallel repetitions: 2N = 2^14 challenges
	// each, 2^-140 soundness error per random-oracle query.
	Reps = 10
	// LogBu and LogBe are log2 of the mask bounds B_u and B_e: mask
	// coefficients are uniform over [-B, B).
	LogBu = 18
	LogBe = 22
	// BetaU and BetaE bound the honest witness: u ternary, |e1| <= 19
	// (lattigo's Gaussian sampler at sigma 3.2 truncated at 19.2).
	BetaU = 1
	BetaE = 19
	// Bu and Be are the mask bounds.
	Bu = 1 << LogBu
	Be = 1 << LogBe
	// ZuMax and ZeMax bound an accepted response: z in [-Max, Max - 1].
	ZuMax = Bu - BetaU
	ZeMax = Be - BetaE
	// maxAttempts bounds the prover's restarts (the chance of needing more
	// with an honest witness is 0.495^1000, about 2^-1014).
	maxAttempts = 1000
	// domain separates this proof's hashes from every other use of SHA-256.
	domain = "fedpca/zk/rlwe-pk-c1/v1"
)

// ErrInvalid reports a proof that does not verify.
var ErrInvalid = errors.New("invalid proof")

// Bounds are the proven bounds on the preimage (u*, e*) of 2 c1 that an
// accepted proof guarantees its prover knows (2 c1 = a u* + e* mod Q).
type Bounds struct {
	// UInf, EInf bound the infinity norms; U2, E2 the Euclidean norms.
	UInf, EInf, U2, E2 float64
}

// ProvenBounds returns the bounds of the relaxed relation that the proof
// guarantees at ring degree n (see the package documentation):
// |u*|_inf <= n 2 (B_u - 1), |u*|_2 <= (2n/pi) sqrt(n) 2 (B_u - 1), and the
// same with B_e - 19 for e*.
func ProvenBounds(n int) Bounds {
	fn := float64(n)
	op := 2 * fn / math.Pi // operator norm of multiplication by 2/(X^m - 1)
	du, de := 2*float64(ZuMax), 2*float64(ZeMax)
	return Bounds{UInf: fn * du, EInf: fn * de, U2: op * math.Sqrt(fn) * du, E2: op * math.Sqrt(fn) * de}
}

// Witness is the randomness of a public-key encryption's second component,
// c1 = a u + e1, as signed integer coefficients. It is secret: with u the
// ciphertext decrypts.
type Witness struct {
	U, E []int8
}

// Proof is a proof of a well-formed c1.
type Proof struct {
	// Seed is the Fiat-Shamir hash from which the challenges come.
	Seed [32]byte
	// Zu and Ze are the responses, N coefficients each.
	Zu, Ze [Reps][]int32
}

// Key holds what every statement under one committee key shares: the ring
// at the ciphertexts' level and the key's a. It is safe for concurrent use.
type Key struct {
	rq      *ring.Ring
	a       ring.Poly // NTT and Montgomery form, as lattigo stores public keys
	digest  [32]byte  // SHA-256 of a's coefficients
	scratch sync.Pool // *work
}

// work is one proof's scratch space.
type work struct {
	vu, ve, w ring.Poly
	buf       []byte
}

// NewKey returns the key for the ring rq (at the ciphertexts' level) and
// the public key's second component a, in the NTT domain and Montgomery
// form (rlwe.PublicKey.Value[1].Q).
func NewKey(rq *ring.Ring, a ring.Poly) (*Key, error) {
	if rq.N()&(rq.N()-1) != 0 || rq.N() < 2 {
		return nil, fmt.Errorf("zk: ring degree %d is not a power of two", rq.N())
	}
	if a.Level() < rq.Level() || a.N() != rq.N() {
		return nil, errors.New("zk: the public key does not fit the ring")
	}
	k := &Key{rq: rq, a: *a.CopyNew()}
	h := sha256.New()
	k.writePoly(h, k.a, nil)
	copy(k.digest[:], h.Sum(nil))
	k.scratch.New = func() any {
		return &work{vu: rq.NewPoly(), ve: rq.NewPoly(), w: rq.NewPoly(), buf: make([]byte, 8*rq.N())}
	}
	return k, nil
}

// N returns the ring degree.
func (k *Key) N() int { return k.rq.N() }

// writePoly hashes p's coefficients (every row, little-endian uint64),
// through buf (8N bytes; nil allocates one).
func (k *Key) writePoly(h hash.Hash, p ring.Poly, buf []byte) {
	if buf == nil {
		buf = make([]byte, 8*k.rq.N())
	}
	for _, row := range p.Coeffs[:k.rq.Level()+1] {
		for i, c := range row {
			binary.LittleEndian.PutUint64(buf[8*i:], c)
		}
		h.Write(buf)
	}
}

// checkC1 validates the statement's c1: a polynomial of the ring with
// coefficients reduced modulo each prime.
func (k *Key) checkC1(c1 ring.Poly) error {
	if c1.N() != k.rq.N() || c1.Level() < k.rq.Level() {
		return errors.New("zk: c1 does not fit the ring")
	}
	for j, s := range k.rq.SubRings[:k.rq.Level()+1] {
		for _, c := range c1.Coeffs[j] {
			if c >= s.Modulus {
				return errors.New("zk: c1 has an unreduced coefficient")
			}
		}
	}
	return nil
}

// transcript starts the Fiat-Shamir hash of a statement: the domain, the
// key, the binding and c1 (NTT form).
func (k *Key) transcript(c1 ring.Poly, binding []byte, buf []byte) hash.Hash {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(domain)))
	h.Write(n[:])
	h.Write([]byte(domain))
	binary.BigEndian.PutUint64(n[:], uint64(k.rq.N()))
	h.Write(n[:])
	h.Write(k.digest[:])
	binary.BigEndian.PutUint64(n[:], uint64(len(binding)))
	h.Write(n[:])
	h.Write(binding)
	k.writePoly(h, c1, buf)
	return h
}

// challenges expands the seed into one exponent k in [0, 2N) per
// repetition (the challenge X^k; X^N = -1).
func (k *Key) challenges(seed [32]byte) [Reps]int {
	x := sha256.Sum256(append(seed[:], "challenges"...))
	var out [Reps]int
	mask := 2*k.rq.N() - 1
	for r := range out {
		out[r] = int(binary.LittleEndian.Uint16(x[2*r:])) & mask
	}
	return out
}

// commit computes w = a vu + ve in the NTT domain, vu and ve given in the
// coefficient domain (and overwritten), and returns its SHA-256.
func (k *Key) commit(wk *work) [32]byte {
	k.rq.NTT(wk.vu, wk.vu)
	k.rq.NTT(wk.ve, wk.ve)
	wk.w.Copy(wk.ve)
	k.rq.MulCoeffsMontgomeryThenAdd(wk.vu, k.a, wk.w)
	h := sha256.New()
	k.writePoly(h, wk.w, wk.buf)
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// setSigned writes signed integers into p (coefficient domain), reduced
// modulo each prime.
func (k *Key) setSigned(p ring.Poly, v []int32) {
	for j, s := range k.rq.SubRings[:k.rq.Level()+1] {
		q, row := s.Modulus, p.Coeffs[j][:len(v)]
		for i, x := range v {
			// x + q when x < 0, branch-free (the signs are the masks'
			// coin flips).
			row[i] = uint64(int64(x)) + q&uint64(int64(x)>>63)
		}
	}
}

// Prove proves that c1 (NTT domain) = a u + e1 for the witness, bound to
// binding (the caller's statement: job, owner, index, the hash of c0). The
// masks come from rnd (crypto/rand when nil). The repetitions' commitments
// are computed on up to GOMAXPROCS goroutines.
func (k *Key) Prove(c1 ring.Poly, binding []byte, w Witness, rnd io.Reader) (*Proof, error) {
	n := k.rq.N()
	if err := k.checkC1(c1); err != nil {
		return nil, err
	}
	if err := checkWitness(w, n); err != nil {
		return nil, err
	}
	if rnd == nil {
		rnd = rand.Reader
	}
	p := &Proof{}
	var yu, ye [Reps][]int32
	for r := range Reps {
		yu[r], ye[r] = make([]int32, n), make([]int32, n)
		p.Zu[r], p.Ze[r] = make([]int32, n), make([]int32, n)
	}
	// The transcript's prefix is the same for every attempt.
	prefix, err := k.prefix(c1, binding)
	if err != nil {
		return nil, err
	}
	// Each attempt's masks: maskBytes per coefficient of each polynomial.
	random := make([]byte, Reps*n*2*maskBytes)
	var digests [Reps][32]byte
	for range maxAttempts {
		if _, err := io.ReadFull(rnd, random); err != nil {
			return nil, fmt.Errorf("zk: masks: %w", err)
		}
		k.parallel(func(r int, wk *work) {
			off := r * n * 2 * maskBytes
			uniform(random[off:off+n*maskBytes], yu[r], LogBu)
			uniform(random[off+n*maskBytes:off+2*n*maskBytes], ye[r], LogBe)
			k.setSigned(wk.vu, yu[r])
			k.setSigned(wk.ve, ye[r])
			digests[r] = k.commit(wk)
		})
		p.Seed = seed(prefix, &digests)
		cs := k.challenges(p.Seed)
		ok := true
		for r := 0; r < Reps && ok; r++ {
			ok = respond(p.Zu[r], yu[r], w.U, cs[r], ZuMax) && respond(p.Ze[r], ye[r], w.E, cs[r], ZeMax)
		}
		if ok {
			return p, nil
		}
	}
	return nil, errors.New("zk: no accepted attempt (the witness is not short, or the randomness is broken)")
}

// maskBytes is the randomness of one mask coefficient (LogBe + 1 <= 24
// bits).
const maskBytes = 3

// prefix returns the transcript's state after the statement.
func (k *Key) prefix(c1 ring.Poly, binding []byte) ([]byte, error) {
	wk := k.scratch.Get().(*work)
	defer k.scratch.Put(wk)
	h := k.transcript(c1, binding, wk.buf)
	state, err := h.(interface{ MarshalBinary() ([]byte, error) }).MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("zk: %w", err)
	}
	return state, nil
}

// seed is the Fiat-Shamir hash: the statement's transcript, then the
// digest of each repetition's commitment in order.
func seed(prefix []byte, digests *[Reps][32]byte) [32]byte {
	h := sha256.New()
	if err := h.(interface{ UnmarshalBinary([]byte) error }).UnmarshalBinary(prefix); err != nil {
		panic(err) // a state sha256 itself encoded
	}
	for _, d := range digests {
		h.Write(d[:])
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}

// parallel runs f for every repetition on up to GOMAXPROCS goroutines, each
// with its own scratch space.
func (k *Key) parallel(f func(r int, wk *work)) {
	var next atomic.Int32
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), Reps) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := k.scratch.Get().(*work)
			defer k.scratch.Put(wk)
			for r := int(next.Add(1)) - 1; r < Reps; r = int(next.Add(1)) - 1 {
				f(r, wk)
			}
		}()
	}
	wg.Wait()
}

// checkWitness checks the witness's shape and bounds.
func checkWitness(w Witness, n int) error {
	if len(w.U) != n || len(w.E) != n {
		return fmt.Errorf("zk: witness of %d and %d coefficients, want %d", len(w.U), len(w.E), n)
	}
	for i := range n {
		if w.U[i] < -BetaU || w.U[i] > BetaU || w.E[i] < -BetaE || w.E[i] > BetaE {
			return fmt.Errorf("zk: witness coefficient %d out of bounds", i)
		}
	}
	return nil
}

// uniform fills out with integers uniform over [-2^logB, 2^logB) from
// maskBytes-byte little-endian words of b (logB + 1 <= 8 maskBytes).
func uniform(b []byte, out []int32, logB uint) {
	off := int32(1) << logB
	mask := uint32(1)<<(logB+1) - 1
	for i := range out {
		j := maskBytes * i
		v := uint32(b[j]) | uint32(b[j+1])<<8 | uint32(b[j+2])<<16
		out[i] = int32(v&mask) - off
	}
}

// respond sets z = y + X^c w (negacyclic) and reports whether every
// coefficient is in [-max, max - 1], the interval on which accepted
// responses are uniform whatever the witness.
func respond(z, y []int32, w []int8, c int, max int32) bool {
	n := len(z)
	for i := range n {
		j, neg := monomialTerm(i, c, n)
		v := int64(y[i]) + int64(w[j])
		if neg {
			v = int64(y[i]) - int64(w[j])
		}
		if v < -int64(max) || v > int64(max)-1 {
			return false
		}
		z[i] = int32(v)
	}
	return true
}

// Verify checks a proof that c1 (NTT domain) = a u + e1 with short u, e1,
// bound to binding. The responses' bounds are checked by Unmarshal and again
// here.
func (k *Key) Verify(c1 ring.Poly, binding []byte, p *Proof) error {
	n := k.rq.N()
	if err := k.checkC1(c1); err != nil {
		return err
	}
	for r := range Reps {
		if len(p.Zu[r]) != n || len(p.Ze[r]) != n || !inRange(p.Zu[r], ZuMax) || !inRange(p.Ze[r], ZeMax) {
			return fmt.Errorf("%w: response %d out of bounds", ErrInvalid, r)
		}
	}
	s, err := k.recomputedSeed(c1, binding, p)
	if err != nil {
		return err
	}
	if s != p.Seed {
		return ErrInvalid
	}
	return nil
}

// recomputedSeed is the Fiat-Shamir hash of the statement and the
// commitments w = a z_u + z_e - X^c c1 that the proof's responses give
// under the challenges of its seed: the proof verifies when it is the seed
// and the responses are within bounds.
func (k *Key) recomputedSeed(c1 ring.Poly, binding []byte, p *Proof) ([32]byte, error) {
	prefix, err := k.prefix(c1, binding)
	if err != nil {
		return [32]byte{}, err
	}
	c1c := k.rq.NewPoly() // c1 in the coefficient domain, read by every repetition
	k.rq.INTT(c1, c1c)
	cs := k.challenges(p.Seed)
	var digests [Reps][32]byte
	k.parallel(func(r int, wk *work) {
		k.setSigned(wk.vu, p.Zu[r])
		k.setSigned(wk.ve, p.Ze[r])
		k.subMonomial(wk.ve, c1c, cs[r])
		digests[r] = k.commit(wk)
	})
	return seed(prefix, &digests), nil
}

// monomialTerm says where coefficient i of X^c w comes from in Z[X]/(X^n +
// 1), c in [0, 2n): (X^c w)_i = w_j, negated when neg (X^n = -1).
func monomialTerm(i, c, n int) (j int, neg bool) {
	if c >= n {
		c, neg = c-n, true
	}
	if j = i - c; j < 0 {
		return j + n, !neg
	}
	return j, neg
}

// subMonomial sets v -= X^c p (negacyclic, coefficient domain, reduced).
// Coefficient i takes p's coefficient i - c (mod n) with one sign for
// i >= c mod n and the other below, so each part is one branch-free loop.
func (k *Key) subMonomial(v, p ring.Poly, c int) {
	n := k.rq.N()
	neg := false
	if c >= n {
		c, neg = c-n, true
	}
	for j, s := range k.rq.SubRings[:k.rq.Level()+1] {
		q, vr, pr := s.Modulus, v.Coeffs[j], p.Coeffs[j]
		// i in [0, c): from p[i - c + n], sign flipped; i in [c, n): from p[i - c].
		subShifted(vr[:c], pr[n-c:], q, !neg)
		subShifted(vr[c:], pr[:n-c], q, neg)
	}
}

// subShifted sets v[i] -= x[i] (or += x[i] when neg) modulo q, for reduced
// residues below 2^62.
func subShifted(v, x []uint64, q uint64, neg bool) {
	x = x[:len(v)]
	if neg {
		for i, xi := range x {
			t := v[i] + xi - q // in (-q, q): add q back when negative
			v[i] = t + q&uint64(int64(t)>>63)
		}
		return
	}
	for i, xi := range x {
		t := v[i] - xi
		v[i] = t + q&uint64(int64(t)>>63)
	}
}

func inRange(z []int32, max int32) bool {
	for _, v := range z {
		if v < -max || v > max-1 {
			return false
		}
	}
	return true
}
