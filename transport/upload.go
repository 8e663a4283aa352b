package transport

import (
	"context"
	"errors"
	"io"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// Upload runs the client side of ProxyService.Upload: it sends the header,
// waits to be admitted, sends the ciphertexts one per message and returns the
// proxy's acknowledgement (or its refusal). A re-sent upload is answered
// right after the header, without sending the ciphertexts again.
func Upload(ctx context.Context, c fedpcav1.ProxyServiceClient, hd *fedpcav1.UploadHeader, blobs [][]byte) (*fedpcav1.UploadResponse, error) {
	stream, err := c.Upload(ctx)
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
	return stream.Recv()
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
