package transport

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
)

// A unary handler's response is marshalled by gRPC into a buffer of its own
// after the handler returns, and that buffer stays queued until the peer has
// read it. A thousand owners fetching the 384 KiB committee key at once would
// hold a thousand copies in the proxy. A response passed through Share is
// encoded once: every server built with ServerOptions sends those same bytes
// (read-only) for every call that returns that very pointer.
var shared sync.Map // proto.Message (pointer) -> []byte

// Share encodes m once for every response that returns it. m must not be
// changed afterwards; call Unshare when it is replaced. A message that cannot
// be encoded is not shared (sending it reports the error).
func Share(m proto.Message) {
	if b, err := proto.Marshal(m); err == nil {
		shared.Store(m, b)
	}
}

// Unshare forgets m's encoding (responses already queued keep their bytes).
func Unshare(m proto.Message) { shared.Delete(m) }

// sharingCodec is the proto codec, except for shared messages.
type sharingCodec struct{ encoding.CodecV2 }

func (c sharingCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(proto.Message); ok {
		if b, ok := shared.Load(m); ok {
			return mem.BufferSlice{mem.SliceBuffer(b.([]byte))}, nil
		}
	}
	return c.CodecV2.Marshal(v)
}

func sharingCodecOption() grpc.ServerOption {
	return grpc.ForceServerCodecV2(sharingCodec{encoding.GetCodecV2("proto")})
}
