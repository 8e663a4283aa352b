package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Backoff is exponential backoff with full jitter: the pause before retry n
// is uniform in [0, min(Max, Initial * 2^n)), so that many clients told to
// retry at the same moment (thousands of owners, a restarted proxy) spread
// out instead of coming back together. The zero value pauses up to 100 ms,
// then 200 ms, ... up to 10 s. Not safe for concurrent use.
type Backoff struct {
	Initial, Max time.Duration
	n            int
}

// Next returns the next pause.
func (b *Backoff) Next() time.Duration {
	initial, ceiling := b.Initial, b.Max
	if initial <= 0 {
		initial = 100 * time.Millisecond
	}
	if ceiling <= 0 {
		ceiling = 10 * time.Second
	}
	d := initial << min(b.n, 30)
	if d <= 0 || d > ceiling {
		d = ceiling
	} else {
		b.n++
	}
	return rand.N(d) + 1
}

// WaitFor pauses before retrying after err: when the server said how long
// to wait (a RetryInfo, see RetryDelay), for a time uniform in
// [delay, 2 delay), so that owners told the same thing come back spread
// over the time the server expects to need; otherwise as Wait. It returns
// ctx's error if ctx ends first.
func (b *Backoff) WaitFor(ctx context.Context, err error) error { return Sleep(ctx, b.Pause(err)) }

// Pause is the pause WaitFor makes after err.
func (b *Backoff) Pause(err error) time.Duration {
	if d, ok := RetryDelay(err); ok {
		return d + rand.N(d)
	}
	return b.Next()
}

// RetryDelay returns the retry delay a server attached to an error's status
// (google.rpc.RetryInfo), if any.
func RetryDelay(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay().IsValid() {
			if d := ri.GetRetryDelay().AsDuration(); d > 0 {
				return d, true
			}
		}
	}
	return 0, false
}

// WithRetryDelay attaches a retry delay to a status (google.rpc.RetryInfo),
// for clients to read with RetryDelay.
func WithRetryDelay(st *status.Status, d time.Duration) *status.Status {
	if with, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d)}); err == nil {
		return with
	}
	return st
}

// Reset starts again from Initial (after a success).
func (b *Backoff) Reset() { b.n = 0 }

// Wait pauses for Next, or returns ctx's error if ctx ends first.
func (b *Backoff) Wait(ctx context.Context) error { return Sleep(ctx, b.Next()) }

// Sleep pauses for d, or returns ctx's error if ctx ends first.
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Call describes a client call for Retry.
type Call struct {
	// What names the call in errors, e.g. "create job on the proxy".
	What string
	// Timeout is the deadline of each attempt (every client call has one).
	Timeout time.Duration
	Backoff Backoff
	// Attempts bounds the attempts (0: until ctx ends).
	Attempts int
	// Retryable says which errors may go away (default Transient). Only
	// idempotent calls should be retried.
	Retryable func(error) bool
	// OnRetry, if set, is told about each failed attempt before the pause.
	OnRetry func(attempt int, err error)
}

// Retry runs fn, each attempt under its own deadline, until it succeeds,
// fails with an error that is not retryable, has used its attempts, or ctx
// ends. The error it returns names the call, keeps the last error's gRPC
// status (status.Code works on it) and says what to do about it.
func Retry(ctx context.Context, c Call, fn func(context.Context) error) error {
	if c.Timeout <= 0 {
		return fmt.Errorf("%s: no deadline set (a bug: every client call needs one)", c.What)
	}
	retryable := c.Retryable
	if retryable == nil {
		retryable = Transient
	}
	start := time.Now()
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, c.Timeout)
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (stopped after %d attempts in %s: %v)", c.What, ctx.Err(), attempt, since(start), Message(err))
		}
		if IdentityError(err) || !retryable(err) {
			return fmt.Errorf("%s: %w%s", c.What, Plain(err), Advice(err))
		}
		if c.Attempts > 0 && attempt >= c.Attempts {
			return fmt.Errorf("%s: %w (gave up after %d attempts in %s)%s", c.What, Plain(err), attempt, since(start), Advice(err))
		}
		if c.OnRetry != nil {
			c.OnRetry(attempt, err)
		}
		if werr := c.Backoff.WaitFor(ctx, err); werr != nil {
			return fmt.Errorf("%s: %w (stopped after %d attempts in %s: %v)", c.What, werr, attempt, since(start), Message(err))
		}
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

// Transient reports whether a call's error may go away by itself: the peer
// unreachable, restarting, busy or out of space, or an attempt that ran out
// of time. Refusals (invalid argument, permission denied, not found, failed
// precondition, already exists) are not transient.
func Transient(err error) bool {
	if IdentityError(err) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Canceled, codes.Internal, codes.Unknown:
		return true
	}
	return false
}

// handshakeFailed is how gRPC reports a TLS handshake that failed on the
// client's side (our VerifyConnection's error follows it).
const handshakeFailed = "authentication handshake failed: "

// IdentityError reports whether a call failed because of who is at the other
// end or who the caller is: the server's certificate names another role or
// ID than expected (a wrong address), fails verification, or the server
// refused the caller's identity (Unauthenticated, PermissionDenied). Such
// errors are permanent: retrying cannot fix them.
func IdentityError(err error) bool {
	if err == nil {
		return false
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Unauthenticated, codes.PermissionDenied:
		return true
	case codes.Unavailable:
		return strings.Contains(st.Message(), handshakeFailed)
	}
	return false
}

// Message is an error's text for people: a gRPC status error's message
// without the "rpc error: code = ... desc = ..." framing, and a failed TLS
// handshake's reason without gRPC's transport prefix.
func Message(err error) string {
	if err == nil {
		return ""
	}
	st, ok := status.FromError(err)
	if !ok {
		return err.Error()
	}
	msg := st.Message()
	if i := strings.Index(msg, handshakeFailed); i >= 0 {
		msg = "TLS handshake failed: " + strings.TrimRight(msg[i+len(handshakeFailed):], `"`)
	}
	if st.Code() == codes.Unavailable && strings.HasPrefix(msg, "connection error: desc = ") {
		msg = strings.Trim(strings.TrimPrefix(msg, "connection error: desc = "), `"`)
		msg = strings.TrimPrefix(msg, "transport: ")
	}
	return msg
}

// Plain wraps an error so that its text is Message's while errors.Is,
// errors.As and status.Code still see the original status.
func Plain(err error) error {
	if _, ok := status.FromError(err); !ok || err == nil {
		return err
	}
	return plainError{err}
}

type plainError struct{ err error }

func (e plainError) Error() string              { return Message(e.err) }
func (e plainError) Unwrap() error              { return e.err }
func (e plainError) GRPCStatus() *status.Status { return status.Convert(e.err) }

// Advice is a short hint of what to do about a call's error, for error
// messages ("" when the server's message says it all).
func Advice(err error) string {
	if IdentityError(err) && status.Code(err) == codes.Unavailable {
		return "; the address is another node's, or its certificate is not from this deployment's CA: check the address"
	}
	switch status.Code(err) {
	case codes.Unavailable:
		return "; the peer is unreachable: check that it is running, its address and the network, then retry"
	case codes.DeadlineExceeded:
		return "; the peer did not answer in time: it may be overloaded or cut off; retry later"
	case codes.ResourceExhausted:
		return "; the peer is out of capacity (busy, or its disk is full): retry later, or free space on it"
	case codes.Unauthenticated:
		return "; check this node's certificate and the deployment CA"
	case codes.PermissionDenied:
		return "; check this node's certificate (its role and ID) and what it is allowed to do"
	}
	return ""
}
