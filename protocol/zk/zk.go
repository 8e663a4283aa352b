package zk

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tuneinsight/lattigo/v5/ring"
)

// The parameters of the proof (see the package documentation).
const (
	// Reps is the number of parallel repetitions of a proof of one
	// ciphertext: 2N = 2^14 challenges each, 2^-140 soundness error per
	// random-oracle query. A proof of a group of g ciphertexts has
	// ShapeOf(g).Reps.
	Reps = 10
	// MaxGroup is the most ciphertexts one proof covers.
	MaxGroup = 8
	// LogBu and LogBe are log2 of the mask bounds B_u and B_e that the
	// witness of one ciphertext needs (mask coefficients are uniform over
	// [-B, B)); a proof of a group of g needs ceil(log2 g) bits more, and
	// every proof takes one bit more than it needs, up to maxShift (ShapeOf).
	LogBu = 18
	LogBe = 22
	// maxShift is the most bits a proof's masks take over LogBu and LogBe:
	// the largest group's, ceil(log2 MaxGroup). ProvenBounds are at it.
	maxShift = 3
	// BetaU and BetaE bound the honest witness: u ternary, |e1| <= 19
	// (lattigo's Gaussian sampler at sigma 3.2 truncated at 19.2).
	BetaU = 1
	BetaE = 19
	// maxAttempts bounds the prover's restarts (the chance of needing more
	// with an honest witness is 0.495^1000, about 2^-1014).
	maxAttempts = 1000
	// domain separates this proof's hashes from every other use of SHA-256.
	domain = "fedpca/zk/rlwe-pk-c1/v1"
	// groupDomain is the domain of a proof of two or more ciphertexts.
	groupDomain = "fedpca/zk/rlwe-pk-c1-group/v1"
)

// groupReps are ShapeOf's repetitions: the fewest R with (2N/g)^R >=
// 2^128 at N = 2^13, that is R (14 - log2 g) >= 128 (TestGroupParams
// checks it).
var groupReps = [MaxGroup + 1]int{0, 10, 10, 11, 11, 11, 12, 12, 12}

// Shape is the parameters of a proof of G ciphertexts: its repetitions, its
// masks' bounds (2^LogBu, 2^LogBe) and its responses' (z in [-Max, Max -
// 1]).
type Shape struct {
	G, Reps      int
	LogBu, LogBe uint
	ZuMax, ZeMax int32
}

// ShapeOf returns the parameters of a proof of g ciphertexts, 1 <= g <=
// MaxGroup. The response of a group is y + sum_j X^(c_j) w_j, whose
// witness part is at most g beta, so the masks need ceil(log2 g) bits more
// than one ciphertext's to keep its acceptance; each takes one bit more
// still, up to the largest group's (maxShift), which raises the acceptance
// of an attempt (0.505 to 0.71 for one ciphertext) at no cost to the proven
// bounds, taken at the largest group's masks. Each repetition's challenge is
// g monomials, of which an extractor needs two values of one coordinate with
// the others fixed: coordinate-wise special soundness, knowledge error g/2N
// per repetition (Fenzi, Moghaddas and Nguyen, J. Cryptology 2024), hence
// groupReps[g] repetitions.
func ShapeOf(g int) (Shape, error) {
	if g < 1 || g > MaxGroup {
		return Shape{}, fmt.Errorf("zk: a proof of %d ciphertexts: want 1 to %d", g, MaxGroup)
	}
	shift := min(uint(bits.Len(uint(g-1)))+1, maxShift)
	sh := Shape{G: g, Reps: groupReps[g], LogBu: LogBu + shift, LogBe: LogBe + shift}
	sh.ZuMax = int32(1)<<sh.LogBu - int32(g*BetaU)
	sh.ZeMax = int32(1)<<sh.LogBe - int32(g*BetaE)
	return sh, nil
}

// ErrInvalid reports a proof that does not verify.
var ErrInvalid = errors.New("invalid proof")

