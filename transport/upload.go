package transport

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// Upload runs the client side of ProxyService.Upload: it sends the header,
// waits to be admitted, sends each ciphertext followed by its proof message
// (a proof group's proof after its last ciphertext, empty after the others:
// job.ProofGroup), one per message, and returns the proxy's
// acknowledgement (or its refusal). A re-sent upload is answered right
// after the header, without sending the ciphertexts again.
func Upload(ctx context.Context, c fedpcav1.ProxyServiceClient, hd *fedpcav1.UploadHeader, blobs, proofs [][]byte, opts ...grpc.CallOption) (*fedpcav1.UploadResponse, error) {
	if len(proofs) != len(blobs) {
		return nil, fmt.Errorf("upload: %d ciphertexts and %d proofs", len(blobs), len(proofs))
	}
	stream, err := c.Upload(ctx, opts...)
	if err != nil {
		return nil, err
	}
	defer stream.CloseSend()
	if err := stream.Send(&fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Header{Header: hd}}); err != nil {
		return nil, recvAfterSend(stream, err)
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	if !first.GetAdmitted() {
		_ = Finish(stream)
		return first, nil
	}
	for i, b := range blobs {
		if err := stream.Send(&fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Ciphertext{Ciphertext: b}}); err != nil {
			return nil, recvAfterSend(stream, err)
		}
		if err := stream.Send(&fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Proof{Proof: proofs[i]}}); err != nil {
			return nil, recvAfterSend(stream, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	ack, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	_ = Finish(stream) // the acknowledgement is what counts
	return ack, nil
}

// Finish reads the end of a client stream whose last message has been
// received, so that the call ends with the server's status (and is counted
// with it, see Metrics) rather than being cancelled with its context. It
// returns that status: nil when the server ended the call cleanly.
func Finish(stream grpc.ClientStream) error {
	err := stream.RecvMsg(new(emptypb.Empty))
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case err == nil:
		return errors.New("the server sent more messages than expected")
	}
	return err
}

// recvAfterSend returns the server's status when a send failed because the
// server ended the stream.
func recvAfterSend(stream fedpcav1.ProxyService_UploadClient, sendErr error) error {
	if errors.Is(sendErr, io.EOF) {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
	return sendErr
}

// An upload's ciphertext message is the largest a proxy receives, one per
// owner and job. The proto codec copies its bytes out of gRPC's receive
// buffer into a new slice, and at thousands of uploads that garbage (one
// ciphertext, 524 KB at the default parameters, per upload) is what drives
// the proxy's collector (docs/SCALING.md). Servers built with ServerOptions
// copy them instead into a buffer from a short free list, which the handler
// gives back with RecycleCiphertext once it has decoded and hashed them. A
// buffer not given back is simply collected.
var ciphertextBufs = NewFreeList[[]byte](16)

// ciphertextField is the field number of UploadRequest.ciphertext.
var ciphertextField = (&fedpcav1.UploadRequest{}).ProtoReflect().Descriptor().Fields().ByName("ciphertext").Number()

// RecycleCiphertext gives back the bytes of a received UploadRequest's
// ciphertext; the caller must not use them (or the message) afterwards.
func RecycleCiphertext(b []byte) { ciphertextBufs.Put(b[:0]) }

// unmarshalCiphertext decodes an UploadRequest holding a ciphertext (its
// only field, as Upload sends it) into a recycled buffer. ok is false for
// any other encoding, which the proto codec then decodes.
func unmarshalCiphertext(data []byte, m *fedpcav1.UploadRequest) (ok bool) {
	num, typ, n := protowire.ConsumeTag(data)
	if n < 0 || num != ciphertextField || typ != protowire.BytesType {
		return false
	}
	v, k := protowire.ConsumeBytes(data[n:])
	if k < 0 || n+k != len(data) {
		return false
	}
	b, ok := ciphertextBufs.Get()
	if !ok {
		b = make([]byte, 0, len(v))
	}
	proto.Reset(m)
	m.Msg = &fedpcav1.UploadRequest_Ciphertext{Ciphertext: append(b, v...)}
	return true
}
