package transport

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// Authorization is the table of which roles may call which RPC, by full
// method name. Methods not in the table are denied to everyone.
var Authorization = map[string][]string{
	// Owners and users talk to the proxy.
	fedpcav1.ProxyService_GetCommittee_FullMethodName:     {RoleOwner, RoleUser},
	fedpcav1.ProxyService_CreateJob_FullMethodName:        {RoleUser},
	fedpcav1.ProxyService_GetJob_FullMethodName:           {RoleOwner, RoleUser},
	fedpcav1.ProxyService_ListJobs_FullMethodName:         {RoleOwner, RoleUser},
	fedpcav1.ProxyService_WatchJob_FullMethodName:         {RoleOwner, RoleUser},
	fedpcav1.ProxyService_WatchOwnerJobs_FullMethodName:   {RoleOwner},
	fedpcav1.ProxyService_Upload_FullMethodName:           {RoleOwner},
	fedpcav1.ProxyService_Decline_FullMethodName:          {RoleOwner},
	fedpcav1.ProxyService_ReportBudget_FullMethodName:     {RoleOwner},
	fedpcav1.ProxyService_FetchResult_FullMethodName:      {RoleUser},
	fedpcav1.ProxyService_PublishResult_FullMethodName:    {RoleUser},
	fedpcav1.ProxyService_GetPublished_FullMethodName:     {RoleOwner, RoleUser},
	fedpcav1.ProxyService_CancelJob_FullMethodName:        {RoleUser},
	fedpcav1.ProxyService_CreateRound_FullMethodName:      {RoleUser},
	fedpcav1.ProxyService_FetchRoundMatrix_FullMethodName: {RoleOwner, RoleUser},
	// Only the proxy talks to CSP members.
	fedpcav1.CspService_GetStatus_FullMethodName:      {RoleProxy},
	fedpcav1.CspService_KeyGen_FullMethodName:         {RoleProxy},
	fedpcav1.CspService_RevealKeyShare_FullMethodName: {RoleProxy},
	fedpcav1.CspService_DealShares_FullMethodName:     {RoleProxy},
	fedpcav1.CspService_ReceiveShares_FullMethodName:  {RoleProxy},
	fedpcav1.CspService_Finalize_FullMethodName:       {RoleProxy},
	fedpcav1.CspService_KeySwitch_FullMethodName:      {RoleProxy},
	fedpcav1.CspService_Solve_FullMethodName:          {RoleProxy},
	// Every node of the deployment may ask any node for its health.
	healthpb.Health_Check_FullMethodName: Roles,
	healthpb.Health_Watch_FullMethodName: Roles,
	healthpb.Health_List_FullMethodName:  Roles,
	// The operator pages served over HTTPS (ServeOperator: the status page
	// and /status.json, /metrics, /debug/pprof): they show when each
	// owner's upload came, which grows with its rows, and the daemons'
	// internals. On a loopback address they are plain HTTP for the host's
	// users.
	OperatorPages: {RoleOperator},
}

// OperatorPages is the Authorization entry of the operator pages.
const OperatorPages = "https:operator-pages"

// Allowed reports whether a role may call a method.
func Allowed(method, role string) bool {
	return slices.Contains(Authorization[method], role)
}

// InsecureIdentityHeader carries the caller's claimed identity in insecure
// (plaintext) mode, where there is no certificate to read it from.
const InsecureIdentityHeader = "x-fedpca-insecure-identity"

// callerOf returns the authenticated caller: from its TLS certificate,
// verified in the handshake (Credentials.ServerTLS: its domain's CAs, its
// role accepted from the domain, the roster's key), or, only when insecure
// is set, from the header (and no key).
func callerOf(ctx context.Context, insecure bool) (Peer, error) {
	if insecure {
		md, _ := metadata.FromIncomingContext(ctx)
		v := md.Get(InsecureIdentityHeader)
		if len(v) != 1 {
			return Peer{}, fmt.Errorf("insecure mode: missing %s header", InsecureIdentityHeader)
		}
		id, err := ParseIdentity(v[0])
		return Peer{Identity: id}, err
	}
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Peer{}, ErrNoIdentity
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return Peer{}, fmt.Errorf("no verified client certificate")
	}
	leaf := ti.State.VerifiedChains[0][0]
	id, err := IdentityOf(leaf)
	return Peer{Identity: id, Key: KeyFingerprint(leaf)}, err
}

func authorize(ctx context.Context, method string, insecure bool) (context.Context, error) {
	p, err := callerOf(ctx, insecure)
	if err != nil {
		return ctx, status.Error(codes.Unauthenticated, err.Error())
	}
	if !Allowed(method, p.Role) {
		return ctx, status.Errorf(codes.PermissionDenied, "%s may not call %s", p.Short(), method)
	}
	return WithPeer(ctx, p), nil
}

// serverKeepalive pings a connection after 30 s without activity and
// closes it if the ping is not answered within 10 s.
var serverKeepalive = keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}

// watchKeepalive is the client's side, for clients holding a long watch
// (owners): a proxy that vanished is noticed within about 40 s even while
// nothing is sent on the watch. Servers accept pings that often
// (watchEnforcement; gRPC's default refuses pings closer than 5 minutes).
var (
	watchKeepalive   = keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}
	watchEnforcement = keepalive.EnforcementPolicy{MinTime: 20 * time.Second}
)

