package transport

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// closeWatcher records when the server closes a connection it accepted.
type closeWatcher struct {
	net.Listener
	closed chan struct{}
	once   sync.Once
}

type watchedConn struct {
	net.Conn
	w *closeWatcher
}

func (l *closeWatcher) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return watchedConn{c, l}, nil
}

func (c watchedConn) Close() error {
	c.w.once.Do(func() { close(c.w.closed) })
	return c.Conn.Close()
}

// blackhole forwards one TCP connection to addr until frozen, then stops
// forwarding without closing anything: a peer that vanished.
type blackhole struct {
	net.Listener
	frozen atomic.Bool
}

func (b *blackhole) serve(t *testing.T, addr string) {
	c, err := b.Accept()
	if err != nil {
		return
	}
	s, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	pipe := func(dst io.Writer, src io.Reader) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if err != nil {
				return
			}
			if b.frozen.Load() {
				continue // dropped: nothing arrives, nothing is closed
			}
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
	}
	go pipe(s, c)
	go pipe(c, s)
	t.Cleanup(func() { c.Close(); s.Close() })
}

// TestKeepaliveDropsVanishedPeer: a client whose packets stop arriving
// (no reset, no close) has its connection closed by the server, so that
// whatever it held (an upload's room) is given back.
func TestKeepaliveDropsVanishedPeer(t *testing.T) {
	saved := serverKeepalive
	serverKeepalive = keepalive.ServerParameters{Time: time.Second, Timeout: 500 * time.Millisecond}
	defer func() { serverKeepalive = saved }()

	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lis := &closeWatcher{Listener: inner, closed: make(chan struct{})}
	srv := grpc.NewServer(ServerOptions(nil, true, hclog.NewNullLogger(), nil)...)
	fedpcav1.RegisterProxyServiceServer(srv, fedpcav1.UnimplementedProxyServiceServer{})
	go srv.Serve(lis)
	defer srv.Stop()

	fl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bh := &blackhole{Listener: fl}
	defer bh.Close()
	go bh.serve(t, inner.Addr().String())

	conn, err := Dialer{Insecure: true, Self: Identity{Role: RoleOwner, ID: "o"}}.Dial(fl.Addr().String(), Identity{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = fedpcav1.NewProxyServiceClient(conn).Decline(ctx, &fedpcav1.DeclineRequest{}) // the connection is up
	bh.frozen.Store(true)
	select {
	case <-lis.closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the server kept the connection of a vanished peer")
	}
}
