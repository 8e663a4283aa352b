package mpc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// partyInputs gives party i its components (i and i + 1) of x and its
// share mod T.
func partyInputs(i int, xs Shared, xts ModT) (Shared, ModT) {
	mine := Shared{R: xs.R, C: xs.C, S: make([]Mat, 3)}
	mine.S[i], mine.S[(i+1)%3] = xs.S[i], xs.S[(i+1)%3]
	mt := ModT{T: xts.T, S: make([][]uint64, 3)}
	mt.S[i] = xts.S[i]
	return mine, mt
}

// overPeerNet runs prog as the three replicated party engines over
// LocalPeerNets, their keys drawn from a stream seeded with seed (so the
// same as newReplicated(t, seed)'s), each net passed through wrap (nil:
// as is). It returns every party's outputs and error.
func overPeerNet(t *testing.T, seed byte, xs Shared, xts ModT, prog func(*Engine, Shared, ModT) []Mat, wrap func(i int, n PeerNet) PeerNet) ([][]Mat, []error) {
	t.Helper()
	keys, err := NewReplicatedKeys(rand.NewChaCha8([32]byte{seed}))
	if err != nil {
		t.Fatal(err)
	}
	got, errs, _ := runPeers(keys, xs, xts, prog, wrap, smallBatches)
	return got, errs
}

// smallBatches makes a replicated engine make its triples a few at a
// time (tests that run a program hundreds of times; the check's bound is
// for tripleBatch).
func smallBatches(_ int, e *Engine) { e.be.(*replicated).tbatch = 256 }

// runPeers runs prog as the three replicated party engines with keys over
// LocalPeerNets, each net passed through wrap and each engine through
// setup (nil: as they are). A party that ends with an error closes the
// nets, as a relay stops a run that a member abandons.
func runPeers(keys [3]ReplicatedKeys, xs Shared, xts ModT, prog func(*Engine, Shared, ModT) []Mat, wrap func(i int, n PeerNet) PeerNet, setup func(i int, e *Engine)) ([][]Mat, []error, []Cost) {
	nets := LocalPeerNets(3)
	got := make([][]Mat, 3)
	errs := make([]error, 3)
	costs := make([]Cost, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			net := nets[i]
			if wrap != nil {
				net = wrap(i, net)
			}
			e, err := NewReplicatedPartyEngine(i, DefaultParams, keys[i], net)
			if err != nil {
				errs[i] = err
				CloseLocalPeerNets(nets)
				return
			}
			if setup != nil {
				setup(i, e)
			}
			x, xt := partyInputs(i, xs, xts)
			got[i] = prog(e, x, xt)
			costs[i] = e.Cost
			if errs[i] = e.Err(); errs[i] != nil {
				CloseLocalPeerNets(nets)
			}
		}()
	}
	wg.Wait()
	return got, errs, costs
}

