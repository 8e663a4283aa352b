package transport

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Dialer opens client connections with a node's credentials. It is a plain
// value, safe for concurrent use.
type Dialer struct {
	// Creds are the node's credentials; nil only in insecure mode.
	Creds *Credentials
	// Insecure selects plaintext connections (local tests only); Self is then
	// the identity the node claims in every request.
	Insecure bool
	Self     Identity
	// Options are extra dial options (the simulator's in-memory dialer).
	Options []grpc.DialOption
	// Metrics, when set, count the payload bytes of the connections.
	Metrics *Metrics
	// ReconnectMaxDelay caps the pause between reconnect attempts
	// (default DefaultReconnectMaxDelay). A user, one client that waits on
	// its job, sets it lower (user.ReconnectMaxDelay) to be back within a
	// second of an outage's end; owners keep the default, so that
	// thousands of them do not come back to a restarted proxy at once.
	ReconnectMaxDelay time.Duration
}

// DefaultReconnectMaxDelay is the longest pause between reconnect attempts
// unless a Dialer sets its own.
const DefaultReconnectMaxDelay = 10 * time.Second

// Dial returns a connection to target whose server must have the expected
// identity (role, and ID when set). Connections are lazy: errors show up on
// the first call.
func (d Dialer) Dial(target string, server Identity) (*grpc.ClientConn, error) {
	maxDelay := d.ReconnectMaxDelay
	if maxDelay <= 0 {
		maxDelay = DefaultReconnectMaxDelay
	}
	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(
		grpc.MaxCallRecvMsgSize(MaxMessageBytes), grpc.MaxCallSendMsgSize(MaxMessageBytes)),
		// Reconnect attempts back off from 250 ms (x1.6, 20% jitter) to at
		// most ReconnectMaxDelay (10 s), not gRPC's 1 s to 2 min: a
		// restarted proxy or member has its clients back within a fraction
		// of a second (a refused connection costs little), and after a
		// long outage within 12 s (docs/RELIABILITY.md, "Recovery").
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: min(250*time.Millisecond, maxDelay), Multiplier: 1.6, Jitter: 0.2, MaxDelay: maxDelay},
			MinConnectTimeout: 20 * time.Second})}
	if d.Insecure {
		if err := d.Self.Validate(); err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(claimedIdentity{d.Self}))
	} else {
		if d.Creds == nil {
			return nil, errors.New("dial: no credentials (and not in insecure mode)")
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(d.Creds.ClientTLS(server))),
			// No read buffer of gRPC's own (32 KB per connection by
			// default): the TLS connection buffers a record itself. An
			// owner farm holds thousands of connections.
			grpc.WithReadBufferSize(readBufferSize(false)))
	}
	if d.Metrics != nil {
		opts = append(opts, grpc.WithStatsHandler(d.Metrics.ClientStats(server.Role)))
	}
	return grpc.NewClient(target, append(opts, d.Options...)...)
}

// Identity returns the node's own identity.
func (d Dialer) Identity() Identity {
	if d.Insecure || d.Creds == nil {
		return d.Self
	}
	return d.Creds.Identity
}

// claimedIdentity sends the insecure-mode identity header.
type claimedIdentity struct{ id Identity }

func (c claimedIdentity) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{InsecureIdentityHeader: c.id.Short()}, nil
}

func (claimedIdentity) RequireTransportSecurity() bool { return false }
