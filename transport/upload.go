package transport

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// Upload runs the client side of ProxyService.Upload: it sends the header,
// waits to be admitted, sends the ciphertexts one per message and returns the
// proxy's acknowledgement (or its refusal). A re-sent upload is answered
// right after the header, without sending the ciphertexts again.
func Upload(ctx context.Context, c fedpcav1.ProxyServiceClient, hd *fedpcav1.UploadHeader, blobs [][]byte, opts ...grpc.CallOption) (*fedpcav1.UploadResponse, error) {
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
	for _, b := range blobs {
		if err := stream.Send(&fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Ciphertext{Ciphertext: b}}); err != nil {
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
