package mpc

import (
	"crypto/rand"
	"fmt"
	"math"
	"math/bits"
	mrand "math/rand/v2"
	"testing"
)

// tracing records the values a party's engine opens.
type tracing struct {
	backend
	opened []Word
}

func (tr *tracing) open(e *Engine, xs []Shared) []Mat {
	out := tr.backend.open(e, xs)
	for _, m := range out {
		tr.opened = append(tr.opened, m.V...)
	}
	return out
}

// recording records the words a party receives: every word, and apart
// the resharings' (the rounds where it sends to its predecessor and
// receives no hash from it).
type recording struct {
	PeerNet
	me             int
	recv, reshared []Word
}

func (r *recording) Exchange(out [][]Word) ([][]Word, error) {
	in, err := r.PeerNet.Exchange(out)
	prev, next := (r.me+2)%3, (r.me+1)%3
	if err == nil {
		for _, m := range in {
			r.recv = append(r.recv, m...)
		}
		if len(out[prev]) > 0 && len(in[prev]) == 0 {
			r.reshared = append(r.reshared, in[next]...)
		}
	}
	return in, err
}

// bitCounts counts, per word position and bit, the ones over runs.
type bitCounts struct {
	runs int
	ones [][128]int32
}

func (c *bitCounts) add(ws []Word) {
	if c.ones == nil {
		c.ones = make([][128]int32, len(ws))
	}
	c.runs++
	for p, w := range ws {
		for b, v := range [2]uint64{w.Lo, w.Hi} {
			for v != 0 {
				c.ones[p][64*b+bits.TrailingZeros64(v)]++
				v &= v - 1
			}
		}
	}
}

// worst returns the largest two-sample z statistic over positions and
// bits between c and d (pooled frequency; bits constant in both are
// skipped), and the largest one-sample z against 1/2 of either.
func (c *bitCounts) worst(d *bitCounts) (two, half float64) {
	for p := range c.ones {
		for b := range 128 {
			fc := float64(c.ones[p][b]) / float64(c.runs)
			fd := float64(d.ones[p][b]) / float64(d.runs)
			pool := (float64(c.ones[p][b]) + float64(d.ones[p][b])) / float64(c.runs+d.runs)
			if pool > 0 && pool < 1 {
				z := math.Abs(fc-fd) / math.Sqrt(pool*(1-pool)*(1/float64(c.runs)+1/float64(d.runs)))
				two = max(two, z)
			}
			half = max(half, math.Abs(fc-0.5)/math.Sqrt(0.25/float64(c.runs)), math.Abs(fd-0.5)/math.Sqrt(0.25/float64(d.runs)))
		}
	}
	return two, half
}

// viewProgram uses every primitive on the shared input (entries of
// magnitude at most 1) and the shares mod T, every value within its
// primitive's range (out of range, a truncation's mask stops hiding it,
// and this test sees it), and opens nothing but its own masked values: products and their
// truncations, Gram, a fixed operand, comparisons, the conversion, the
// scalar functions, a small eigendecomposition.
func viewProgram(e *Engine, x Shared, xt ModT) []Shared {
	sq, _ := e.MatMul(0, Product{x, e.Transpose(x)})
	fx := e.Fix(sq[0])
	y, _ := e.MulFixed(fx, x)
	g := e.Gram(y)
	lt, _ := e.LTZ(e.cols(x, 0, 1), 40)
	conv, _ := e.FromModT(xt)
	pos := e.AddPublic(e.Diagonal(g), ConstCol(3, Encode(0.25, e.P.F)))
	r, _ := e.Reciprocal(pos)
	s, _ := e.InvSqrtScalar(pos)
	// SymEig's range: eigenvalues in [-1, 1] (g's entries are below 243).
	vals, _, _ := SymEig(e, e.AddPublic(e.MulConst(g, 0x1p-10), Identity(3, Encode(0.1, e.P.F))), 2, 1)
	return []Shared{sq[0], lt, conv, r, s, vals}
}

