package transport

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/stats"
)

// ByteCounter is a gRPC stats handler that counts the payload bytes a node
// sends and receives (wire length). Attach it to a server with
// grpc.StatsHandler and to clients with grpc.WithStatsHandler. Safe for
// concurrent use.
type ByteCounter struct {
	sent, received atomic.Int64
}

// Sent and Received return the counts so far.
func (b *ByteCounter) Sent() int64     { return b.sent.Load() }
func (b *ByteCounter) Received() int64 { return b.received.Load() }

// TagRPC implements stats.Handler.
func (b *ByteCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// HandleRPC implements stats.Handler.
func (b *ByteCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	switch p := s.(type) {
	case *stats.InPayload:
		b.received.Add(int64(p.WireLength))
	case *stats.OutPayload:
		b.sent.Add(int64(p.WireLength))
	}
}

// TagConn implements stats.Handler.
func (b *ByteCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

// HandleConn implements stats.Handler.
func (b *ByteCounter) HandleConn(context.Context, stats.ConnStats) {}