// Bounds are the proven bounds on the preimage (u*, e*) of 2 c1 that an
// accepted proof guarantees its prover knows (2 c1 = a u* + e* mod Q).
type Bounds struct {
	// UInf, EInf bound the infinity norms; U2, E2 the Euclidean norms.
	UInf, EInf, U2, E2 float64
}

// ProvenBounds returns the bounds of the relaxed relation that a proof, of
// one ciphertext or of a group, guarantees for each of its ciphertexts at
// ring degree n (see the package documentation): |u*|_inf <= n 2 B_u,
// |u*|_2 <= (2n/pi) sqrt(n) 2 B_u, and the same with B_e for e*, B_u and
// B_e the largest group's mask bounds (no response of any group reaches
// them).
func ProvenBounds(n int) Bounds {
	fn := float64(n)
	op := 2 * fn / math.Pi // operator norm of multiplication by 2/(X^m - 1)
	du, de := 2*float64(int64(1)<<(LogBu+maxShift)), 2*float64(int64(1)<<(LogBe+maxShift))
	return Bounds{UInf: fn * du, EInf: fn * de, U2: op * math.Sqrt(fn) * du, E2: op * math.Sqrt(fn) * de}
}

// Witness is the randomness of a public-key encryption's second component,
// c1 = a u + e1, as signed integer coefficients. It is secret: with u the
// ciphertext decrypts.
type Witness struct {
	U, E []int8
}

// Proof is a proof of well-formed c1s: one, or a group of G.
type Proof struct {
	// Seed is the Fiat-Shamir hash from which the challenges come.
	Seed [32]byte
	// G is the number of ciphertexts proven.
	G int
	// Zu and Ze are the responses, one per repetition, N coefficients each.
	Zu, Ze [][]int32
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
// key, the binding and each c1 (NTT form); a group's domain is its own and
// its size is hashed too.
func (k *Key) transcript(c1s []ring.Poly, binding []byte, buf []byte) hash.Hash {
	h := sha256.New()
	d := domain
	if len(c1s) > 1 {
		d = groupDomain
	}
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(d)))
	h.Write(n[:])
	h.Write([]byte(d))
	binary.BigEndian.PutUint64(n[:], uint64(k.rq.N()))
	h.Write(n[:])
	h.Write(k.digest[:])
	if len(c1s) > 1 {
		binary.BigEndian.PutUint64(n[:], uint64(len(c1s)))
		h.Write(n[:])
	}
	binary.BigEndian.PutUint64(n[:], uint64(len(binding)))
	h.Write(n[:])
	h.Write(binding)
	for _, c1 := range c1s {
		k.writePoly(h, c1, buf)
	}
	return h
}

