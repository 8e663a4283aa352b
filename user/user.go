package user

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"gonum.org/v1/gonum/mat"
)

// Key files in a user's key directory.
const (
	SecretKeyFile = "he-secret.key"
	PublicKeyFile = "he-public.key"
	// ResultKeyFile is the user's X25519 result key (32 bytes, 0600): the
	// committee members seal their shares of a components job's output to
	// its public key (job.Spec.ResultKey).
	ResultKeyFile = "result.key"
)

// GenerateKeys writes a fresh HE key pair and a result key into dir (the
// secret keys 0600). It refuses to overwrite an existing secret key.
func GenerateKeys(dir string, p he.Params) (he.KeyPair, error) {
	if _, err := os.Stat(filepath.Join(dir, SecretKeyFile)); err == nil {
		return he.KeyPair{}, fmt.Errorf("%s already holds a key pair; remove it first to make a new one", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return he.KeyPair{}, err
	}
	kp := he.GenerateKeyPair(p)
	if err := transport.WriteFileAtomic(filepath.Join(dir, SecretKeyFile), p.Codecs().SecretKey.Marshal(kp.Secret)); err != nil {
		return he.KeyPair{}, err
	}
	if err := transport.WriteFileAtomic(filepath.Join(dir, PublicKeyFile), p.Codecs().PublicKey.Marshal(kp.Public)); err != nil {
		return he.KeyPair{}, err
	}
	if _, err := LoadResultKey(dir); err != nil {
		return he.KeyPair{}, err
	}
	return kp, nil
}

// LoadResultKey reads the result key of a key directory, making it on first
// use when the directory holds an HE key pair and no result key (one made
// before components jobs existed). A directory without HE keys gives
// ErrNoKeys. The key is never logged.
func LoadResultKey(dir string) (*ecdh.PrivateKey, error) {
	path := filepath.Join(dir, ResultKeyFile)
	b, err := readSecret(path)
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Join(dir, SecretKeyFile)); err != nil {
			return nil, noKeys(err)
		}
		if err := newResultKey(path); err != nil {
			return nil, fmt.Errorf("make the result key %s: %w", path, err)
		}
		b, err = readSecret(path)
	}
	if err != nil {
		return nil, err
	}
	k, err := ecdh.X25519().NewPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: not an X25519 private key (%d bytes, want 32): remove it to make a new one (the results of components jobs sealed to it are then lost)", path, len(b))
	}
	return k, nil
}

// readSecret reads a secret key file, refusing one that group or others
// can read.
func readSecret(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s is readable by group or others (mode %v); chmod 600 it", path, fi.Mode().Perm())
	}
	return os.ReadFile(path)
}

// newResultKey writes a fresh X25519 key to path (0600) unless a key is
// already there: written to a temporary file, then linked, so that two
// processes making it at once keep the same one.
func newResultKey(path string) error {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%x.tmp", path, k.PublicKey().Bytes()[:8])
	if err := transport.WriteFileAtomic(tmp, k.Bytes()); err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

// noKeys wraps a key file that cannot be read: a missing one is ErrNoKeys.
func noKeys(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrNoKeys, err)
	}
	return fmt.Errorf("HE keys: %w", err)
}

// LoadKeys reads a key pair written by GenerateKeys; a key directory without
// them gives ErrNoKeys.
func LoadKeys(dir string, p he.Params) (he.KeyPair, error) {
	skPath := filepath.Join(dir, SecretKeyFile)
	if fi, err := os.Stat(skPath); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return he.KeyPair{}, fmt.Errorf("%s is readable by group or others (mode %v); chmod 600 it", skPath, fi.Mode().Perm())
	}
	skb, err := os.ReadFile(skPath)
	if err != nil {
		return he.KeyPair{}, noKeys(err)
	}
	sk, err := p.Codecs().SecretKey.Unmarshal(skb)
	if err != nil {
		return he.KeyPair{}, fmt.Errorf("%s: %w", skPath, err)
	}
	pkb, err := os.ReadFile(filepath.Join(dir, PublicKeyFile))
	if err != nil {
		return he.KeyPair{}, noKeys(err)
	}
	pk, err := p.Codecs().PublicKey.Unmarshal(pkb)
	if err != nil {
		return he.KeyPair{}, fmt.Errorf("%s: %w", PublicKeyFile, err)
	}
	return he.KeyPair{Secret: sk, Public: pk}, nil
}

