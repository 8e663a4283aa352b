package csp

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/seal"
)

// relayPair returns two members' nets joined by a relay that hands each
// round's frames from one member to the other through tamper (the proxy's
// part, honest when tamper returns its argument).
func relayPair(t *testing.T, tamper func(from int, round uint64, frames []*fedpcav1.SolveRound) []*fedpcav1.SolveRound) [2]*solveNet {
	t.Helper()
	k0, err := seal.NewExchangeKey()
	if err != nil {
		t.Fatal(err)
	}
	k1, err := seal.NewExchangeKey()
	if err != nil {
		t.Fatal(err)
	}
	ch01, err := seal.NewChannel(k0, k1.PublicKey().Bytes(), "solve job")
	if err != nil {
		t.Fatal(err)
	}
	ch10, err := seal.NewChannel(k1, k0.PublicKey().Bytes(), "solve job")
	if err != nil {
		t.Fatal(err)
	}
	var nets [2]*solveNet
	var mu sync.Mutex
	pending := [2][]*fedpcav1.SolveRound{}
	for i := range 2 {
		channels := make([]*seal.Channel, 2)
		channels[1-i] = map[int]*seal.Channel{0: ch01, 1: ch10}[i]
		in := &solveInbox{corrections: newQueue[*fedpcav1.Correction](), rounds: newQueue[*fedpcav1.SolveRound](), done: make(chan struct{})}
		nets[i] = &solveNet{id: "job", me: i, channels: channels, in: in, send: func(r *fedpcav1.SolveResponse) error {
			mu.Lock()
			defer mu.Unlock()
			o := r.GetRound().GetOpenings()[0]
			pending[i] = append(pending[i], &fedpcav1.SolveRound{Round: r.GetRound().GetRound(), Openings: []*fedpcav1.SealedOpening{o}})
			if !o.GetMore() {
				for _, f := range tamper(i, r.GetRound().GetRound(), pending[i]) {
					nets[1-i].in.rounds.push(f)
				}
				pending[i] = nil
			}
			return nil
		}}
	}
	return nets
}

