package transport

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// A unary handler's response is marshalled by gRPC into a buffer of its own
// after the handler returns, and that buffer stays queued until the peer has
// read it. A thousand owners fetching the 384 KiB committee key at once would
// hold a thousand copies in the proxy. A response passed through Share is
// encoded once: every server built with ServerOptions sends those same bytes
// (read-only) for every call that returns that very pointer. A response
// built for one call may also hold a shared message as one of its own
// (top-level) fields: that field is sent from the shared encoding and only
// the rest is marshalled, so that a large common part goes out once however
// many callers get it with a small part of their own.
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

// sharingCodec is the proto codec, except for shared messages (sent from
// their encodings) and uploads' ciphertexts (received into recycled
// buffers: unmarshalCiphertext).
type sharingCodec struct{ encoding.CodecV2 }

func (c sharingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*fedpcav1.UploadRequest); ok {
		buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
		defer buf.Free()
		if unmarshalCiphertext(buf.ReadOnlyData(), m) {
			return nil
		}
	}
	return c.CodecV2.Unmarshal(data, v)
}

func (c sharingCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return c.CodecV2.Marshal(v)
	}
	if b, ok := shared.Load(m); ok {
		return mem.BufferSlice{mem.SliceBuffer(b.([]byte))}, nil
	}
	// The top-level message fields that are shared are sent as their
	// encodings; the other fields, copied (without their data) into a
	// message of the same type, are marshalled after them. The receiver
	// parses the concatenation as one message (protobuf merges fields in any
	// order).
	r := m.ProtoReflect()
	var out mem.BufferSlice
	rest := r.New()
	r.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() == protoreflect.MessageKind && fd.Cardinality() != protoreflect.Repeated {
			if b, ok := shared.Load(v.Message().Interface()); ok {
				enc := b.([]byte)
				tag := protowire.AppendVarint(protowire.AppendTag(nil, fd.Number(), protowire.BytesType), uint64(len(enc)))
				out = append(out, mem.SliceBuffer(tag), mem.SliceBuffer(enc))
				return true
			}
		}
		rest.Set(fd, v)
		return true
	})
	if out == nil {
		return c.CodecV2.Marshal(v)
	}
	b, err := proto.Marshal(rest.Interface())
	if err != nil {
		return nil, err
	}
	return append(out, mem.SliceBuffer(b)), nil
}

func sharingCodecOption() grpc.ServerOption {
	return grpc.ForceServerCodecV2(sharingCodec{encoding.GetCodecV2("proto")})
}

// SharedLen is the number of messages whose encodings are shared: what a
// long-running daemon must not let grow with the jobs it has finished.
func SharedLen() int {
	n := 0
	shared.Range(func(any, any) bool { n++; return true })
	return n
}