// Request describes a job to run.
type Request struct {
	Schema   *schema.Schema
	Analysis string
	K        int
	Epsilon  float64
	Delta    float64
	NoNoise  bool
	Plan     string
	Tolerate int
	Split    dp.Split
	// Owners names the job's owners: each by an ID the node's trust store
	// (its roster) knows the key of, ID=FINGERPRINT, or a SPIFFE ID. The
	// spec names each by its key: the user's own, never the proxy's word.
	Owners    []string
	MinOwners int
	Deadline  time.Time
	// MaxOwnerRows is the public per-owner row cap (rows beyond it are
	// dropped by each owner); 0 takes the largest the plaintext range
	// allows for this job (Spec.LargestOwnerRows).
	MaxOwnerRows int64
	Nonce        string
	// NormEdges are the buckets of a norms job, Buckets and Windows the
	// grids of a marginals job (the profile's rounds).
	NormEdges []fixedpoint.Decimal
	Buckets   int
	Windows   []job.Window
	ClampBox  bool
	// Standardize asks for the PCA of the release's correlation matrix.
	Standardize bool
	// Power makes the job a power-method job's parent (docs/PROTOCOL.md
	// section 13; RunPower runs it): its QBits is chosen when 0
	// (power.ChooseQBits, for the row cap), and Start names the hash of
	// the quantised PowerStart when one is given.
	Power      *job.PowerSpec
	PowerStart *mat.Dense
	// Release is what the user learns: the statistics ("", the default) or
	// only the top K components, their eigenvalues and n
	// (job.ReleaseComponents, sealed to the client's ResultKey).
	Release string
	// Randomness is a components job's source of randomness
	// (job.RandomnessMembers or job.RandomnessDealer; empty: the members'
	// own where the committee allows it, job.DefaultRandomness).
	Randomness string
}

// Config configures a client.
type Config struct {
	Dialer    transport.Dialer
	ProxyAddr string
	Keys      he.KeyPair
	// ResultKey opens a components job's output (LoadResultKey); creating
	// and fetching components jobs need it.
	ResultKey *ecdh.PrivateKey
	// Committee is the committee policy: jobs are created only under a key
	// every member attested, of a committee of the pinned members (or, with
	// AnyMembers, of any of the deployment's CSPs: local tests), at least
	// the policy's size and threshold. Spec refuses a policy that pins
	// nothing without saying AnyMembers; the calls that create no job
	// (listing, status, fetching, cancelling) need none.
	Committee job.CommitteePolicy
	Logger    hclog.Logger
	Params    *he.Params
}

// Every call to the proxy has a deadline, and the idempotent ones (all of
// them: a job is named by its signed spec, so creating it again returns the
// same job) are retried with backoff and jitter while the proxy is
// unreachable, restarting or busy (transport.Retry): until the deadline of
// the job the call serves (creating it), or callAttempts times. A proxy
// that never answered and cannot be connected to fails a call within
// transport.NeverReachedGrace (a wrong address or port), in one line.
//
// Recovery: the first attempt after an outage of the proxy (or of the
// network to it) starts within 1 s of the outage's end, however long it
// lasted: the connection is retried at least every 480 ms
// (ReconnectMaxDelay, plus gRPC's 20% jitter) and a failed call at least
// every 500 ms (callBackoff). docs/RELIABILITY.md, "Recovery after an
// outage".
const (
	callTimeout  = 30 * time.Second
	fetchTimeout = 5 * time.Minute // a result of many ciphertexts
	// watchTimeout renews a watch: a stream cut off silently (a lost
	// connection) is noticed within it.
	watchTimeout = time.Minute
	// callAttempts bounds the retries of a call that serves no deadline:
	// about 15 s of an unreachable proxy at callBackoff's pauses.
	callAttempts = 60
	// ReconnectMaxDelay caps the user's pause between reconnect attempts
	// (transport.Dialer; NewClient sets it unless the Dialer has its own).
	ReconnectMaxDelay = 400 * time.Millisecond
)