// TestReplicatedParties runs the programs of TestPartiesOverNet and
// TestSymEigOverNet as three replicated party engines over LocalPeerNets
// and holds every party's outputs to the engine of all three parties with
// the same keys, word for word (the opened values depend on the inputs'
// values and the keys' streams only, not on how the inputs were split),
// and its rounds and bytes sent (counted on the net; the busiest party's)
// to that engine's count.
func TestReplicatedParties(t *testing.T) {
	const T = testT
	rng := rand.New(rand.NewPCG(11, 12))
	f := DefaultParams.F
	x := EncodeMat(randomFloats(rng, 4, 3, 0.5), f)
	plain := []uint64{5, T - 7, 1 << 40, 0, T - 1, convertRange} // within FromModT's range
	a, _ := spectrumMatrix(rng, []float64{0.9, 0.5, -0.3, 1e-3}, f)
	symeig := func(e *Engine, x Shared, _ ModT) []Mat {
		vals, vecs, err := SymEig(e, x, 2, 2)
		if err != nil {
			t.Error(err)
			return nil
		}
		col := e.each(x, func(_ int, s Mat) Mat { return Mat{R: 4, C: 1, V: s.V[:4]} })
		pos, _ := e.Abs(col, f+2)
		r, _ := e.Reciprocal(pos)
		s, _ := e.Sqrt(pos)
		return []Mat{e.Reveal(vals), e.Reveal(vecs), e.Reveal(r), e.Reveal(s)}
	}
	for _, c := range []struct {
		name string
		in   Mat
		prog func(*Engine, Shared, ModT) []Mat
	}{{"program", x, program}, {"symeig", a, symeig}} {
		t.Run(c.name, func(t *testing.T) {
			ref := newReplicated(t, 40)
			want := c.prog(ref, ref.Share(c.in), ref.ShareModT(plain, T))
			in := newReplicated(t, 41) // other shares of the same values
			keys, err := NewReplicatedKeys(rand.NewChaCha8([32]byte{40}))
			if err != nil {
				t.Fatal(err)
			}
			var sent [3]*counting
			got, errs, costs := runPeers(keys, in.Share(c.in), in.ShareModT(plain, T), c.prog, func(i int, n PeerNet) PeerNet {
				sent[i] = &counting{PeerNet: n}
				return sent[i]
			}, nil)
			for i := range 3 {
				if errs[i] != nil {
					t.Fatalf("party %d: %v", i, errs[i])
				}
				if costs[i] != ref.Cost {
					t.Errorf("party %d: cost %+v, the engine of all parties' %+v", i, costs[i], ref.Cost)
				}
				// The parties send alike but in a conversion's first
				// round, where party 2 alone moves its share: the cost
				// is the busiest party's.
				if w := (Cost{sent[i].rounds, 16 * sent[i].words}); w.Rounds != costs[i].Rounds || w.BytesPerParty > costs[i].BytesPerParty || i == 2 && w != costs[i] {
					t.Errorf("party %d: cost %+v, but it sent %+v", i, costs[i], w)
				}
				for k := range want {
					for j := range want[k].V {
						if got[i][k].V[j] != want[k].V[j] {
							t.Fatalf("party %d output %d entry %d: %v, want %v", i, k, j, got[i][k].V[j], want[k].V[j])
						}
					}
				}
			}
		})
	}
}

// counting counts a party's rounds and the words it sends.
type counting struct {
	PeerNet
	rounds int
	words  int64
}

func (c *counting) Exchange(out [][]Word) ([][]Word, error) {
	c.rounds++
	for _, m := range out {
		c.words += int64(len(m))
	}
	return c.PeerNet.Exchange(out)
}

// tamper adds one to the first word of the component party me sends to
// party me - 1 in the nth round of a kind: an opening (the round where it
// also sends a hash to party me + 1) or a resharing.
type tamper struct {
	PeerNet
	me, nth  int
	opening  bool
	seen     int
	tampered bool
}

func (m *tamper) Exchange(out [][]Word) ([][]Word, error) {
	prev, next := (m.me+2)%3, (m.me+1)%3
	if (len(out[next]) == 2) == m.opening && len(out[prev]) > 0 {
		if m.seen++; m.seen == m.nth {
			out[prev] = append([]Word(nil), out[prev]...)
			out[prev][0] = out[prev][0].Add(one)
			m.tampered = true
		}
	}
	return m.PeerNet.Exchange(out)
}

