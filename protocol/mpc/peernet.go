package mpc

import (
	"fmt"
)

// PeerNet carries a replicated party's messages, which differ by receiver
// (a Net's Exchange, which returns a sum, does not fit). Exchange runs one
// round: it sends out[j] to party j for every other party j (out[me] is
// ignored; an empty message is still a message: every party sends one to
// each other party every round) and returns in, where in[j] is what party
// j sent to this party in the same round (in[me] nil). The engine calls it
// once per round, the same number of times at every party; it checks the
// lengths it receives. The channels must be authenticated and private
// (each message read only by its receiver): the proxy's relay of sealed
// frames fits.
type PeerNet interface {
	Exchange(out [][]Word) ([][]Word, error)
}

// LocalPeerNets returns n connected in-process PeerNets (party i uses the
// i-th): each Exchange waits for the n parties' messages of the round.
// For tests and the simulator.
func LocalPeerNets(n int) []PeerNet {
	h := &peerHub{barrier: newBarrier(n), box: newBox(n)}
	nets := make([]PeerNet, n)
	for i := range nets {
		nets[i] = peerNet{h: h, me: i}
	}
	return nets
}

// CloseLocalPeerNets wakes every waiting party with ErrClosed, and makes
// every later Exchange fail with it: what a relay does when a party
// aborts.
func CloseLocalPeerNets(nets []PeerNet) {
	if len(nets) > 0 {
		nets[0].(peerNet).h.close()
	}
}

type peerHub struct {
	*barrier
	box  [][][]Word // box[to][from]
	done [][][]Word // the last round's
}

func newBox(n int) [][][]Word {
	b := make([][][]Word, n)
	for i := range b {
		b[i] = make([][]Word, n)
	}
	return b
}

type peerNet struct {
	h  *peerHub
	me int
}

func (p peerNet) Exchange(out [][]Word) ([][]Word, error) {
	h := p.h
	if len(out) != h.n {
		return nil, fmt.Errorf("%d messages for %d parties", len(out), h.n)
	}
	var in [][]Word
	err := h.exchange(func(bool) error {
		for j, m := range out {
			if j != p.me {
				h.box[j][p.me] = append([]Word{}, m...)
			}
		}
		return nil
	}, func() { h.done, h.box = h.box, newBox(h.n) }, func() { in = h.done[p.me] })
	return in, err
}
