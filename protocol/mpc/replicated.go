package mpc

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// replicated is the dealer-free backend of three parties (the package
// doc says what it hides and checks): replicated shares over Z_2^128
// (Araki, Furukawa, Lindell, Nof and Ohara, CCS 2016), x = x_0 + x_1 +
// x_2, party i holding x_i and x_(i+1) (indices mod 3), so any two
// parties hold the value and the components of any one are independent
// of it (statistically, after a truncation). Component j's randomness
// comes from the stream of the key K_j that its two holders share
// (pseudorandom secret sharing; ReplicatedKeys).
//
// Resharing: party i computes its term of x y from the components it
// holds, z_i = x_i y_i + x_i y_(i+1) + x_(i+1) y_i, adds its term of a
// fresh sharing of zero, alpha_i = F_(i+1) - F_i, and sends the result to
// party i - 1 as the new component i: one message to one neighbour, one
// round for a batch of products, and the message is masked by F_(i+1),
// which the receiver does not hold. A party can add an error to what it
// reshares, so matrix products are checked before they are returned
// (matrixProducts) and entrywise products and ANDs are Beaver products on
// triples made by resharing and checked before use (triples.go). Fixed
// point follows ABY3 (Mohassel and Rindal, CCS 2018) with an opened
// truncation: every part r_j of the mask comes from component j's stream,
// so its holders also know r_j >> s (truncMask). Comparisons open x + r
// for an edaBit r and compare bits over Z_2 (ltz, boolean.go), with a
// pool of edaBits and one of random bits held both ways (daBits).
// Openings are checked: the component a party lacks comes from one holder
// and a hash of it from the other (open).
type replicated struct {
	prss    prss
	input   *Stream    // the engine of all parties: test inputs
	net     PeerNet    // a party's engine
	pool    Shared     // shared random bits not yet used, a column
	xpool   Shared     // the same bits over Z_2 (words 0 and 1)
	eda     Shared     // edaBits not yet used, a column, over Z_2^128
	edaBin  Shared     // the same words over Z_2
	tri     [2]triples // verified triples not yet used: over Z_2^128, over Z_2
	tbatch  int        // the fewest triples made at once (0: tripleBatch; tests make fewer)
	batches int        // batches of triples made (5 rounds each)
	// spoil, if set, changes this party's new components before a
	// resharing sends them (its own copies too): tests of a party that
	// deviates without being caught by a mismatch of copies.
	spoil func(round int, out []Shared)
	batch int // the fewest bits or edaBits made at once (0: bitBatch)
}

// bitBatch is the fewest random bits or edaBits made at once: their
// rounds are shared by the comparisons that use them, and a batch is one
// conversion chunk's (ConvertChunk), so that a small job does not make
// far more than it uses (an edaBit costs about 15 words of ANDs).
const bitBatch = ConvertChunk

// NewReplicatedEngine returns an engine running all three parties of the
// replicated backend in one process, the three keys and the test inputs'
// randomness from rnd (crypto/rand outside tests).
func NewReplicatedEngine(p Params, rnd io.Reader) (*Engine, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	keys, err := NewReplicatedKeys(rnd)
	if err != nil {
		return nil, err
	}
	var in Seed
	if _, err := io.ReadFull(rnd, in[:]); err != nil {
		return nil, fmt.Errorf("input seed: %w", err)
	}
	rp := &replicated{input: NewStream(in)}
	for j := range 3 {
		rp.prss[j] = NewStream(keys[j].Prev)
	}
	return &Engine{N: 3, Me: -1, P: p, be: rp, held: heldBy(3, -1, 2)}, nil
}