// TestReplicatedCheatingOpening: party 1 adds one to a word of the
// component it sends party 0 in an opening, in turn in every opening of
// the program (truncations', comparisons', the conversion's, the outputs'
// reveals). Party 0 finds that it does not match party 2's hash and
// aborts with an error; party 2 fails too when its next round never
// completes, or has finished with the right outputs: no honest party
// returns a wrong output. The same change in a resharing message is
// caught too: a triple's (entrywise products and ANDs are Beaver
// products on triples) by the triples' check before any is used, a
// matrix product's or the conversion's by the next opening that reads
// the component party 0 and party 1 now hold differently (a matrix
// product is always truncated next, and checked first). A party that
// keeps its own copy alike is TestReplicatedDeviation's.
func TestReplicatedCheatingOpening(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	x := EncodeMat(randomFloats(rng, 4, 3, 0.5), DefaultParams.F)
	xt := ModT{T: testT, S: [][]uint64{{1}, {2}, {6}}}
	ref := newReplicated(t, 50)
	smallBatches(-1, ref)
	want := program(ref, ref.Share(x), ModT{T: testT, S: [][]uint64{{3}, {1}, {5}}})
	xs := newReplicated(t, 51).Share(x)
	right := func(got []Mat) bool {
		for k := range want {
			for j := range want[k].V {
				if got[k].V[j] != want[k].V[j] {
					return false
				}
			}
		}
		return true
	}
	for _, opening := range []bool{true, false} {
		stopped, wrong, changed := 0, 0, 0
		for nth := 1; ; nth++ {
			var cheat *tamper
			got, errs := overPeerNet(t, 50, xs, xt, program, func(i int, n PeerNet) PeerNet {
				if i == 1 {
					cheat = &tamper{PeerNet: n, me: 1, nth: nth, opening: opening}
					return cheat
				}
				return n
			})
			if !cheat.tampered {
				break
			}
			changed++
			detected := caught(t, fmt.Sprintf("opening %v %d", opening, nth), errs)
			for _, i := range []int{0, 2} {
				if errs[i] == nil && !right(got[i]) {
					wrong++
					t.Errorf("opening %v %d changed: party %d returned a wrong output", opening, nth, i)
				}
			}
			if detected {
				stopped++
			} else {
				t.Errorf("opening %v %d changed: not detected", opening, nth)
			}
		}
		kind := "openings"
		if !opening {
			kind = "resharings"
		}
		t.Logf("%d %s changed by party 1 in turn: %d caught, %d honest parties' outputs wrong", changed, kind, stopped, wrong)
		if stopped == 0 {
			t.Errorf("no %s were changed", kind)
		}
	}
}

// TestReplicatedDeviation: party 1 adds an error to a component it
// reshares and keeps its own copy alike (so no opening sees copies
// differ), in turn in every resharing of a program of matrix products,
// a Gram matrix, comparisons and an inverse square root (2^127 in odd
// turns, which a projection's column misses half the time, 1 in even
// ones): every change is caught before any output, by the triples'
// check (entrywise products and ANDs) or the matrix products' projection
// check. The conversion from shares mod T is the exception, stated in
// PROTOCOL: its resharing carries a member's own terms (an input), and
// the same change there moves the result unseen.
func TestReplicatedDeviation(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	x := EncodeMat(randomFloats(rng, 4, 3, 0.5), DefaultParams.F)
	xs := newReplicated(t, 52).Share(x)
	xt := ModT{T: testT, S: [][]uint64{{1}, {2}, {6}}} // 9
	prog := func(e *Engine, x Shared, _ ModT) []Mat {
		sq, _ := e.MatMul(0, Product{x, e.Transpose(x)})
		lt, _ := e.LTZ(e.cols(x, 0, 1), 40)
		z, _ := e.InvSqrt(e.Gram(x), 0x1p-26, 3)
		return []Mat{e.Reveal(sq[0]), e.Reveal(lt), e.Reveal(z)}
	}
	spoilt := func(nth int, prog func(*Engine, Shared, ModT) []Mat) ([][]Mat, []error, bool) {
		keys, err := NewReplicatedKeys(rand.NewChaCha8([32]byte{53}))
		if err != nil {
			t.Fatal(err)
		}
		seen, done := 0, false
		got, errs, _ := runPeers(keys, xs, xt, prog, nil, func(i int, e *Engine) {
			smallBatches(i, e)
			if i == 1 {
				e.be.(*replicated).spoil = func(_ int, out []Shared) {
					if seen++; seen == nth {
						d := one
						if nth%2 == 1 {
							d = Pow2(127)
						}
						out[0].S[1].V[0] = out[0].S[1].V[0].Add(d)
						done = true
					}
				}
			}
		})
		return got, errs, done
	}
	changed := 0
	for nth := 1; ; nth++ {
		_, errs, done := spoilt(nth, prog)
		if !done {
			break
		}
		changed++
		if !caught(t, fmt.Sprintf("resharing %d", nth), errs) {
			t.Errorf("resharing %d changed and kept alike: not caught", nth)
		}
	}
	t.Logf("%d resharings changed by party 1 and kept alike, in turn", changed)
	if changed < 10 {
		t.Errorf("%d resharings changed, want the program's (at least 10)", changed)
	}
	conv := func(e *Engine, _ Shared, xt ModT) []Mat {
		c, _ := e.FromModT(xt)
		return []Mat{e.Reveal(c)}
	}
	got, errs, _ := spoilt(1, conv) // the conversion's resharing is its first: by 2^127
	for i, err := range errs {
		if err != nil {
			t.Fatalf("the conversion, its terms changed: party %d: %v", i, err)
		}
		if got[i][0].V[0] == FromInt64(9) {
			t.Errorf("party %d converted 9 whose terms party 1 changed: the change should move it (the stated gap)", i)
		}
	}
}