// challenges expands the seed into count exponents k in [0, 2N) (the
// challenge X^k; X^N = -1), 16 to a SHA-256 block: block 0 of seed ||
// "challenges", block b > 0 of seed || "challenges" || b. Repetition r's
// challenge for ciphertext j of a group of g is number r g + j.
func (k *Key) challenges(seed [32]byte, count int) []int {
	out := make([]int, count)
	mask := 2*k.rq.N() - 1
	var x [32]byte
	for i := range out {
		if i%16 == 0 {
			in := append(seed[:], "challenges"...)
			if b := i / 16; b > 0 {
				in = append(in, byte(b))
			}
			x = sha256.Sum256(in)
		}
		out[i] = int(binary.LittleEndian.Uint16(x[2*(i%16):])) & mask
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

// ProveGroup proves, in one proof, that each c1s[j] (NTT domain) = a u_j +
// e_j for the witness ws[j], bound to binding. The masks come from rnd
// (when nil, maskStream: a keystream keyed from crypto/rand). The
// repetitions' commitments are computed on up to GOMAXPROCS goroutines.
func (k *Key) ProveGroup(c1s []ring.Poly, binding []byte, ws []Witness, rnd io.Reader) (*Proof, error) {
	n := k.rq.N()
	sh, err := ShapeOf(len(c1s))
	if err != nil {
		return nil, err
	}
	if len(ws) != len(c1s) {
		return nil, fmt.Errorf("zk: %d ciphertexts, %d witnesses", len(c1s), len(ws))
	}
	us, es := make([][]int8, sh.G), make([][]int8, sh.G)
	for j := range c1s {
		if err := k.checkC1(c1s[j]); err != nil {
			return nil, err
		}
		if err := checkWitness(ws[j], n); err != nil {
			return nil, err
		}
		us[j], es[j] = ws[j].U, ws[j].E
	}
	if rnd == nil {
		if rnd, err = maskStream(); err != nil {
			return nil, err
		}
	}
	p := &Proof{G: sh.G, Zu: make([][]int32, sh.Reps), Ze: make([][]int32, sh.Reps)}
	yu, ye := make([][]int32, sh.Reps), make([][]int32, sh.Reps)
	for r := range sh.Reps {
		yu[r], ye[r] = make([]int32, n), make([]int32, n)
		p.Zu[r], p.Ze[r] = make([]int32, n), make([]int32, n)
	}
	// The transcript's prefix is the same for every attempt.
	prefix, err := k.prefix(c1s, binding)
	if err != nil {
		return nil, err
	}
	// Each attempt's masks: maskBytes per coefficient of each polynomial.
	random := make([]byte, sh.Reps*n*2*maskBytes)
	digests := make([][32]byte, sh.Reps)
	for range maxAttempts {
		if _, err := io.ReadFull(rnd, random); err != nil {
			return nil, fmt.Errorf("zk: masks: %w", err)
		}
		k.parallel(sh.Reps, func(r int, wk *work) {
			off := r * n * 2 * maskBytes
			uniform(random[off:off+n*maskBytes], yu[r], sh.LogBu)
			uniform(random[off+n*maskBytes:off+2*n*maskBytes], ye[r], sh.LogBe)
			k.setSigned(wk.vu, yu[r])
			k.setSigned(wk.ve, ye[r])
			digests[r] = k.commit(wk)
		})
		p.Seed = seed(prefix, digests)
		cs := k.challenges(p.Seed, sh.Reps*sh.G)
		ok := true
		for r := 0; r < sh.Reps && ok; r++ {
			c := cs[r*sh.G : (r+1)*sh.G]
			ok = respond(p.Zu[r], yu[r], us, c, sh.ZuMax) && respond(p.Ze[r], ye[r], es, c, sh.ZeMax)
		}
		if ok {
			return p, nil
		}
	}
	return nil, errors.New("zk: no accepted attempt (the witness is not short, or the randomness is broken)")
}

// maskStream returns the masks' randomness when the caller gives none: the
// AES-256-CTR keystream of a key from crypto/rand, used for one proof (a
// pseudorandom generator seeded by the system's; about a megabyte per
// attempt, which crypto/rand itself makes four times slower, an eighth of
// a proof's time).
func maskStream() (io.Reader, error) {
	var key [32]byte
	if _, err := rand.Read(key[:]); err != nil {
		return nil, fmt.Errorf("zk: mask key: %w", err)
	}
	b, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, err
	}
	return cipher.StreamReader{S: cipher.NewCTR(b, make([]byte, aes.BlockSize)), R: zeros{}}, nil
}

// zeros reads as an endless run of zero bytes (the plaintext of a
// keystream).
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// maskBytes is the randomness of one mask coefficient (LogBe + maxShift +
// 1 <= 32 bits).
const maskBytes = 4

// prefix returns the transcript's state after the statement.
func (k *Key) prefix(c1s []ring.Poly, binding []byte) ([]byte, error) {
	wk := k.scratch.Get().(*work)
	defer k.scratch.Put(wk)
	h := k.transcript(c1s, binding, wk.buf)
	state, err := h.(interface{ MarshalBinary() ([]byte, error) }).MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("zk: %w", err)
	}
	return state, nil
}