// exchange runs one round at both members with shares of n words; it
// returns each member's sum and error (a member still waiting after 5 s
// is stopped and reported).
func exchange(nets [2]*solveNet, n int) ([2][]mpc.Word, [2]error) {
	var sums [2][]mpc.Word
	var errs [2]error
	var wg sync.WaitGroup
	for i := range 2 {
		mine := make([]mpc.Word, n)
		for j := range mine {
			mine[j] = mpc.FromInt64(int64((i + 1) * (j + 1)))
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[i], errs[i] = sumNet{nets[i]}.Exchange(mine)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		for i := range 2 {
			nets[i].in.err = errors.New("still waiting")
			close(nets[i].in.done)
		}
		<-done
	}
	return sums, errs
}

// TestSolveNetFrames: a round of more than two frames opens to the sum at
// both members; a relay that reorders, drops, replays, re-labels or
// truncates frames makes the receiving member refuse the round (an error
// naming it), never open a wrong sum or wait for ever.
func TestSolveNetFrames(t *testing.T) {
	n := 2*job.FrameWords + 5 // three frames
	honest := func(_ int, _ uint64, f []*fedpcav1.SolveRound) []*fedpcav1.SolveRound { return f }
	nets := relayPair(t, honest)
	for round := range 2 {
		sums, errs := exchange(nets, n)
		for i := range 2 {
			if errs[i] != nil {
				t.Fatalf("round %d, member %d: %v", round+1, i, errs[i])
			}
			for j, w := range sums[i] {
				if w != mpc.FromInt64(int64(3*(j+1))) {
					t.Fatalf("round %d, member %d, word %d: %v", round+1, i, j, w)
				}
			}
		}
	}

	var first []*fedpcav1.SolveRound // member 0's round-1 frames, for the replay
	for name, tc := range map[string]struct {
		tamper func(from int, round uint64, f []*fedpcav1.SolveRound) []*fedpcav1.SolveRound
		want   string
	}{
		"frames swapped": {func(_ int, _ uint64, f []*fedpcav1.SolveRound) []*fedpcav1.SolveRound {
			f[0], f[1] = f[1], f[0]
			return f
		}, "party 0's frame 0"},
		"last frame dropped": {func(_ int, _ uint64, f []*fedpcav1.SolveRound) []*fedpcav1.SolveRound {
			return f[:len(f)-1]
		}, "still waiting"},
		"more cleared early": {func(_ int, _ uint64, f []*fedpcav1.SolveRound) []*fedpcav1.SolveRound {
			f[0].Openings[0].More = false
			return f[:1]
		}, "party 0 opened 65536 words, want 131077"},
		"round re-labelled": {func(_ int, round uint64, f []*fedpcav1.SolveRound) []*fedpcav1.SolveRound {
			if round == 2 {
				for _, r := range first {
					r.Round = 2
				}
				return first
			}
			return f
		}, "party 0's frame 0"},
		"a frame cut short": {func(_ int, _ uint64, f []*fedpcav1.SolveRound) []*fedpcav1.SolveRound {
			o := f[0].Openings[0]
			o.Sealed = o.Sealed[:len(o.Sealed)-32]
			return f
		}, "party 0's frame 0"},
	} {
		t.Run(name, func(t *testing.T) {
			first = nil
			nets := relayPair(t, func(from int, round uint64, f []*fedpcav1.SolveRound) []*fedpcav1.SolveRound {
				if from != 0 {
					return f
				}
				if round == 1 {
					for _, r := range f {
						first = append(first, proto.Clone(r).(*fedpcav1.SolveRound))
					}
					if name == "round re-labelled" {
						return f
					}
				}
				return tc.tamper(from, round, f)
			})
			rounds := 1
			if name == "round re-labelled" {
				if _, errs := exchange(nets, n); errs[0] != nil || errs[1] != nil {
					t.Fatalf("round 1: %v", errs)
				}
				rounds = 2
			}
			sums, errs := exchange(nets, n)
			if errs[1] == nil || !strings.Contains(errs[1].Error(), tc.want) {
				t.Fatalf("round %d: member 1 got %v (sum of %d words), want an error with %q", rounds, errs[1], len(sums[1]), tc.want)
			}
			t.Logf("member 1: %v", errs[1])
		})
	}
}

// TestCorrectionFrames: party 0's corrections arrive in frames; a matrix
// is rebuilt from them, and frames that change its shape, overrun it or
// end it early are refused.
func TestCorrectionFrames(t *testing.T) {
	frame := func(r, c, words int, more bool) *fedpcav1.Correction {
		b := make([]byte, 0, 16*words)
		for j := range words {
			b = mpc.FromInt64(int64(j)).AppendBytes(b)
		}
		return &fedpcav1.Correction{Rows: uint32(r), Cols: uint32(c), Words: b, More: more}
	}
	run := func(frames ...*fedpcav1.Correction) (mpc.Mat, error) {
		in := &solveInbox{corrections: newQueue[*fedpcav1.Correction](), rounds: newQueue[*fedpcav1.SolveRound](), done: make(chan struct{})}
		for _, f := range frames {
			in.corrections.push(f)
		}
		in.err = errors.New("the proxy ended the computation")
		close(in.done)
		return in.correction()
	}
	m, err := run(frame(3, 4, 8, true), frame(3, 4, 4, false))
	if err != nil || m.R != 3 || m.C != 4 || m.V[8] != mpc.FromInt64(0) || m.V[7] != mpc.FromInt64(7) {
		t.Fatalf("two frames: %v %v", m, err)
	}
	for name, tc := range map[string]struct {
		frames []*fedpcav1.Correction
		want   string
	}{
		"shape changed": {[]*fedpcav1.Correction{frame(3, 4, 8, true), frame(4, 3, 4, false)}, "a frame of a 4x3 correction"},
		"overrun":       {[]*fedpcav1.Correction{frame(3, 4, 8, true), frame(3, 4, 8, false)}, "at word 8"},
		"ended early":   {[]*fedpcav1.Correction{frame(3, 4, 8, false)}, "ended after 8 words"},
		"stream ended":  {[]*fedpcav1.Correction{frame(3, 4, 8, true)}, "the proxy ended"},
		"too large":     {[]*fedpcav1.Correction{frame(1<<14, 1<<13, 0, false)}, "correction of 16384x8192"},
	} {
		if _, err := run(tc.frames...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}