// caught reports whether an honest party (0 or 2) stopped on a check: an
// opening's copies that differ, or spoilt triples or products. Any other
// error but a closed net is reported.
func caught(t *testing.T, what string, errs []error) bool {
	t.Helper()
	found := false
	for _, i := range []int{0, 2} {
		switch err := errs[i]; {
		case err != nil && (strings.Contains(err.Error(), "does not match") || strings.Contains(err.Error(), "spoilt")):
			found = true
		case err != nil && !errors.Is(err, ErrClosed):
			t.Errorf("%s: party %d: %v", what, i, err)
		}
	}
	return found
}

// TestReplicatedErrors: a party outside 0 to 2, equal keys, no net are
// refused; a party's engine has no dealer to split test inputs (a sticky
// error); a share mod T not below T is refused; the user's combination
// refuses output parts whose copies of a component differ.
func TestReplicatedErrors(t *testing.T) {
	keys, err := NewReplicatedKeys(rand.NewChaCha8([32]byte{5}))
	if err != nil {
		t.Fatal(err)
	}
	net := LocalPeerNets(3)[0]
	if _, err := NewReplicatedPartyEngine(3, DefaultParams, keys[0], net); err == nil {
		t.Error("party 3 accepted")
	}
	if _, err := NewReplicatedPartyEngine(0, DefaultParams, ReplicatedKeys{}, net); err == nil {
		t.Error("equal keys accepted")
	}
	if _, err := NewReplicatedPartyEngine(0, DefaultParams, keys[0], nil); err == nil {
		t.Error("no net accepted")
	}
	e, err := NewReplicatedPartyEngine(0, DefaultParams, keys[0], net)
	if err != nil {
		t.Fatal(err)
	}
	e.Share(NewMat(1, 1))
	if e.Err() == nil {
		t.Error("a party's engine split a test input")
	}
	all := newReplicated(t, 6)
	if _, err := all.FromModT(ModT{T: 7, S: [][]uint64{{7}, {0}, {0}}}); err == nil {
		t.Error("a share mod 7 of 7 accepted")
	}
	if _, err := all.OutputShare(all.Share(NewMat(1, 1))); err == nil {
		t.Error("the engine of all parties gave a party's output share")
	}
	parts := [3][]Word{{{0, 1}, {0, 2}}, {{0, 2}, {0, 3}}, {{0, 3}, {0, 1}}}
	if got, err := CombineReplicated(parts); err != nil || got[0] != (Word{0, 6}) {
		t.Errorf("combined %v, %v; want 6", got, err)
	}
	parts[1][1] = Word{0, 4}
	if _, err := CombineReplicated(parts); err == nil {
		t.Error("differing copies of component 2 accepted")
	}
}
