package transport

import (
	"time"

	"google.golang.org/grpc"
)

// StopGracefully lets running RPCs finish for up to timeout, then stops the
// server.
func StopGracefully(srv *grpc.Server, timeout time.Duration) {
	done := make(chan struct{})
	go func() { srv.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(timeout):
		srv.Stop()
	}
}
