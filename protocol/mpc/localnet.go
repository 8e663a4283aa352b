package mpc

import (
	"errors"
	"sync"
)

// LocalNets returns n connected in-process Nets (party i uses the i-th):
// each Exchange waits for the n parties' shares of the round and returns
// their sum. For tests and the simulator.
func LocalNets(n int) []Net {
	h := &hub{barrier: newBarrier(n)}
	nets := make([]Net, n)
	for i := range nets {
		nets[i] = hubNet{h}
	}
	return nets
}

type hub struct {
	*barrier
	sum  []Word
	done []Word // the last round's sum
}

type hubNet struct{ h *hub }

// ErrClosed is returned by a LocalNets Exchange after Close.
var ErrClosed = errors.New("local net closed")

// Close wakes every waiting party with ErrClosed.
func CloseLocalNets(nets []Net) {
	if len(nets) > 0 {
		nets[0].(hubNet).h.close()
	}
}

func (n hubNet) Exchange(mine []Word) ([]Word, error) {
	h := n.h
	var out []Word
	err := h.exchange(func(first bool) error {
		if first {
			h.sum = make([]Word, len(mine))
		}
		if len(mine) != len(h.sum) {
			return errors.New("parties opened rounds of different sizes")
		}
		for i, w := range mine {
			h.sum[i] = h.sum[i].Add(w)
		}
		return nil
	}, func() { h.done, h.sum = h.sum, nil }, func() { out = append([]Word(nil), h.done...) })
	return out, err
}

// barrier is the round barrier of n in-process parties (LocalNets,
// LocalPeerNets).
type barrier struct {
	mu                sync.Mutex
	cond              *sync.Cond
	n, round, arrived int
	closed            bool
}

func newBarrier(n int) *barrier {
	b := &barrier{n: n}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// close wakes every waiting party with ErrClosed, and makes every later
// exchange fail with it.
func (b *barrier) close() {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	b.mu.Unlock()
}

// exchange runs one party's round under the barrier's lock: put adds its
// message (first: it is the round's first; an error closes the barrier),
// end completes the round when the n-th has arrived, and get reads the
// party's result once the round is complete.
func (b *barrier) exchange(put func(first bool) error, end, get func()) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	round := b.round
	if err := put(b.arrived == 0); err != nil {
		b.closed = true
		b.cond.Broadcast()
		return err
	}
	b.arrived++
	if b.arrived == b.n {
		end()
		b.arrived = 0
		b.round++
		b.cond.Broadcast()
	}
	for b.round == round && !b.closed {
		b.cond.Wait()
	}
	if b.round == round {
		return ErrClosed
	}
	get()
	return nil
}
