package transporttest

import (
	"context"
	"testing"
	"time"

	"github.com/fedpca/fedpca/transport"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Credentials issues in-memory credentials for an identity from ca, valid
// for an hour, or fails the test.
func Credentials(tb testing.TB, ca *transport.CA, id transport.Identity) *transport.Credentials {
	tb.Helper()
	c, err := ca.Credentials(id, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Method is one RPC and its streaming sides.
type Method struct {
	Name           string
	Client, Server bool
}

// Methods lists every RPC of the services.
func Methods(descs ...grpc.ServiceDesc) []Method {
	var out []Method
	for _, d := range descs {
		for _, m := range d.Methods {
			out = append(out, Method{Name: "/" + d.ServiceName + "/" + m.MethodName})
		}
		for _, s := range d.Streams {
			out = append(out, Method{Name: "/" + d.ServiceName + "/" + s.StreamName, Client: s.ClientStreams, Server: s.ServerStreams})
		}
	}
	return out
}

// Call invokes a method with an empty request (decoded by the server as its
// zero request) and returns the outcome.
func Call(ctx context.Context, conn *grpc.ClientConn, m Method) error {
	if !m.Client && !m.Server {
		return conn.Invoke(ctx, m.Name, &emptypb.Empty{}, &emptypb.Empty{})
	}
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ClientStreams: m.Client, ServerStreams: m.Server}, m.Name)
	if err != nil {
		return err
	}
	if !m.Client {
		if err := s.SendMsg(&emptypb.Empty{}); err != nil {
			return err
		}
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	return s.RecvMsg(&emptypb.Empty{})
}