// NewReplicatedPartyEngine returns party me's engine (me in 0, 1, 2) of
// the replicated backend: its two keys (ReplicatedKeys says which it
// shares with whom) and its PeerNet to the two others.
func NewReplicatedPartyEngine(me int, p Params, keys ReplicatedKeys, net PeerNet) (*Engine, error) {
	if me < 0 || me > 2 {
		return nil, fmt.Errorf("party %d of a replicated engine: want 0, 1 or 2", me)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if net == nil {
		return nil, fmt.Errorf("party %d's replicated engine needs a net", me)
	}
	if keys.Prev == keys.Next {
		return nil, fmt.Errorf("party %d's replicated keys are equal: each must be shared with one neighbour only", me)
	}
	rp := &replicated{net: net}
	rp.prss[me] = NewStream(keys.Prev)
	rp.prss[(me+1)%3] = NewStream(keys.Next)
	return &Engine{N: 3, Me: me, P: p, be: rp, held: heldBy(3, me, 2)}, nil
}

// runs reports whether party i runs here.
func (e *Engine) runs(i int) bool { return e.Me < 0 || e.Me == i }

func (rp *replicated) err() error { return nil }

// exchange runs a party's round: out[j] to party j; it checks that party
// j sent want[j] words.
func (rp *replicated) exchange(e *Engine, out [][]Word, want []int) [][]Word {
	if e.Err() == nil {
		in, err := rp.net.Exchange(out)
		if err == nil && len(in) != 3 {
			err = fmt.Errorf("round %d: messages of %d parties, want 3", e.Cost.Rounds, len(in))
		}
		for j := 0; err == nil && j < 3; j++ {
			if j != e.Me && len(in[j]) != want[j] {
				err = fmt.Errorf("round %d: party %d sent %d words, want %d", e.Cost.Rounds, j, len(in[j]), want[j])
			}
		}
		if err == nil {
			return in
		}
		e.fail(err)
	}
	in := make([][]Word, 3)
	for j := range in {
		in[j] = make([]Word, want[j])
	}
	return in
}

// round counts a round in which each party sends n words.
func (e *Engine) round(n int) {
	e.Cost.Rounds++
	e.Cost.BytesPerParty += 16 * int64(n)
}

// reshare turns additive terms into replicated shares, one round:
// zs[k].S[i] is party i's term of value k (for the parties run here); party
// i adds its zero term alpha_i and sends the sum, the new component i, to
// party i - 1. Over Z_2 (xor set) the terms and the zero sharing are
// combined by exclusive or.
func (rp *replicated) reshare(e *Engine, zs []Shared, xor bool) []Shared {
	out := make([]Shared, len(zs))
	combine := ringOf(xor).add
	for k, z := range zs {
		alpha := rp.prss.zero(e, z.R, z.C, xor)
		out[k] = Shared{R: z.R, C: z.C, S: make([]Mat, 3)}
		for i := range 3 {
			if e.runs(i) {
				out[k].S[i] = combine(z.S[i], alpha[i])
			}
		}
	}
	if e.Me < 0 {
		e.round(words(zs))
		return out
	}
	me, next := e.Me, (e.Me+1)%3
	if rp.spoil != nil {
		rp.spoil(e.Cost.Rounds, out)
	}
	send := make([]Word, 0, words(zs))
	for _, z := range out {
		send = append(send, z.S[me].V...)
	}
	got := rp.toPrev(e, send)
	for k := range out {
		c := out[k].R * out[k].C
		out[k].S[next] = Mat{R: out[k].R, C: out[k].C, V: got[:c:c]}
		got = got[c:]
	}
	return out
}

// toPrev runs a party's resharing round: it sends send to party me - 1
// and returns what party me + 1 sent it, as many words.
func (rp *replicated) toPrev(e *Engine, send []Word) []Word {
	n := len(send)
	e.round(n)
	prev, next := (e.Me+2)%3, (e.Me+1)%3
	msg := make([][]Word, 3)
	msg[prev] = send
	want := make([]int, 3)
	want[next] = n
	return rp.exchange(e, msg, want)[next]
}

// open: party i lacks component i + 2; party i + 1 sends it, and party
// i + 2 sends a hash of it, which party i checks (a mismatch is a sticky
// error). So each party sends one component to party i - 1 and a 32-byte
// hash to party i + 1, in one round; a single deviating party cannot make
// an honest one open a wrong value without being caught.
func (rp *replicated) open(e *Engine, xs []Shared) []Mat { return rp.openAs(e, false, xs) }

// openAs opens xs over Z_2^128, or over Z_2 (xor set).
func (rp *replicated) openAs(e *Engine, xor bool, xs []Shared) []Mat {
	plus := ringOf(xor).add
	out := make([]Mat, len(xs))
	if e.Me < 0 {
		e.round(words(xs) + 2)
		for k, x := range xs {
			out[k] = plus(plus(x.S[0], x.S[1]), x.S[2])
		}
		return out
	}
	me, next := e.Me, (e.Me+1)%3
	own := make([]Word, 0, words(xs))  // component me
	send := make([]Word, 0, words(xs)) // component me + 1
	for _, x := range xs {
		own = append(own, x.S[me].V...)
		send = append(send, x.S[next].V...)
	}
	got := rp.openRound(e, own, send)
	for k, x := range xs {
		c := x.R * x.C
		out[k] = plus(plus(x.S[me], x.S[next]), Mat{R: x.R, C: x.C, V: got[:c:c]})
		got = got[c:]
	}
	return out
}

// openRound runs a party's opening round: it sends send (component me +
// 1) to party me - 1 and a hash of own (component me) to party me + 1,
// and returns component me + 2 as party me + 1 sent it, checked against
// party me - 1's hash of it (zeros after a failure).
func (rp *replicated) openRound(e *Engine, own, send []Word) []Word {
	n := len(send)
	round := e.Cost.Rounds
	e.round(n + 2)
	prev, next := (e.Me+2)%3, (e.Me+1)%3
	msg := make([][]Word, 3)
	msg[prev] = send
	msg[next] = openingHash(round, own)
	want := make([]int, 3)
	want[next], want[prev] = n, 2
	in := rp.exchange(e, msg, want)
	if h := openingHash(round, in[next]); e.err == nil && (h[0] != in[prev][0] || h[1] != in[prev][1]) {
		e.fail(fmt.Errorf("round %d: the opening's component from party %d does not match party %d's hash of it", round+1, next, prev))
	}
	if e.err != nil {
		return make([]Word, n)
	}
	return in[next]
}

// openingHash is SHA-256 of an opening's component, bound to its round,
// as two words.
func openingHash(round int, ws []Word) []Word {
	h := sha256.New()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(round))
	h.Write([]byte("fedpca mpc opening"))
	h.Write(b[:8])
	buf := make([]byte, 0, 4096)
	for _, w := range ws {
		if buf = w.AppendBytes(buf); len(buf) == cap(buf) {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	sum := h.Sum(nil)
	return []Word{WordFromBytes(sum), WordFromBytes(sum[16:])}
}

// products returns every X Y checked (matrixProducts) or X * Y as Beaver
// products on verified triples (beaver).
func (rp *replicated) products(e *Engine, k kind, ps []Product) []Shared {
	if k == entrywise {
		return rp.beaver(e, false, ps)
	}
	return rp.matrixProducts(e, ps)
}

// terms returns the parties' additive terms of X Y for the product mul
// and the sum plus (a matrix product, entrywise, and over Z_2):
// x_i (y_i + y_(i+1)) + x_(i+1) y_i.
func (rp *replicated) terms(e *Engine, mul, plus func(a, b Mat) Mat, x, y Shared) Shared {
	z := Shared{S: make([]Mat, 3)}
	for i := range 3 {
		if e.runs(i) {
			j := (i + 1) % 3
			z.S[i] = plus(mul(x.S[i], plus(y.S[i], y.S[j])), mul(x.S[j], y.S[i]))
			z.R, z.C = z.S[i].R, z.S[i].C
		}
	}
	return z
}

// gram is the product x^T x, one round.
func (rp *replicated) gram(e *Engine, x Shared) Shared {
	return rp.products(e, matrix, []Product{{e.Transpose(x), x}})[0]
}

// fix needs nothing: a replicated product has no mask to reuse.
func (rp *replicated) fix(e *Engine, x Shared) *Fixed { return &Fixed{x: x} }

func (rp *replicated) mulFixed(e *Engine, x *Fixed, y Shared) Shared {
	return rp.products(e, matrix, []Product{{x.x, y}})[0]
}

// truncMask: component j of the mask is r_j, uniform below 2^(L + Lambda)
// from component j's stream, so its two holders know r_j >> s too. The
// result c >> s - sum_j r_j >> s - 2^(L - s) is floor(x / 2^s) plus the
// carry of four remainders, 0 to 3; the bias 1 centres it: off by less
// than two units from x / 2^s, without bias. The component a party lacks
// hides x + 2^L to 2^(1 - Lambda); the sum stays below
// 2^(L+1) + 3 2^(L + Lambda) < 2^128.
func (rp *replicated) truncMask(e *Engine, rows, cols int, s uint) (Shared, Shared, Word) {
	r := Shared{R: rows, C: cols, S: make([]Mat, 3)}
	hi := Shared{R: rows, C: cols, S: make([]Mat, 3)}
	for j := range 3 {
		if e.holds(j) {
			r.S[j] = rp.prss.bounded(j, rows, cols, e.P.L+e.P.Lambda)
			hi.S[j] = NewMat(rows, cols)
			for k, w := range r.S[j].V {
				hi.S[j].V[k] = w.Shr(s)
			}
		}
	}
	return r, hi, one
}

// randomBits returns n shared uniform bits, a column, both over Z_2^128
// and over Z_2 (the same bits, daBits: Rotaru and Wood, INDOCRYPT 2019),
// from the pool, which makeBits refills (two rounds) with at least
// bitBatch. The pool is read in place: no operation writes into its
// operands.
func (rp *replicated) randomBits(e *Engine, n int) (arith, xor Shared, err error) {
	if rp.pool.R < n {
		fresh, fx, err := rp.makeBits(e, max(n-rp.pool.R, rp.batchSize()))
		if err != nil {
			return Shared{}, Shared{}, err
		}
		if rp.pool.R > 0 {
			fresh, fx = e.Stack(rp.pool, fresh), e.Stack(rp.xpool, fx)
		}
		rp.pool, rp.xpool = fresh, fx
	}
	arith, rp.pool = e.split(rp.pool, n)
	xor, rp.xpool = e.split(rp.xpool, n)
	return arith, xor, nil
}

// batchSize is the fewest random bits or edaBits made at once.
func (rp *replicated) batchSize() int {
	if rp.batch == 0 {
		return bitBatch
	}
	return rp.batch
}

// split returns the first n rows of the column x and the rest, sharing
// x's words.
func (e *Engine) split(x Shared, n int) (Shared, Shared) {
	out := Shared{R: n, C: 1, S: make([]Mat, len(x.S))}
	rest := Shared{R: x.R - n, C: 1, S: make([]Mat, len(x.S))}
	for i, s := range x.S {
		if e.holds(i) {
			out.S[i] = Mat{R: n, C: 1, V: s.V[:n:n]}
			rest.S[i] = Mat{R: rest.R, C: 1, V: s.V[n:]}
		}
	}
	return out, rest
}

// makeBits makes n shared random bits b = b_0 xor b_1 xor b_2, b_j drawn
// from component j's stream (known to the two holders of component j), in
// two rounds of entrywise products, with B_j the replicated sharing whose
// component j is b_j and whose others are zero: u = b_0 xor b_1 = B_0 +
// B_1 - 2 B_0 B_1, then b = u xor b_2 = u + B_2 - 2 u B_2. Each party
// lacks one b_j, so b is uniform to it. Every value made is a product of
// sharings (none is one party's input), so that a check of the products
// covers the bits too. It returns b over Z_2^128 and, as words 0 and 1,
// its sharing over Z_2: component j is b_j.
func (rp *replicated) makeBits(e *Engine, n int) (Shared, Shared, error) {
	rp.reserve(e, false, 2*n)
	bj, xor := e.single(func(j int) Mat { return rp.prss.bits(j, n) })
	xorOf := func(x, y Shared) (Shared, error) {
		p, err := e.Hadamard(Product{x, y})
		if err != nil {
			return Shared{}, err
		}
		return e.Sub(e.Add(x, y), e.Scale(p[0], 2)), nil
	}
	u, err := xorOf(bj[0], bj[1])
	if err != nil {
		return Shared{}, Shared{}, err
	}
	b, err := xorOf(u, bj[2])
	return b, xor, err
}

// fromModT: party 2 moves its share s_2 to party 1 masked, m = s_2 + rho
// mod T for a rho uniform mod T from component 0's stream (parties 2 and
// 0; party 1 does not hold it, so m is uniform to it), and party 0 takes
// s_0 - rho: then party 0's a = s_0 - rho + H mod T (H = floor(T/2)) and
// party 1's b = s_1 + m mod T are additive terms of s = x + H + q T in
// [0, 2T), q in {0, 1}. One resharing makes s replicated, and q = 1 -
// [s - T < 0], one comparison, exact for every x in [-H, T - H) (its
// mask is uniform over Z_2^128, so it hides s - T whatever the terms
// hold: a deviating party's out-of-range term spoils the result, as any
// input it changes, and shows nothing). x = s - H - T + T [s - T < 0].
// Two rounds (the move, the resharing) and a comparison.
func (rp *replicated) fromModT(e *Engine, x ModT) (Shared, error) {
	t := x.T
	if t < 2 || t > 1<<62 {
		return Shared{}, fmt.Errorf("shares mod %d: the conversion wants 2 <= T <= 2^62", t)
	}
	count := e.modTCount(x)
	for i := range 3 {
		if !e.runs(i) {
			continue
		}
		if len(x.S[i]) != count {
			return Shared{}, fmt.Errorf("party %d holds %d values mod %d, want %d", i, len(x.S[i]), t, count)
		}
		for j, v := range x.S[i] {
			if v >= t {
				return Shared{}, fmt.Errorf("party %d's share %d is %d, not below T = %d", i, j, v, t)
			}
		}
	}
	var rho []uint64 // drawn by both holders of component 0
	if rp.prss[0] != nil {
		rho = make([]uint64, count)
		for j := range rho {
			rho[j] = uniformMod(rp.prss[0], t)
		}
	}
	// The move: party 2 sends m to party 1; the busiest party sends count
	// words.
	m := make([]Word, count)
	if e.runs(2) {
		for j, v := range x.S[2] {
			m[j] = Word{0, addMod(v, rho[j], t)}
		}
	}
	e.round(count)
	if e.Me >= 0 {
		msg, want := make([][]Word, 3), make([]int, 3)
		switch e.Me {
		case 2:
			msg[1] = m
		case 1:
			want[2] = count
		}
		if in := rp.exchange(e, msg, want); e.Me == 1 {
			m = in[2]
		}
	}
	h := t / 2
	z := Shared{R: count, C: 1, S: make([]Mat, 3)}
	for i := range 3 {
		if !e.runs(i) {
			continue
		}
		z.S[i] = NewMat(count, 1)
		for j := range count {
			switch i {
			case 0:
				z.S[i].V[j] = Word{0, addMod(subMod(x.S[0][j], rho[j], t), h, t)}
			case 1:
				if m[j].Hi != 0 || m[j].Lo >= t {
					e.fail(fmt.Errorf("round %d: party 2 moved a share that is not below T = %d", e.Cost.Rounds, t))
					m[j] = Word{}
				}
				z.S[i].V[j] = Word{0, addMod(x.S[1][j], m[j].Lo, t)}
			}
		}
	}
	s := rp.reshare(e, []Shared{z}, false)[0]
	tw := Word{0, t}
	lt, err := e.LTZ(e.AddPublic(s, ConstCol(count, tw.Neg())), 64)
	if err != nil {
		return Shared{}, err
	}
	return e.AddPublic(e.Add(s, e.Scale(lt, int64(t))), ConstCol(count, Word{0, h}.Add(tw).Neg())), nil
}

// share splits a test input: components 1 and 2 uniform.
func (rp *replicated) share(e *Engine, m Mat) Shared {
	s := Shared{R: m.R, C: m.C, S: make([]Mat, 3)}
	if rp.input == nil {
		e.fail(errors.New("Share needs the replicated engine of all parties"))
		for i := range 3 {
			if e.holds(i) {
				s.S[i] = NewMat(m.R, m.C)
			}
		}
		return s
	}
	s.S[1], s.S[2] = randomMat(rp.input, m.R, m.C), randomMat(rp.input, m.R, m.C)
	s.S[0] = sub(sub(m, s.S[1]), s.S[2])
	return s
}

// shareModT splits values into three additive shares mod t (the engine
// of all parties; a party's engine has no dealer to take them from).
func (rp *replicated) shareModT(e *Engine, count int, t uint64, value func() []uint64) ModT {
	s := ModT{T: t, S: make([][]uint64, 3)}
	if rp.input == nil {
		e.fail(errors.New("shares mod T need the replicated engine of all parties: there is no dealer"))
		if e.Me >= 0 {
			s.S[e.Me] = make([]uint64, count)
		}
		return s
	}
	vals := value()
	s.S[0] = make([]uint64, count)
	for i := 1; i < 3; i++ {
		s.S[i] = make([]uint64, count)
		for j := range s.S[i] {
			s.S[i][j] = uniformMod(rp.input, t)
		}
	}
	for j, v := range vals {
		s.S[0][j] = subMod(subMod(v, s.S[1][j], t), s.S[2][j], t)
	}
	return s
}

// OutputShare returns what this party hands the user of the output x
// (sealed to the user's key): its share with the dealer's backend; with
// the replicated backend its two components, x_me then x_(me+1), so that
// every component reaches the user twice (CombineReplicated). A party's
// engine only; it fails if the engine has (a failed round or check:
// nothing may be released then).
func (e *Engine) OutputShare(x Shared) ([]Word, error) {
	if e.Me < 0 {
		return nil, errors.New("an output share is a party's: the engine runs every party")
	}
	if err := e.Err(); err != nil {
		return nil, err
	}
	if _, ok := e.be.(*replicated); !ok {
		return x.S[e.Me].V, nil
	}
	return append(append([]Word(nil), x.S[e.Me].V...), x.S[(e.Me+1)%3].V...), nil
}

// CombineReplicated is the user's step for the replicated backend: it
// checks that the two copies of every component agree (party i's second
// half and party i + 1's first half are both component i + 1) and
// returns their sum, the output. A party that changes its output
// components is caught here, unless both holders of a component change
// it alike (two parties: beyond the honest majority).
func CombineReplicated(parts [3][]Word) ([]Word, error) {
	n := len(parts[0]) / 2
	for i, p := range parts {
		if len(p) != 2*n || len(p)%2 != 0 {
			return nil, fmt.Errorf("party %d's output has %d words, party 0's %d", i, len(p), len(parts[0]))
		}
	}
	out := make([]Word, n)
	for i := range 3 {
		next := parts[(i+1)%3]
		for j := range n {
			if parts[i][n+j] != next[j] {
				return nil, fmt.Errorf("component %d of the output differs between parties %d and %d at word %d", (i+1)%3, i, (i+1)%3, j)
			}
			out[j] = out[j].Add(next[j])
		}
	}
	return out, nil
}