// seed is the Fiat-Shamir hash: the statement's transcript, then the
// digest of each repetition's commitment in order.
func seed(prefix []byte, digests [][32]byte) [32]byte {
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

// parallel runs f for each of reps repetitions on up to GOMAXPROCS
// goroutines, each with its own scratch space.
func (k *Key) parallel(reps int, f func(r int, wk *work)) {
	var next atomic.Int32
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), reps) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := k.scratch.Get().(*work)
			defer k.scratch.Put(wk)
			for r := int(next.Add(1)) - 1; r < reps; r = int(next.Add(1)) - 1 {
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
		v := binary.LittleEndian.Uint32(b[maskBytes*i:])
		out[i] = int32(v&mask) - off
	}
}

// respond sets z = y + sum_j X^(cs[j]) ws[j] (negacyclic) and reports
// whether every coefficient is in [-max, max - 1], the interval on which
// accepted responses are uniform whatever the witness.
func respond(z, y []int32, ws [][]int8, cs []int, max int32) bool {
	copy(z, y)
	for j, w := range ws {
		addMonomial(z, w, cs[j])
	}
	return inRange(z, max)
}

// addMonomial sets z += X^c w (negacyclic, c in [0, 2n)): coefficient i
// takes w's coefficient i - c (mod n), with one sign for i >= c mod n and
// the other below.
func addMonomial(z []int32, w []int8, c int) {
	n := len(z)
	s := int32(1)
	if c >= n {
		c, s = c-n, -1
	}
	for i, x := range w[:n-c] {
		z[i+c] += s * int32(x)
	}
	for i, x := range w[n-c:] {
		z[i] -= s * int32(x)
	}
}

// VerifyGroup checks a proof that each c1s[j] (NTT domain) = a u_j + e_j
// with short u_j, e_j, bound to binding. The responses' bounds are checked
// by Unmarshal and again here.
func (k *Key) VerifyGroup(c1s []ring.Poly, binding []byte, p *Proof) error {
	n := k.rq.N()
	sh, err := ShapeOf(len(c1s))
	if err != nil {
		return err
	}
	if p.G != sh.G || len(p.Zu) != sh.Reps || len(p.Ze) != sh.Reps {
		return fmt.Errorf("%w: a proof of %d ciphertexts in %d repetitions, want %d in %d", ErrInvalid, p.G, len(p.Zu), sh.G, sh.Reps)
	}
	for _, c1 := range c1s {
		if err := k.checkC1(c1); err != nil {
			return err
		}
	}
	for r := range sh.Reps {
		if len(p.Zu[r]) != n || len(p.Ze[r]) != n || !inRange(p.Zu[r], sh.ZuMax) || !inRange(p.Ze[r], sh.ZeMax) {
			return fmt.Errorf("%w: response %d out of bounds", ErrInvalid, r)
		}
	}
	s, err := k.recomputedSeed(c1s, binding, p)
	if err != nil {
		return err
	}
	if s != p.Seed {
		return ErrInvalid
	}
	return nil
}

// recomputedSeed is the Fiat-Shamir hash of the statement and the
// commitments w = a z_u + z_e - sum_j X^(c_j) c1_j that the proof's
// responses give under the challenges of its seed: the proof verifies when
// it is the seed and the responses are within bounds.
func (k *Key) recomputedSeed(c1s []ring.Poly, binding []byte, p *Proof) ([32]byte, error) {
	prefix, err := k.prefix(c1s, binding)
	if err != nil {
		return [32]byte{}, err
	}
	g, reps := len(c1s), len(p.Zu)
	c1c := make([]ring.Poly, g) // each c1 in the coefficient domain, read by every repetition
	for j, c1 := range c1s {
		c1c[j] = k.rq.NewPoly()
		k.rq.INTT(c1, c1c[j])
	}
	cs := k.challenges(p.Seed, reps*g)
	digests := make([][32]byte, reps)
	k.parallel(reps, func(r int, wk *work) {
		k.setSigned(wk.vu, p.Zu[r])
		k.setSigned(wk.ve, p.Ze[r])
		for j := range g {
			k.subMonomial(wk.ve, c1c[j], cs[r*g+j])
		}
		digests[r] = k.commit(wk)
	})
	return seed(prefix, digests), nil
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
