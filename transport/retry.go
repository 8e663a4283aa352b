package transport

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
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
	// Attempts bounds the attempts (0: until ctx ends or Deadline).
	Attempts int
	// Deadline, if set, is the deadline of the work the call serves (a
	// job's upload deadline): no attempt lasts and no pause ends past it,
	// and once it can no longer be met Retry fails at once with a
	// DeadlineError. Serves names that work in the error ("job c0d6…";
	// empty: the call's own patience), Peer the other end ("the proxy").
	Deadline time.Time
	Serves   string
	Peer     string
	// Retryable says which errors may go away (default Transient). Only
	// idempotent calls should be retried.
	Retryable func(error) bool
	// OnRetry, if set, is told about each failed attempt before the pause.
	OnRetry func(attempt int, err error)
	// Reach, if set, remembers whether the peer ever answered: while it
	// never has, a connection that cannot be made is retried for
	// NeverReachedGrace only (a peer still starting), then the call fails
	// with one line naming the address (an UnreachableError). Retries past
	// that are for a peer that was reachable (a restart, an outage).
	Reach *Reach
}

// Reach is what a client knows of a peer's reachability: its address, and
// whether it ever answered (any answer, a refusal too). Safe for
// concurrent use; one per connection.
type Reach struct {
	Addr     string
	answered atomic.Bool
}

// Answered reports whether the peer ever answered.
func (r *Reach) Answered() bool { return r != nil && r.answered.Load() }

// Observe records a call's outcome: the peer answered unless the
// connection could not be made or the attempt ran out of time.
func (r *Reach) Observe(err error) {
	if r != nil && (err == nil || !Unreachable(err) && status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded)) {
		r.answered.Store(true)
	}
}

// GiveUp reports whether a call begun at start should stop retrying after
// err: the peer never answered, the connection cannot be made and
// NeverReachedGrace has passed.
func (r *Reach) GiveUp(start time.Time, err error) bool {
	return r != nil && !r.Answered() && Unreachable(err) && time.Since(start) >= NeverReachedGrace
}

// NeverReachedGrace is how long a call retries a peer that never answered
// and whose connection cannot be made: long enough for a daemon started a
// moment ago to listen, short enough that a wrong address is told at once.
const NeverReachedGrace = 3 * time.Second

// UnreachableError is Retry's error for a peer that never answered and
// whose connection could not be made within NeverReachedGrace.
type UnreachableError struct {
	Call Call
	Last error
}

func (e *UnreachableError) Error() string {
	peer := e.Call.Peer
	if peer == "" {
		peer = "the peer"
	}
	return fmt.Sprintf("%s: cannot connect to %s at %s (%s): check that it is running and the address", e.Call.What, peer, e.Call.Reach.Addr, dialReason(e.Last))
}

// Unwrap returns the last attempt's error.
func (e *UnreachableError) Unwrap() error { return e.Last }

// GRPCStatus keeps the last attempt's status code under the plain text.
func (e *UnreachableError) GRPCStatus() *status.Status {
	return status.New(status.Code(e.Last), e.Error())
}

// Unreachable reports whether a call failed because no connection to the
// peer could be made (refused, no route, no such host, a timeout while
// connecting), not because of who the peer is or what it answered.
func Unreachable(err error) bool {
	if status.Code(err) != codes.Unavailable || IdentityError(err) {
		return false
	}
	msg := status.Convert(err).Message()
	return strings.Contains(msg, "connection error") || strings.Contains(msg, "name resolver error") ||
		strings.Contains(msg, "produced zero addresses")
}

// dialReason is the reason a connection could not be made, in a few words
// ("connection refused"), or Message's text when it has none of those.
func dialReason(err error) string {
	msg := Message(err)
	for _, r := range []string{"connection refused", "no route to host", "network is unreachable", "no such host", "i/o timeout",
		"connection reset by peer", "produced zero addresses"} {
		if strings.Contains(msg, r) {
			return r
		}
	}
	return msg
}

// ErrDeadlinePassed is what a DeadlineError is (errors.Is).
var ErrDeadlinePassed = errors.New("deadline passed")

// DeadlineError is Retry's error when the deadline of the work a call
// serves passed, or would pass before another attempt could start. Its
// text says so in plain words; status.Code sees the last attempt's status
// (codes.DeadlineExceeded when no attempt was made).
type DeadlineError struct {
	Call     Call
	Attempts int
	Took     time.Duration
	Last     error // the last attempt's error; nil if none was made
}