// callBackoff is the pause after a failed call (full jitter, at most
// 500 ms): one user retrying twice a second costs the proxy nothing.
var callBackoff = transport.Backoff{Initial: 100 * time.Millisecond, Max: 500 * time.Millisecond}

// Client talks to the proxy for a user. Safe for concurrent use.
type Client struct {
	cfg    Config
	log    hclog.Logger
	params he.Params
	// reach: whether the proxy ever answered; until it has, a proxy that
	// cannot be connected to fails a call within seconds (transport.Reach).
	reach *transport.Reach
	conn  *grpc.ClientConn
	proxy fedpcav1.ProxyServiceClient

	mu  sync.Mutex
	cmt *fedpcav1.GetCommitteeResponse // cached; refreshed when a job is refused for it
	// owners are the owner lists of the specs this client built, by their
	// Merkle root (the spec commits to its list; Submit sends the list).
	owners map[string][]job.Owner
}

// NewClient dials the proxy (lazily: errors show on the first call). The HE
// key pair may be left out for the calls that need none (listing, status,
// cancelling); creating a job and fetching a result need it.
func NewClient(cfg Config) (*Client, error) {
	if id := cfg.Dialer.Identity(); id.Role != transport.RoleUser {
		return nil, fmt.Errorf("user: identity %s is not a user", id.Short())
	}
	if (cfg.Keys.Secret == nil) != (cfg.Keys.Public == nil) {
		return nil, errors.New("user: half an HE key pair")
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Dialer.ReconnectMaxDelay == 0 {
		cfg.Dialer.ReconnectMaxDelay = ReconnectMaxDelay
	}
	c := &Client{cfg: cfg, log: cfg.Logger, reach: &transport.Reach{Addr: cfg.ProxyAddr}}
	var err error
	if c.params, err = he.ParamsOr(cfg.Params); err != nil {
		return nil, err
	}
	conn, err := cfg.Dialer.Dial(cfg.ProxyAddr, transport.Identity{Role: transport.RoleProxy})
	if err != nil {
		return nil, err
	}
	c.conn, c.proxy = conn, fedpcav1.NewProxyServiceClient(conn)
	return c, nil
}

// ErrNoKeys: the client has no HE key pair, or its key directory holds
// none (LoadKeys wraps it with the file it missed).
var ErrNoKeys = errors.New("user: no HE key pair (run fedpca user keygen, and give its directory with --keys)")

// ErrNoResultKey: a components job needs the client's result key
// (LoadResultKey).
var ErrNoResultKey = errors.New("user: no result key for a components job (give the key directory with --keys: its result.key is made on first use)")

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Proxy returns the raw proxy client.
func (c *Client) Proxy() fedpcav1.ProxyServiceClient { return c.proxy }

// call runs an idempotent call to the proxy with a deadline per attempt and
// at most callAttempts attempts.
func (c *Client) call(ctx context.Context, what string, timeout time.Duration, fn func(context.Context) error) error {
	return c.retry(ctx, transport.Call{What: what, Timeout: timeout, Attempts: callAttempts}, fn)
}

// callBefore runs an idempotent call that serves work with a deadline (a
// job's creation): its attempts stop before the deadline, and when it can
// no longer be met the error says so (transport.DeadlineError).
func (c *Client) callBefore(ctx context.Context, what string, deadline time.Time, serves string, fn func(context.Context) error) error {
	return c.retry(ctx, transport.Call{What: what, Timeout: callTimeout, Deadline: deadline, Serves: serves}, fn)
}

func (c *Client) retry(ctx context.Context, call transport.Call, fn func(context.Context) error) error {
	call.Peer, call.Backoff, call.Reach = "the proxy", callBackoff, c.reach
	call.OnRetry = func(attempt int, err error) {
		if msg := transport.Message(err); !c.reach.Answered() {
			// Not reached yet: it fails within seconds, in one line.
			c.log.Debug("proxy not reachable yet; retrying", "call", call.What, "attempt", attempt, "error", msg)
		} else if strings.Contains(msg, "ceremony has not finished") {
			// A deployment just started: expected, not a failure.
			c.log.Info("waiting for the committee's key ceremony to finish", "attempt", attempt)
		} else {
			c.log.Warn("proxy call failed; retrying", "call", call.What, "attempt", attempt, "error", msg)
		}
	}
	return transport.Retry(ctx, call, fn)
}

// Spec builds the job spec for a request against the committee the proxy
// publishes.
func (c *Client) Spec(ctx context.Context, r Request) (*job.Spec, error) {
	if c.cfg.Keys.Public == nil {
		return nil, ErrNoKeys
	}
	if err := c.cfg.Committee.Validate(); err != nil {
		return nil, fmt.Errorf("user: %w", err)
	}
	c.mu.Lock()
	cmt := c.cmt
	c.mu.Unlock()
	if cmt == nil {
		get := func(ctx context.Context) (err error) {
			cmt, err = c.proxy.GetCommittee(ctx, &fedpcav1.GetCommitteeRequest{})
			return err
		}
		what := "get the committee from the proxy"
		var err error
		if r.Deadline.IsZero() {
			err = c.call(ctx, what, callTimeout, get)
		} else {
			err = c.callBefore(ctx, what, r.Deadline, "the job", get)
		}
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.cmt = cmt
		c.mu.Unlock()
	}
	if cmt.GetHeParams() != c.params.ID() || cmt.GetHeParamsHash() != c.params.Fingerprint() {
		return nil, fmt.Errorf("the proxy runs HE parameters %s, this client %s", cmt.GetHeParams(), c.params.ID())
	}
	// Owners upload only under a key every member attested; so does the
	// user ask for a job only under one (a substituted key would be refused
	// by every owner, or worse, let the proxy read the uploads).
	if _, err := transport.VerifyCommittee(c.cfg.Dialer.Creds, cmt, c.cfg.Committee); err != nil {
		c.mu.Lock()
		c.cmt = nil
		c.mu.Unlock()
		return nil, fmt.Errorf("the proxy's committee key: %w", err)
	}
	owners, err := c.ResolveOwners(r.Owners)
	if err != nil {
		return nil, err
	}
	nonce := r.Nonce
	if nonce == "" {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		nonce = hex.EncodeToString(b[:])
	}
	delta := r.Delta
	if delta == 0 && !r.NoNoise {
		delta = job.DefaultDelta
	}
	split := r.Split
	if split == (dp.Split{}) && !r.NoNoise {
		split = dp.DefaultSplitFor(r.Analysis)
	}
	plan := r.Plan
	if plan == "" {
		plan = dp.PlanServers
	}
	minOwners := r.MinOwners
	if minOwners == 0 {
		minOwners = len(owners)
	}
	s := &job.Spec{
		Version: job.Version, Dataset: r.Schema.ID, SchemaHash: r.Schema.HashHex(), Analysis: r.Analysis, K: r.K, NormEdges: r.NormEdges, Buckets: r.Buckets, Windows: r.Windows, ClampBox: r.ClampBox, Standardize: r.Standardize,
		Epsilon: r.Epsilon, Delta: delta, NoNoise: r.NoNoise, NoisePlan: plan, Tolerate: r.Tolerate, Split: split,
		MinOwners: minOwners, Deadline: r.Deadline.UTC().Truncate(time.Second),
		HEParams: c.params.ID(), HEParamsHash: c.params.Fingerprint(), CommitteeN: int(cmt.GetMembers()), CommitteeThreshold: int(cmt.GetThreshold()),
		CommitteeKey: cmt.GetPublicKeyFingerprint(), User: c.cfg.Dialer.Identity().String(),
		UserKey: job.Fingerprint(c.params.Codecs().PublicKey.Marshal(c.cfg.Keys.Public)), Nonce: nonce,
		Release: r.Release,
	}
	if r.Release == job.ReleaseComponents {
		if c.cfg.ResultKey == nil {
			return nil, ErrNoResultKey
		}
		s.ResultKey = hex.EncodeToString(c.cfg.ResultKey.PublicKey().Bytes())
		s.Randomness = r.Randomness
		if s.Randomness == "" {
			s.Randomness = job.DefaultRandomness(s.CommitteeN, s.CommitteeThreshold)
		}
	}
	if r.NoNoise {
		s.Epsilon = 0
	}
	if err := s.SetOwners(owners); err != nil {
		return nil, err
	}
	perOwner := r.MaxOwnerRows
	if perOwner == 0 && len(owners) > 0 && r.Power == nil {
		var err error
		if perOwner, err = s.LargestOwnerRows(r.Schema, c.params); err != nil {
			return nil, err
		}
		if perOwner < 1 {
			return nil, fmt.Errorf("job spec: the noise leaves no room for even one row per owner in the range the sums must fit (the plaintext range; half of it for a components job); lower quant_bits or raise epsilon")
		}
	}
	if r.Power != nil {
		ps := *r.Power
		s.Power = &ps
		if err := c.powerRows(s, r.Schema, perOwner, r.PowerStart); err != nil {
			return nil, err
		}
	} else if err := s.SetOwnerRows(perOwner); err != nil {
		return nil, err
	}
	if err := s.Check(r.Schema, c.params); err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.owners == nil {
		c.owners = map[string][]job.Owner{}
	}
	c.owners[s.OwnersRoot] = owners
	c.mu.Unlock()
	return s, nil
}

// Submit signs a spec and registers the job, with the owner list the spec
// commits to (that of a spec this client built with Spec). It retries
// until the job's deadline and no longer: then the job could take no
// upload, and the error says the deadline passed (transport.DeadlineError).
func (c *Client) Submit(ctx context.Context, s *job.Spec, sch *schema.Schema) (*fedpcav1.JobStatus, error) {
	req, err := c.CreateRequest(s, sch)
	if err != nil {
		return nil, err
	}
	var resp *fedpcav1.CreateJobResponse
	// Retried until the job's own deadline, not past it: a job created
	// after its deadline could take no upload (docs/PROTOCOL.md, 3).
	err = c.callBefore(ctx, "create job "+short(s.ID())+" on the proxy", s.Deadline, "job "+short(s.ID()), func(ctx context.Context) (err error) {
		resp, err = c.proxy.CreateJob(ctx, req)
		return err
	})
	if err != nil {
		c.mu.Lock()
		c.cmt = nil // the committee may have changed: ask again next time
		c.mu.Unlock()
		return nil, err
	}
	return resp.GetJob(), nil
}

// CreateRequest is the signed request that creates a job (Submit sends
// it), with the owner list the spec commits to (that of a spec this client
// built with Spec).
func (c *Client) CreateRequest(s *job.Spec, sch *schema.Schema) (*fedpcav1.CreateJobRequest, error) {
	c.mu.Lock()
	owners, ok := c.owners[s.OwnersRoot]
	c.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("submit job %s: this client did not build the spec, so it does not know the owner list it commits to", short(s.ID()))
	}
	var sig []byte
	if c.cfg.Dialer.Creds != nil {
		var err error
		if sig, err = s.Sign(c.cfg.Dialer.Creds.Signer()); err != nil {
			return nil, err
		}
	}
	return &fedpcav1.CreateJobRequest{Spec: s.Canonical(), Signature: sig,
		UserPublicKey: c.params.Codecs().PublicKey.Marshal(c.cfg.Keys.Public), Schema: sch.Canonical(), OwnerRefs: transport.OwnerRefs(owners)}, nil
}

