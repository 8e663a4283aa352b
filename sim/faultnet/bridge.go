package faultnet

import (
	"context"
	"io"
	"net"
	"sync"
	"time"
)

// A Bridge forwards TCP connections to a target address through the network
// (for a node run as a process, whose own connections the network cannot
// wrap): the pair (from, to) can then be partitioned.
type Bridge struct {
	l        net.Listener
	n        *Network
	from, to string
	target   func() string
	wg       sync.WaitGroup
}

// NewBridge listens on a loopback port and forwards each connection to
// target() as node from dialing node to.
func (n *Network) NewBridge(from, to string, target func() string) (*Bridge, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Bridge{l: l, n: n, from: from, to: to, target: target}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

// Addr is the address the bridge listens at.
func (b *Bridge) Addr() string { return b.l.Addr().String() }

func (b *Bridge) serve() {
	defer b.wg.Done()
	var d net.Dialer
	for {
		in, err := b.l.Accept()
		if err != nil {
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			out, err := b.n.Dial(ctx, b.from, b.target(), func(ctx context.Context, addr string) (net.Conn, error) {
				return d.DialContext(ctx, "tcp", addr)
			})
			if err != nil {
				in.Close()
				return
			}
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			_, _ = io.Copy(in, out)
			in.Close()
		}()
	}
}

// Close stops the bridge and waits for its listener.
func (b *Bridge) Close() { b.l.Close(); b.wg.Wait() }