func (e *DeadlineError) Error() string {
	c := e.Call
	peer := c.Peer
	if peer == "" {
		peer = "the peer"
	}
	what := "gave up at its deadline " + clock(c.Deadline)
	if c.Serves != "" {
		what = c.Serves + "'s deadline " + clock(c.Deadline) + " passed"
	}
	if e.Last == nil {
		return fmt.Sprintf("%s: %s before the call could be made: nothing was sent", c.What, what)
	}
	return fmt.Sprintf("%s: %s while %s %s (%d attempts in %s; last error: %s)", c.What, what, peer, outage(e.Last), e.Attempts,
		e.Took.Round(time.Millisecond), Message(e.Last))
}

// Is makes errors.Is(err, ErrDeadlinePassed) true.
func (e *DeadlineError) Is(target error) bool { return target == ErrDeadlinePassed }

// Unwrap returns the last attempt's error.
func (e *DeadlineError) Unwrap() error { return e.Last }

// GRPCStatus keeps the last attempt's status code under the plain text.
func (e *DeadlineError) GRPCStatus() *status.Status {
	if e.Last == nil {
		return status.New(codes.DeadlineExceeded, e.Error())
	}
	return status.New(status.Code(e.Last), e.Error())
}

// clock formats a deadline for people: the time of day in UTC, with the
// date when it is not today's.
func clock(t time.Time) string {
	t = t.UTC()
	if t.Format(time.DateOnly) == time.Now().UTC().Format(time.DateOnly) {
		return t.Format("15:04:05 UTC")
	}
	return t.Format("2006-01-02 15:04:05 UTC")
}

// outage says in words what a transient error means about the peer.
func outage(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
		return "did not answer in time"
	case status.Code(err) == codes.ResourceExhausted:
		return "was busy or out of space"
	case status.Code(err) == codes.Unavailable:
		return "was unreachable"
	}
	return "kept failing"
}

// Retry runs fn, each attempt under its own deadline, until it succeeds,
// fails with an error that is not retryable, has used its attempts, ctx
// ends, or the call's Deadline can no longer be met. The error it returns
// names the call, keeps the last error's gRPC status (status.Code works on
// it) and says what to do about it.
func Retry(ctx context.Context, c Call, fn func(context.Context) error) error {
	if c.Timeout <= 0 {
		return fmt.Errorf("%s: no deadline set (a bug: every client call needs one)", c.What)
	}
	retryable := c.Retryable
	if retryable == nil {
		retryable = Transient
	}
	start := time.Now()
	var err error
	for attempt := 1; ; attempt++ {
		end := time.Now().Add(c.Timeout)
		if !c.Deadline.IsZero() {
			if !time.Now().Before(c.Deadline) {
				return &DeadlineError{Call: c, Attempts: attempt - 1, Took: time.Since(start), Last: err}
			}
			if c.Deadline.Before(end) {
				end = c.Deadline
			}
		}
		actx, cancel := context.WithDeadline(ctx, end)
		err = fn(actx)
		cancel()
		c.Reach.Observe(err)
		if err == nil {
			return nil
		}
		if c.Reach.GiveUp(start, err) && ctx.Err() == nil {
			return &UnreachableError{Call: c, Last: err}
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
		pause := c.Backoff.Pause(err)
		if !c.Deadline.IsZero() && !time.Now().Add(pause).Before(c.Deadline) {
			// The next attempt would start at or past the deadline.
			return &DeadlineError{Call: c, Attempts: attempt, Took: time.Since(start), Last: err}
		}
		if c.OnRetry != nil {
			c.OnRetry(attempt, err)
		}
		if werr := Sleep(ctx, pause); werr != nil {
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

// identityFailures are what follows handshakeFailed when the handshake
// failed because of a certificate: our VerifyConnection's errors (tls.go)
// and the TLS alerts and x509 errors of a peer or chain we or it refuse.
// Anything else there (a connection reset or closed mid-handshake, a
// timeout: a peer restarting) is a transient network error.
var identityFailures = []string{"server certificate: ", "server is ", "server presented no certificate",
	"x509: ", "tls: bad certificate", "tls: unknown certificate", "tls: certificate required",
	"tls: failed to verify", "tls: unsupported certificate", "tls: certificate expired", "tls: certificate revoked"}

// handshakeIdentityError reports whether msg is a TLS handshake refused over
// a certificate.
func handshakeIdentityError(msg string) bool {
	i := strings.Index(msg, handshakeFailed)
	if i < 0 {
		return false
	}
	rest := msg[i+len(handshakeFailed):]
	for _, f := range identityFailures {
		if strings.Contains(rest, f) {
			return true
		}
	}
	return false
}

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
		return handshakeIdentityError(st.Message())
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
		return "; the address is another node's, or its certificate is not one this node trusts: check the address"
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