// TestReplicatedView: what a corrupt party receives does not depend on
// the secret input, for each party in turn. The corrupt party's keys are
// fixed (its own randomness, which a simulator is given); the honest
// parties' shared key, the input's splitting and the shares mod T are
// fresh in every run. viewProgram runs on two inputs, zero and one at
// the edges of the ranges (entries of magnitude 1/2 to 1, values mod T
// near (T-1)/2 and -(T-1)/2), 100 times each; per word position and bit, the
// frequency of ones among the party's received words (the resharings'
// components, masked by the honest parties' stream; the openings'
// components and hashes; the conversion's moved shares, masked mod T)
// and among the values it opened (c = x + 2^L + r and the comparisons'
// masked values) must not tell the inputs apart: the largest two-sample
// z over all positions and bits stays below 6.5 (a 2^-40-hiding mask
// moves a frequency by about 2^-39; one leaked bit gives z = 14, and a
// value left outside its primitive's range, which its truncation's mask
// no longer hides, gave 11.6; the largest of about 10^7 null z values is
// near 5.5 to 6). The resharings' words are also uniform (every bit
// within 6.5 standard deviations of 1/2); an opening's component need
// not be (a truncation's output component j is -(r_j >> s), small,
// whatever the input). As a control, the same statistic on the
// program's outputs, opened at the end, tells the inputs apart.
func TestReplicatedView(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("600 runs of the program")
	}
	for c := range 3 {
		t.Run(fmt.Sprintf("party %d", c), func(t *testing.T) { checkView(t, c) })
	}
}

func checkView(t *testing.T, c int) {
	const runs, T = 100, testT
	var own [2]Seed // party c's keys: K_c and K_(c+1)
	own[0][0], own[1][0] = 1, 2
	f := DefaultParams.F
	rng := mrand.New(mrand.NewPCG(61, 62))
	inputs := [2]Mat{NewMat(3, 3), EncodeMat(randomFloats(rng, 3, 3, 1), f)}
	for i := range 3 {
		inputs[1].Set(i, 0, Encode(-0.5-0.5*rng.Float64(), f)) // negative: LTZ 1
	}
	const r = convertRange // FromModT's range: values at its ends
	plains := [2][]uint64{make([]uint64, 5), {r, T - r, T - 1, 1, r - 1}}
	var recv, reshared, opened, outputs [2]bitCounts
	for in := range 2 {
		for range runs {
			var k [3]Seed
			k[c], k[(c+1)%3] = own[0], own[1]
			if _, err := rand.Read(k[(c+2)%3][:]); err != nil { // the honest pair's key, fresh
				t.Fatal(err)
			}
			var keys [3]ReplicatedKeys
			for i := range keys {
				keys[i] = ReplicatedKeys{Prev: k[i], Next: k[(i+1)%3]}
			}
			split, err := NewReplicatedEngine(DefaultParams, rand.Reader) // the honest input splitting
			if err != nil {
				t.Fatal(err)
			}
			xs, xts := split.Share(inputs[in]), split.ShareModT(plains[in], T)
			rec := &recording{me: c}
			var tr *tracing
			got, errs, _ := runPeers(keys, xs, xts, func(e *Engine, x Shared, xt ModT) []Mat {
				out := viewProgram(e, x, xt)
				var mine []Word
				if e.Me == c {
					mine = tr.opened
				}
				var rev []Word
				for _, m := range out {
					rev = append(rev, e.Reveal(m).V...)
				}
				return []Mat{{R: len(mine), C: 1, V: mine}, {R: len(rev), C: 1, V: rev}}
			}, func(i int, n PeerNet) PeerNet {
				if i == c {
					rec.PeerNet = n
					return rec
				}
				return n
			}, func(i int, e *Engine) {
				e.be.(*replicated).batch = 1 // bits as needed: fewer words to count
				smallBatches(i, e)
				if i == c {
					tr = &tracing{backend: e.be}
					e.be = tr
				}
			})
			for i, err := range errs {
				if err != nil {
					t.Fatalf("party %d: %v", i, err)
				}
			}
			// The reveals at the end are not part of the view tested.
			recv[in].add(rec.recv[:len(rec.recv)-revealWords(got[c][1].R)])
			reshared[in].add(rec.reshared)
			opened[in].add(got[c][0].V)
			outputs[in].add(got[c][1].V)
		}
	}
	two, _ := recv[0].worst(&recv[1])
	_, half := reshared[0].worst(&reshared[1])
	twoOpen, _ := opened[0].worst(&opened[1])
	control, _ := outputs[0].worst(&outputs[1])
	t.Logf("%d received words (%d of resharings), %d opened values a run: two-sample z %.2f (received), %.2f (opened); resharings' bits against 1/2: z %.2f; the outputs (control): z %.1f",
		len(recv[0].ones), len(reshared[0].ones), len(opened[0].ones), two, twoOpen, half, control)
	if two > 6.5 || twoOpen > 6.5 || half > 6.5 {
		t.Errorf("party %d's view tells the inputs apart: z %.2f (received), %.2f (opened), %.2f (resharings against uniform); bar 6.5", c, two, twoOpen, half)
	}
	if control < 10 {
		t.Errorf("the control (the outputs) gives z %.1f: the statistic does not see a difference in outputs", control)
	}
}

// revealWords is what a party receives while the outputs of n words are
// revealed (one round per output: the component and a hash of two words;
// viewProgram has six outputs).
func revealWords(n int) int { return n + 6*2 }