// ResolveOwners names owners by key, from the client's trust store (its
// roster) or the keys given as ID=FINGERPRINT, sorted by ID. In insecure
// mode (no credentials) owners are named by ID only.
func (c *Client) ResolveOwners(names []string) ([]job.Owner, error) {
	var out []job.Owner
	for _, n := range names {
		creds := c.cfg.Dialer.Creds
		if creds == nil {
			out = append(out, job.Owner{ID: n})
			continue
		}
		p, err := creds.Trust.Resolve(transport.RoleOwner, n)
		if err != nil {
			return nil, fmt.Errorf("owner %s: %w", n, err)
		}
		if p.ID == "" {
			return nil, fmt.Errorf("owner %s: the trust store lists no owner of that key: name it as ID=FINGERPRINT", n)
		}
		out = append(out, job.Owner{ID: p.ID, Key: p.Key})
	}
	job.SortOwners(out)
	return out, nil
}

// Wait follows a job until it ends, calling progress at every change. Each
// watch lasts at most watchTimeout and is then renewed; while the proxy is
// unreachable or restarting, Wait reconnects with callBackoff until ctx
// ends (a job ends after its upload deadline, by the committee's key
// switch: the caller's ctx, not the job's deadline, bounds the wait).
func (c *Client) Wait(ctx context.Context, id string, progress func(*fedpcav1.JobStatus)) (*fedpcav1.JobStatus, error) {
	b := callBackoff
	start := time.Now()
	for {
		last, err := c.watch(ctx, id, progress)
		if last != nil {
			c.reach.Observe(nil)
		}
		if c.reach.GiveUp(start, err) {
			return nil, &transport.UnreachableError{Call: transport.Call{What: "watch job " + short(id), Peer: "the proxy", Reach: c.reach}, Last: err}
		}
		if last != nil && ended(last.GetState()) {
			// The full status (owner lists, who declined and why).
			var full *fedpcav1.GetJobResponse
			if err := c.call(ctx, "get job "+short(id), callTimeout, func(ctx context.Context) (err error) {
				full, err = c.proxy.GetJob(ctx, &fedpcav1.GetJobRequest{JobId: id})
				return err
			}); err != nil {
				return last, nil
			}
			return full.GetJob().GetStatus(), nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("watch job %s: %w", short(id), ctx.Err())
		}
		if last != nil {
			b.Reset() // the watch worked: renewed, or the proxy restarted
		}
		if err != nil && !transport.Transient(err) {
			return nil, fmt.Errorf("watch job %s: %w%s", short(id), err, transport.Advice(err))
		}
		if err != nil {
			c.log.Debug("watch interrupted; reconnecting", "job", short(id), "error", err)
		}
		if err := b.Wait(ctx); err != nil {
			return nil, fmt.Errorf("watch job %s: %w", short(id), err)
		}
	}
}

