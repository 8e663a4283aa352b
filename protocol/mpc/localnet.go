package mpc

import (
	"errors"
	"sync"
)

// LocalNets returns n connected in-process Nets (party i uses the i-th):
// each Exchange waits for the n parties' shares of the round and returns
// their sum. For tests and the simulator.
func LocalNets(n int) []Net {
	h := &hub{n: n}
	h.cond = sync.NewCond(&h.mu)
	nets := make([]Net, n)
	for i := range nets {
		nets[i] = hubNet{h}
	}
	return nets
}

type hub struct {
	mu      sync.Mutex
	cond    *sync.Cond
	n       int
	round   int
	arrived int
	sum     []Word
	done    []Word // the last round's sum
	closed  bool
}

type hubNet struct{ h *hub }

// ErrClosed is returned by a LocalNets Exchange after Close.
var ErrClosed = errors.New("local net closed")

// Close wakes every waiting party with ErrClosed.
func CloseLocalNets(nets []Net) {
	if len(nets) == 0 {
		return
	}
	h := nets[0].(hubNet).h
	h.mu.Lock()
	h.closed = true
	h.cond.Broadcast()
	h.mu.Unlock()
}

func (n hubNet) Exchange(mine []Word) ([]Word, error) {
	h := n.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	round := h.round
	if h.arrived == 0 {
		h.sum = make([]Word, len(mine))
	}
	if len(mine) != len(h.sum) {
		h.closed = true
		h.cond.Broadcast()
		return nil, errors.New("parties opened rounds of different sizes")
	}
	for i, w := range mine {
		h.sum[i] = h.sum[i].Add(w)
	}
	h.arrived++
	if h.arrived == h.n {
		h.done, h.sum, h.arrived = h.sum, nil, 0
		h.round++
		h.cond.Broadcast()
	}
	for h.round == round && !h.closed {
		h.cond.Wait()
	}
	if h.round == round {
		return nil, ErrClosed
	}
	return append([]Word(nil), h.done...), nil
}
