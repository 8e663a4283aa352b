package faultnet

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The message faults: gRPC client interceptors on the nodes' connections.

func lost(what string) error {
	return status.Errorf(codes.Unavailable, "faultnet: %s lost (fault injection)", what)
}

// Sleep waits d or until ctx is done (a gRPC status error then).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-t.C:
		return nil
	}
}

// detached returns a context for a duplicate call: the values of ctx
// (metadata), not its cancellation, and a minute to run.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

// DialOptions are the interceptors of a node's client connections.
func (n *Network) DialOptions(from string) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(n.unary(from)),
		grpc.WithChainStreamInterceptor(n.stream(from)),
	}
}

func (n *Network) unary(from string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		f := n.decide(from, n.nodeAt(cc.Target()), method)
		if f.kind != "" {
			n.Count(f.kind)
		}
		switch f.kind {
		case FaultDelay:
			if err := Sleep(ctx, f.delay); err != nil {
				return err
			}
		case FaultDropRequest:
			return lost("request")
		case FaultDropResponse:
			if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
				return err
			}
			return lost("response")
		case FaultDuplicate:
			// The copy goes before the call, or (a retransmission) after
			// it: the server sees the request twice, in either order.
			fresh := reply.(proto.Message).ProtoReflect().New().Interface() // before the call writes reply
			dup := func() {
				dctx, cancel := detached(ctx)
				defer cancel()
				_ = invoker(dctx, method, req, fresh, cc, opts...)
			}
			if f.at%2 == 0 {
				go dup()
			} else {
				defer func() { go dup() }()
			}
		}
		if err := invoker(ctx, method, req, reply, cc, opts...); err != nil {
			return err
		}
		n.deliver(from, method, reply)
		return nil
	}
}

func (n *Network) stream(from string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		f := n.decide(from, n.nodeAt(cc.Target()), method)
		if f.kind == FaultDelay {
			n.Count(f.kind)
			if err := Sleep(ctx, f.delay); err != nil {
				return nil, err
			}
		}
		sctx, cancel := context.WithCancel(ctx)
		s, err := streamer(sctx, desc, cc, method, opts...)
		if err != nil {
			cancel()
			return nil, err
		}
		fs := &faultStream{ClientStream: s, n: n, f: f, cancel: cancel, from: from, method: method}
		if f.kind == FaultDuplicate {
			n.Count(f.kind)
			// The copy runs alongside the call, or after it ended.
			start := make(chan struct{})
			if f.at%2 == 0 {
				close(start)
			} else {
				go func() { <-sctx.Done(); close(start) }()
			}
			fs.shadow = newShadow(ctx, start, desc, cc, method, streamer, opts)
		}
		return fs, nil
	}
}

// faultStream is a client stream that may break (a request or response
// lost) or have a shadow (a duplicate of the whole call).
type faultStream struct {
	grpc.ClientStream
	n      *Network
	f      fault
	cancel context.CancelFunc
	shadow *shadow
	from   string
	method string

	mu           sync.Mutex
	sent, recvd  int
	broken       bool
	brokenReason string
}

func (s *faultStream) breakNow(what string) error {
	s.mu.Lock()
	if !s.broken {
		s.broken, s.brokenReason = true, what
		s.n.Count(s.f.kind)
	}
	s.mu.Unlock()
	s.cancel()
	return lost(what)
}

func (s *faultStream) isBroken() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken, s.brokenReason
}

// next returns a message counter's value and increments it.
func (s *faultStream) next(counter *int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := *counter
	*counter++
	return i
}

func (s *faultStream) SendMsg(m any) error {
	if b, what := s.isBroken(); b {
		return lost(what)
	}
	if i := s.next(&s.sent); s.f.kind == FaultDropRequest && i == s.f.at {
		return s.breakNow("request")
	}
	if s.shadow != nil {
		s.shadow.send(m)
	}
	return s.ClientStream.SendMsg(m)
}

func (s *faultStream) CloseSend() error {
	if s.shadow != nil {
		s.shadow.closeSend()
	}
	return s.ClientStream.CloseSend()
}

func (s *faultStream) RecvMsg(m any) error {
	if b, what := s.isBroken(); b {
		return lost(what)
	}
	err := s.ClientStream.RecvMsg(m)
	if err != nil {
		s.cancel()
		return err
	}
	if i := s.next(&s.recvd); s.f.kind == FaultDropResponse && i == s.f.at {
		return s.breakNow("response")
	}
	s.n.deliver(s.from, s.method, m)
	return nil
}

// shadow replays a stream's requests on a second stream of the same method
// (its responses are read and discarded), as a duplicated call would.
type shadow struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []any
	closed bool
}

func newShadow(ctx context.Context, start <-chan struct{}, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts []grpc.CallOption) *shadow {
	sh := &shadow{}
	sh.cond = sync.NewCond(&sh.mu)
	go func() {
		<-start
		dctx, cancel := detached(ctx)
		defer cancel()
		s, err := streamer(dctx, desc, cc, method, opts...)
		if err != nil {
			sh.drop()
			return
		}
		go func() {
			for {
				if err := s.RecvMsg(new(emptypb.Empty)); err != nil {
					return
				}
			}
		}()
		for {
			sh.mu.Lock()
			for len(sh.queue) == 0 && !sh.closed {
				sh.cond.Wait()
			}
			if len(sh.queue) == 0 {
				sh.mu.Unlock()
				_ = s.CloseSend()
				<-dctx.Done()
				return
			}
			m := sh.queue[0]
			sh.queue = sh.queue[1:]
			sh.mu.Unlock()
			if m == nil || s.SendMsg(m) != nil {
				sh.drop()
				return
			}
		}
	}()
	return sh
}

// send queues a copy of a request (the caller may reuse its buffers).
func (sh *shadow) send(m any) {
	pm, ok := m.(proto.Message)
	if !ok {
		return
	}
	c := proto.Clone(pm)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.closed {
		sh.queue = append(sh.queue, c)
		sh.cond.Signal()
	}
}

func (sh *shadow) closeSend() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.closed = true
	sh.cond.Signal()
}

func (sh *shadow) drop() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.closed, sh.queue = true, nil
}