// watch runs one WatchJob stream (at most watchTimeout) and returns the
// last status it saw; err is nil when the watch merely ran out its time.
func (c *Client) watch(ctx context.Context, id string, progress func(*fedpcav1.JobStatus)) (*fedpcav1.JobStatus, error) {
	wctx, cancel := context.WithTimeout(ctx, watchTimeout)
	defer cancel()
	stream, err := c.proxy.WatchJob(wctx, &fedpcav1.WatchJobRequest{JobId: id})
	var last *fedpcav1.JobStatus
	for err == nil {
		var r *fedpcav1.WatchJobResponse
		if r, err = stream.Recv(); err == nil {
			last = r.GetJob()
			if progress != nil {
				progress(last)
			}
			if ended(last.GetState()) {
				// The proxy ends the stream after a final state: read its
				// status, so that the call counts as OK.
				if err := transport.Finish(stream); err != nil {
					c.log.Debug("watch stream ended badly", "error", err)
				}
				return last, nil
			}
		}
	}
	if errors.Is(err, io.EOF) || (wctx.Err() != nil && ctx.Err() == nil) {
		err = nil
	}
	return last, err
}

func ended(s fedpcav1.JobState) bool {
	return s == fedpcav1.JobState_JOB_STATE_DONE || s == fedpcav1.JobState_JOB_STATE_FAILED
}

