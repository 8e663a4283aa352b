package transport

import (
	"context"
	"errors"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrorCode maps a domain error (matched with errors.Is) to a status code.
type ErrorCode struct {
	Err  error
	Code codes.Code
}

// ErrorTable is a role's one table from domain errors to status codes.
type ErrorTable []ErrorCode

// Status turns a handler's error into a gRPC status error: a status error
// passes through; a domain error of the table (or a context error) gets its
// code and its message, which names what is wrong for the caller to fix;
// anything else is an internal error whose detail goes to the role's log
// only, and the caller gets a generic Internal that says where to look.
func (t ErrorTable) Status(log hclog.Logger, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, e := range t {
		if errors.Is(err, e.Err) {
			return status.Error(e.Code, err.Error())
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	log.Error("internal error", "error", err)
	return status.Error(codes.Internal, "internal error (the server's log has the detail)")
}
