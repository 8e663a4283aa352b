package csp

import (
	"context"
	"crypto/ecdh"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/fedpca/fedpca/transport"
)

// Config configures a member.
type Config struct {
	// ID is the member's ID (its certificate says csp/<ID>).
	ID string
	// Listener is where it serves (net.Listen in main, bufconn in tests).
	Listener net.Listener
	// Creds are its TLS credentials; nil only with Insecure.
	Creds    *transport.Credentials
	Insecure bool
	// Store is the state directory (secret key file and switch records).
	Store string
	// AllowNoNoise lets the member switch jobs without DP noise (tests and
	// simulations only).
	AllowNoNoise bool
	Logger       hclog.Logger
	// Metrics is the member's registry (default: a new one);
	// MetricsListener, if set, serves it over HTTP at /metrics.
	Metrics         *transport.Metrics
	MetricsListener net.Listener
	// Params is the HE parameter set (default: he.NewDefaultParams).
	Params *he.Params
	// Peers, when set, pins the committee this member takes part in by key:
	// it reveals its key share only when every commitment is signed by one
	// of these keys (its own among them), and none is missing. Unset, it
	// takes part with any members its trust store accepts as csp (the
	// owners' and users' pins still decide whether the key is used).
	Peers []job.MemberPin
}

// CSP is a committee member. Its methods are safe for concurrent use.
type CSP struct {
	fedpcav1.UnimplementedCspServiceServer
	cfg    Config
	log    hclog.Logger
	params he.Params
	db     *bolt.DB
	health *health.Server
	m      *metrics

	mu       sync.Mutex
	state    *secretFile // finalized key material; nil before the first ceremony
	member   *he.Member  // restored from state, or the ceremony's
	cer      *ceremony   // ceremony in progress
	switches uint64
	// switching serialises key switches per job; memberMu serialises the use
	// of the member's key material (lattigo objects are not concurrent-safe).
	switching jobLocks
	memberMu  sync.Mutex
	// keyMu guards the upload proofs' key under the committee key
	// (proofKey), made at the first switch.
	keyMu sync.Mutex
	zkKey *zk.Key
	zkPK  *rlwe.PublicKey // the committee key zkKey was made from
	zkFP  string
	// preparing is the background preparation of the next key-switch
	// shares (prepareSwitch); Run waits for it before it closes the store.
	preparing sync.WaitGroup
}

// ceremony is the in-memory state of a key ceremony in progress. A crash
// loses it and the proxy starts a new ceremony.
type ceremony struct {
	id        string
	seed      []byte // the public seed of the common reference string
	committee he.Committee
	members   []*fedpcav1.MemberRef
	member    *he.Member
	exchange  *ecdh.PrivateKey
	keys      map[he.Point][]byte // members' verified exchange keys
	certs     map[uint32][]byte   // members' certificates (DER), by point, from their exchange keys
	// memberKeys are the members' certificate key fingerprints by point,
	// bound when their signed commitments are verified (this member's own
	// its own key): every later message of the ceremony from a point must
	// be signed by the same key, and the attestation lists them. Empty
	// strings in insecure mode.
	memberKeys []string
	// share is this member's public-key share (encoded) and nonce opens its
	// commitment; commitments are every member's, by point, as verified
	// when the member revealed its share (nil before).
	share, nonce []byte
	commitments  [][]byte
	// Each round's request digest and response: a replayed round gets the
	// same answer (a second KeyGen or DealShares would mean a new secret or
	// new shares, breaking the committee key; a second reveal against other
	// commitments would let a member commit after seeing this share);
	// another request for a round already done is refused.
	keyGenReq, revealReq, dealReq, receiveReq [32]byte
	keyGenResp                                *fedpcav1.KeyGenResponse
	revealResp                                *fedpcav1.RevealKeyShareResponse
	dealResp                                  *fedpcav1.DealSharesResponse
	received                                  bool
}