func short(id string) string { return id[:min(len(id), 12)] + "…" }

// Fetch downloads the result of a done job, decrypts it and runs the job's
// analysis: Download, then Open.
func (c *Client) Fetch(ctx context.Context, s *job.Spec, sch *schema.Schema) (*job.Result, error) {
	sr, err := c.Download(ctx, s, sch)
	if err != nil {
		return nil, err
	}
	return c.Open(sr)
}

// Sealed is a done job's result as downloaded and checked, still encrypted
// to the user's key.
type Sealed struct {
	spec   *job.Spec
	sch    *schema.Schema
	header *fedpcav1.ResultHeader
	cts    []*rlwe.Ciphertext
	// boxes are a components job's sealed output shares, one per header
	// point.
	boxes [][]byte
}

// Download downloads the result of a done job and checks its noise parties
// against the job the user signed, without decrypting it. The job is done,
// so no job deadline applies: ctx and callAttempts bound the retries.
func (c *Client) Download(ctx context.Context, s *job.Spec, sch *schema.Schema) (*Sealed, error) {
	if c.cfg.Keys.Secret == nil {
		return nil, ErrNoKeys
	}
	if s.Components() && c.cfg.ResultKey == nil {
		return nil, ErrNoResultKey
	}
	n := 0
	if !s.Components() {
		l, err := s.RoundLen(sch, 0)
		if err != nil {
			return nil, err
		}
		n = c.params.Chunks(l)
	}
	hd, cts, boxes, err := c.fetchRelease(ctx, s, s.ID(), n)
	if err != nil {
		return nil, err
	}
	return &Sealed{spec: s, sch: sch, header: hd, cts: cts, boxes: boxes}, nil
}