// WatchKeepalive is the dial option of a client that holds long watches.
func WatchKeepalive() grpc.DialOption { return grpc.WithKeepaliveParams(watchKeepalive) }

// ServerOptions returns the interceptors every fedpca server uses, outermost
// first: recovery (a panic becomes Internal and is logged), authorization
// (the caller's identity goes into the context), logging (method, caller,
// code, latency; never payloads) and metrics (when m is not nil). creds may
// be nil only with insecure set.
func ServerOptions(creds *Credentials, insecure bool, log hclog.Logger, m *Metrics) []grpc.ServerOption {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(MaxMessageBytes),
		grpc.MaxSendMsgSize(MaxMessageBytes),
		// Fixed flow-control windows (no BDP growth) and no read buffer of
		// gRPC's own over TLS (readBufferSize: an 8 KB bufio.Reader per
		// connection was the largest single item of an idle owner's
		// connection, docs/SCALING.md). Write buffers are taken from a
		// pool while a connection writes and given back after each flush
		// (gRPC's default), so an idle connection holds none.
		grpc.InitialWindowSize(1 << 20),
		grpc.InitialConnWindowSize(1 << 20),
		grpc.ReadBufferSize(readBufferSize(insecure)),
		grpc.WriteBufferSize(8 << 10),
		sharingCodecOption(),
		// A peer that vanishes without closing its connection (a host
		// down, a cable cut) is noticed within about 40 s: its streams
		// end, and an upload it was sending gives its room back.
		grpc.KeepaliveParams(serverKeepalive),
		grpc.KeepaliveEnforcementPolicy(watchEnforcement),
		grpc.ChainUnaryInterceptor(
			func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
				defer recoverTo(log, info.FullMethod, &err)
				start := time.Now()
				ctx, err = authorize(ctx, info.FullMethod, insecure)
				if err == nil {
					resp, err = h(ctx, req)
					err = contextStatus(err)
				}
				logCall(ctx, log, info.FullMethod, start, err)
				m.observeRPC(info.FullMethod, err, time.Since(start))
				return resp, err
			}),
		grpc.ChainStreamInterceptor(
			func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
				defer recoverTo(log, info.FullMethod, &err)
				start := time.Now()
				ctx, err := authorize(ss.Context(), info.FullMethod, insecure)
				if err == nil {
					err = contextStatus(h(srv, &wrappedStream{ServerStream: ss, ctx: ctx}))
				}
				logCall(ctx, log, info.FullMethod, start, err)
				m.observeRPC(info.FullMethod, err, time.Since(start))
				return err
			}),
	}
	if !insecure {
		opts = append(opts, grpc.Creds(credentials.NewTLS(creds.ServerTLS())))
	}
	if m != nil {
		opts = append(opts, grpc.StatsHandler(m.ServerStats()))
	}
	return opts
}

// readBufferSize is gRPC's read buffer of a connection: none over TLS,
// whose connection buffers a record itself; in plaintext (tests) 8 KB,
// which gRPC takes from a pool only while a TCP connection has data to
// read.
func readBufferSize(insecure bool) int {
	if insecure {
		return 8 << 10
	}
	return 0
}

// MaxMessageBytes bounds one gRPC message: a ciphertext is about 524 KB, a
// proof at most 590 KB (of a group of 8 ciphertexts; of one, 451 KB), an
// upload part to a member at most 1.1 MB (c1, a group's proof and, in an
// exact components job, c0), and a key-switch header
// carries a user key (524 KB) and the spec.
const MaxMessageBytes = 16 << 20

type wrappedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (w *wrappedStream) Context() context.Context { return w.ctx }

func recoverTo(log hclog.Logger, method string, err *error) {
	if r := recover(); r != nil {
		log.Error("panic in handler", "method", method, "panic", fmt.Sprint(r))
		*err = status.Errorf(codes.Internal, "internal error in %s", method)
	}
}

func logCall(ctx context.Context, log hclog.Logger, method string, start time.Time, err error) {
	caller := "unauthenticated"
	if id, e := CallerIdentity(ctx); e == nil {
		caller = id.Short()
	}
	code := status.Code(err)
	args := []any{"method", shortMethod(method), "caller", caller, "code", code.String(), "ms", time.Since(start).Milliseconds()}
	switch {
	case code == codes.OK || code == codes.ResourceExhausted || code == codes.Canceled:
		// Busy answers are part of normal load shedding; a caller that
		// goes away (a watch renewed) is normal too.
		log.Debug("rpc", append(args, "error", status.Convert(err).Message())...)
	case code == codes.Internal || code == codes.Unknown || code == codes.DataLoss:
		log.Error("rpc", append(args, "error", err)...)
	default:
		log.Info("rpc", append(args, "error", status.Convert(err).Message())...)
	}
}

// contextStatus gives a handler's bare context error (the caller went away,
// or its deadline passed) its gRPC code rather than Unknown.
func contextStatus(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if st := status.FromContextError(err); st.Code() != codes.Unknown {
		return st.Err()
	}
	return err
}

func shortMethod(m string) string {
	if i := strings.LastIndex(m, "."); i >= 0 {
		return m[i+1:]
	}
	return m
}