// secretFile is the member's key material at rest (mode 0600). It is never
// logged or sent.
type secretFile struct {
	CeremonyID   string                `json:"ceremony_id"`
	HEParams     string                `json:"he_params"`
	Members      []*fedpcav1.MemberRef `json:"members"`
	Secret       he.SecretState        `json:"secret"`
	CommitteeKey []byte                `json:"committee_public_key"`
	Fingerprint  string                `json:"committee_key_fingerprint"`
	// MemberKeys are the members' key fingerprints by point, as this
	// member verified them in the ceremony and attested them: it knows the
	// other members by these keys when it computes with them.
	MemberKeys []string `json:"member_keys"`
	// Attestation is this member's signed statement about the key.
	Attestation *fedpcav1.KeyAttestation `json:"attestation"`
	FinalizedAt time.Time                `json:"finalized_at"`
}

const (
	secretFileName = "secret-key.json"
	dbFileName     = "csp.db"
)

var bucketSwitches = []byte("switches")

// New validates the configuration and opens the state; it starts nothing.
func New(cfg Config) (*CSP, error) {
	if cfg.Listener == nil {
		return nil, errors.New("csp: no listener")
	}
	if cfg.Creds == nil && !cfg.Insecure {
		return nil, errors.New("csp: no TLS credentials (use --insecure only for local tests)")
	}
	if cfg.Creds != nil {
		if cfg.Creds.Identity.Role != transport.RoleCSP {
			return nil, fmt.Errorf("csp: certificate is for %s, not a csp", cfg.Creds.Identity.Short())
		}
		if cfg.ID == "" {
			cfg.ID = cfg.Creds.Identity.ID
		}
		if cfg.Creds.Identity.ID != cfg.ID {
			return nil, fmt.Errorf("csp: configured as %q but the certificate says %s", cfg.ID, cfg.Creds.Identity.Short())
		}
	}
	if err := (transport.Identity{Role: transport.RoleCSP, ID: cfg.ID}).Validate(); err != nil {
		return nil, fmt.Errorf("csp: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = transport.NewMetrics()
	}
	if l := cfg.MetricsListener; l != nil {
		if err := transport.CheckOperatorListener(l, cfg.Creds); err != nil {
			return nil, fmt.Errorf("csp: metrics: %w", err)
		}
	}
	c := &CSP{cfg: cfg, log: cfg.Logger, health: health.NewServer()}
	c.registerMetrics(cfg.Metrics.Registry)
	var err error
	if c.params, err = he.ParamsOr(cfg.Params); err != nil {
		return nil, err
	}
	db, err := transport.OpenStore(cfg.Store, dbFileName)
	if err != nil {
		return nil, fmt.Errorf("csp: %w", err)
	}
	c.db = db
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSwitches)
		if err != nil {
			return err
		}
		return b.ForEachBucket(func([]byte) error { c.switches++; return nil })
	}); err != nil {
		db.Close()
		return nil, err
	}
	if err := c.loadSecrets(); err != nil {
		db.Close()
		return nil, err
	}
	if err := c.checkLog(); err != nil {
		db.Close()
		return nil, fmt.Errorf("csp: %w", err)
	}
	return c, nil
}

func (c *CSP) secretPath() string { return filepath.Join(c.cfg.Store, secretFileName) }

func (c *CSP) loadSecrets() error {
	b, err := os.ReadFile(c.secretPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("csp: %w", err)
	}
	if fi, err := os.Stat(c.secretPath()); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return fmt.Errorf("csp: %s is readable by group or others (mode %v); chmod 600 it", c.secretPath(), fi.Mode().Perm())
	}
	st, m, err := decodeSecrets(b, c.params)
	if err != nil {
		return fmt.Errorf("csp: %s: %w", secretFileName, err)
	}
	c.state, c.member = st, m
	return nil
}