// fetchRelease downloads the result of job id (the spec's, or one of its
// rounds), n ciphertexts or a components job's sealed outputs, and checks
// its noise parties against the owner list the user signed.
func (c *Client) fetchRelease(ctx context.Context, s *job.Spec, id string, n int) (*fedpcav1.ResultHeader, []*rlwe.Ciphertext, [][]byte, error) {
	var hd *fedpcav1.ResultHeader
	var cts []*rlwe.Ciphertext
	var boxes [][]byte
	// A result the proxy sends wrong is not retried: it would be sent
	// wrong again.
	fetch := transport.Call{What: "fetch the result of job " + short(id), Timeout: fetchTimeout, Attempts: callAttempts,
		Retryable: func(err error) bool { return !errors.As(err, new(badResult)) && transport.Transient(err) }}
	err := c.retry(ctx, fetch, func(ctx context.Context) (err error) {
		if s.Components() {
			hd, boxes, err = c.downloadSealed(ctx, s)
		} else {
			hd, cts, err = c.download(ctx, id, n)
		}
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	if hd.GetJobId() != id {
		return nil, nil, nil, fmt.Errorf("fetch result: header for job %q, want %s", hd.GetJobId(), id)
	}
	// The job's owner list, which the check below holds against the root
	// the user signed.
	var full *fedpcav1.GetJobResponse
	if err := c.call(ctx, "get job "+short(id), callTimeout, func(ctx context.Context) (err error) {
		full, err = c.proxy.GetJob(ctx, &fedpcav1.GetJobRequest{JobId: id})
		return err
	}); err != nil {
		return nil, nil, nil, err
	}
	if err := s.CheckNoiseParties(transport.Owners(full.GetJob().GetStatus().GetExpectedOwnerRefs()), hd.GetOwners(), hd.GetCspMembers()); err != nil {
		return nil, nil, nil, fmt.Errorf("fetch result: %w", err)
	}
	return hd, cts, boxes, nil
}

// Open decrypts a downloaded result and runs the job's analysis (no
// network).
func (c *Client) Open(r *Sealed) (*job.Result, error) {
	if c.cfg.Keys.Secret == nil {
		return nil, ErrNoKeys
	}
	if r.spec.Components() {
		return c.openComponents(r)
	}
	if r.spec.Power != nil {
		return nil, fmt.Errorf("job %s is a power-method job: its result is computed from all its rounds (Client.ResumePower, user fetch), not from round 0 alone", short(r.spec.ID()))
	}
	s, sch, hd := r.spec, r.sch, r.header
	rel, err := job.DecryptRelease(s, sch, c.params, c.cfg.Keys.Secret, r.cts)
	if err != nil {
		return nil, err
	}
	pr, err := job.PrivacyReport(s, sch, hd.GetOwners(), hd.GetCspMembers())
	if err != nil {
		return nil, err
	}
	return job.Analyze(s, sch, rel, hd.GetOwners(), pr, c.params.ID())
}

// openResult opens job id's result stream and reads its header.
func (c *Client) openResult(ctx context.Context, id string) (fedpcav1.ProxyService_FetchResultClient, *fedpcav1.ResultHeader, error) {
	stream, err := c.proxy.FetchResult(ctx, &fedpcav1.FetchResultRequest{JobId: id})
	if err != nil {
		return nil, nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, nil, err
	}
	hd := first.GetHeader()
	if hd == nil {
		return nil, nil, badResult{errors.New("bad result from the proxy: no header first")}
	}
	return stream, hd, nil
}

// download reads a result stream: its header and n ciphertexts.
func (c *Client) download(ctx context.Context, id string, n int) (*fedpcav1.ResultHeader, []*rlwe.Ciphertext, error) {
	stream, hd, err := c.openResult(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if len(hd.GetPoints()) > 0 {
		return nil, nil, fmt.Errorf("bad header from the proxy: members' points %v for a job of the statistics, which has no sealed output", hd.GetPoints())
	}
	if int(hd.GetCiphertexts()) != n {
		return nil, nil, fmt.Errorf("bad header from the proxy (%d ciphertexts, want %d)", hd.GetCiphertexts(), n)
	}
	cts := make([]*rlwe.Ciphertext, n)
	for i := range cts {
		m, err := stream.Recv()
		if err != nil {
			return nil, nil, fmt.Errorf("ciphertext %d: %w", i, err)
		}
		if cts[i], err = c.params.Codecs().Ciphertext.Unmarshal(m.GetCiphertext()); err != nil {
			return nil, nil, fmt.Errorf("ciphertext %d from the proxy: %w", i, err)
		}
	}
	if err := transport.Finish(stream); err != nil {
		return nil, nil, fmt.Errorf("after %d ciphertexts: %w", n, err)
	}
	return hd, cts, nil
}

// Publish stores the result document with the proxy, for the owners.
func (c *Client) Publish(ctx context.Context, res *job.Result, doc []byte) error {
	return c.call(ctx, "publish the result of job "+short(res.JobID), callTimeout, func(ctx context.Context) error {
		_, err := c.proxy.PublishResult(ctx, &fedpcav1.PublishResultRequest{JobId: res.JobID, Result: doc})
		return err
	})
}