// decodeSecrets decodes and checks the member's secret file: this node's
// parameter set, a member ready to switch, a valid committee key whose
// fingerprint the file records, the member listed at its point. Errors never
// quote the secrets.
func decodeSecrets(b []byte, p he.Params) (*secretFile, *he.Member, error) {
	var st secretFile
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, nil, err
	}
	if st.HEParams != p.ID() {
		return nil, nil, fmt.Errorf("for HE parameters %q, this node runs %s", st.HEParams, p.ID())
	}
	m, err := he.RestoreMember(p, st.Secret)
	if err != nil {
		return nil, nil, err
	}
	if !m.Ready() {
		return nil, nil, errors.New("threshold share missing")
	}
	if _, err := p.Codecs().PublicKey.Unmarshal(st.CommitteeKey); err != nil {
		return nil, nil, fmt.Errorf("committee key: %w", err)
	}
	if job.Fingerprint(st.CommitteeKey) != st.Fingerprint {
		return nil, nil, errors.New("the committee key's fingerprint is not the recorded one")
	}
	if len(st.Members) != st.Secret.N {
		return nil, nil, fmt.Errorf("%d members listed for a committee of %d", len(st.Members), st.Secret.N)
	}
	if a := st.Attestation; a == nil || a.GetPoint() != uint32(st.Secret.Point) {
		return nil, nil, errors.New("no attestation of the committee key (the file predates attested keys: move the state directory aside and let the proxy run a new ceremony)")
	}
	if len(st.MemberKeys) != st.Secret.N {
		return nil, nil, errors.New("the committee's member keys are not recorded (the file predates committees attested by key: owners and users no longer accept its attestation; " +
			"move the state directory aside and let the proxy run a new ceremony)")
	}
	return &st, m, nil
}

// Run serves until ctx is done, then stops gracefully.
func (c *CSP) Run(ctx context.Context) error {
	srv := grpc.NewServer(transport.ServerOptions(c.cfg.Creds, c.cfg.Insecure, c.log, c.cfg.Metrics)...)
	if l := c.cfg.MetricsListener; l != nil {
		go func() {
			if err := transport.ServeMetrics(ctx, l, c.cfg.Creds, c.cfg.Metrics, c.log.Named("metrics")); err != nil {
				c.log.Error("metrics server", "error", err)
			}
		}()
	}
	fedpcav1.RegisterCspServiceServer(srv, c)
	healthpb.RegisterHealthServer(srv, c.health)
	c.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(c.cfg.Listener) }()
	c.mu.Lock()
	ready, switches := c.state != nil, c.switches
	c.mu.Unlock()
	c.log.Info("csp serving", "addr", c.cfg.Listener.Addr().String(), "ready", ready, "switches", switches, "insecure", c.cfg.Insecure)
	select {
	case <-ctx.Done():
		c.health.Shutdown()
		transport.StopGracefully(srv, 10*time.Second)
		c.preparing.Wait()
		c.log.Info("csp stopped")
		return c.db.Close()
	case err := <-errc:
		c.preparing.Wait()
		c.db.Close()
		return fmt.Errorf("csp: serve: %w", err)
	}
}

// Domain errors, mapped to status codes in one table (statusOf).
var (
	ErrInvalid   = errors.New("invalid request")
	ErrForbidden = errors.New("not allowed")
	// ErrNoKey: the member has no committee key yet.
	ErrNoKey = errors.New("this member has no committee key yet (the key ceremony has not run)")
	// ErrCeremony: a ceremony round out of order or in conflict with one
	// already done.
	ErrCeremony = errors.New("key ceremony")
	// ErrSwitched: the job was switched already with another request.
	ErrSwitched = errors.New("a member switches a job at most once")
	// ErrOtherCommittee: the job names another committee key or shape.
	ErrOtherCommittee = errors.New("the job is for another committee")
)

var statusOf = transport.ErrorTable{
	{Err: ErrInvalid, Code: codes.InvalidArgument},
	{Err: ErrKeyMismatch, Code: codes.InvalidArgument},
	{Err: ErrForbidden, Code: codes.PermissionDenied},
	{Err: ErrNoKey, Code: codes.FailedPrecondition},
	{Err: ErrCeremony, Code: codes.FailedPrecondition},
	{Err: ErrSwitched, Code: codes.FailedPrecondition},
	{Err: ErrOtherCommittee, Code: codes.FailedPrecondition},
	{Err: dp.ErrPlanInfeasible, Code: codes.FailedPrecondition},
}

// status turns a handler's error into its gRPC status (statusOf); internal
// errors are logged here and reach the caller without their text.
func (c *CSP) status(err error) error { return statusOf.Status(c.log, err) }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

func forbidden(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrForbidden, fmt.Sprintf(format, args...))
}

// Close releases the state without serving (for tests that never Run).
func (c *CSP) Close() error { return c.db.Close() }
