package transport

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// Roles.
const (
	RoleProxy = "proxy"
	RoleCSP   = "csp"
	RoleOwner = "owner"
	RoleUser  = "user"
	// RoleOperator reads the operator pages over HTTPS (ServeOperator):
	// the status page, /metrics, /debug/pprof. It calls no RPC.
	RoleOperator = "operator"
)

// Roles lists the roles.
var Roles = []string{RoleProxy, RoleCSP, RoleOwner, RoleUser, RoleOperator}

// TrustDomain is the SPIFFE trust domain of a single-CA deployment (fedpca
// certs --out DIR ROLE/ID ..., the quick start): one CA issues every
// identity. A federation of organisations gives each its own trust domain
// (fedpca certs init --org NAME), whose CA issues only that domain's
// identities.
const TrustDomain = "fedpca"

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Identity is a node's name: its trust domain (the organisation whose CA
// issued it), role and ID, as the SPIFFE ID spiffe://DOMAIN/ROLE/ID of its
// certificate's URI SAN. Names are for people and for routing: every check
// that decides whom to trust also compares the node's key (KeyFingerprint),
// against the trust store's roster (Trust) or a pin.
//
// An empty TrustDomain means "any trusted domain" where an identity is
// expected (Dial's server), and the single-CA domain (TrustDomain) where
// one is named (ParseIdentity of ROLE/ID, an insecure node's claim).
type Identity struct {
	TrustDomain string
	Role        string
	ID          string
}

// ParseIdentity parses "role/id" or "spiffe://domain/role/id".
func ParseIdentity(s string) (Identity, error) {
	var in Identity
	rest := s
	if strings.HasPrefix(s, "spiffe://") {
		sid, err := spiffeid.FromString(s)
		if err != nil {
			return Identity{}, fmt.Errorf("identity %q: %w", s, err)
		}
		in.TrustDomain, rest = sid.TrustDomain().Name(), strings.TrimPrefix(sid.Path(), "/")
	}
	role, id, ok := strings.Cut(rest, "/")
	if !ok {
		return Identity{}, fmt.Errorf("identity %q: want role/id or spiffe://domain/role/id", s)
	}
	in.Role, in.ID = role, id
	return in, in.Validate()
}

// Validate checks the trust domain (if set), the role and the ID.
func (i Identity) Validate() error {
	if i.TrustDomain != "" {
		if _, err := spiffeid.TrustDomainFromString(i.TrustDomain); err != nil {
			return fmt.Errorf("identity: trust domain %q: %w", i.TrustDomain, err)
		}
	}
	known := false
	for _, r := range Roles {
		known = known || r == i.Role
	}
	if !known {
		return fmt.Errorf("identity: unknown role %q (want one of %s)", i.Role, strings.Join(Roles, ", "))
	}
	if !idPattern.MatchString(i.ID) {
		return fmt.Errorf("identity: id %q must be 1-64 letters, digits, '.', '_' or '-'", i.ID)
	}
	return nil
}

// Domain returns the trust domain, the single-CA one when unset.
func (i Identity) Domain() string {
	if i.TrustDomain == "" {
		return TrustDomain
	}
	return i.TrustDomain
}

// URI returns the SPIFFE ID.
func (i Identity) URI() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: i.Domain(), Path: "/" + i.Role + "/" + i.ID}
}

// String returns "spiffe://domain/role/id".
func (i Identity) String() string { return i.URI().String() }

// Short returns "role/id".
func (i Identity) Short() string { return i.Role + "/" + i.ID }

// Matches reports whether the identity is the expected one: the same role,
// and the same ID and trust domain where expect sets them.
func (i Identity) Matches(expect Identity) bool {
	return (expect.Role == "" || i.Role == expect.Role) && (expect.ID == "" || i.ID == expect.ID) &&
		(expect.TrustDomain == "" || i.Domain() == expect.Domain())
}

// IdentityOf returns the identity in a certificate's URI SAN: exactly one
// SPIFFE ID (go-spiffe's rule for an X509-SVID) of the form
// spiffe://DOMAIN/ROLE/ID. It does not check who issued it (Verify does).
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	sid, err := x509svid.IDFromCert(cert)
	if err != nil {
		return Identity{}, fmt.Errorf("certificate %q: %w", cert.Subject.CommonName, err)
	}
	in, err := ParseIdentity(sid.String())
	if err != nil {
		return Identity{}, fmt.Errorf("certificate %q: %w", cert.Subject.CommonName, err)
	}
	return in, nil
}

// KeyFingerprint is a node's identity: the hex SHA-256 of its certificate's
// SubjectPublicKeyInfo. It survives a renewed certificate that keeps the
// key, and changes with the key.
func KeyFingerprint(cert *x509.Certificate) string {
	h := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(h[:])
}

// ParseFingerprint reads a key fingerprint as printed (64 hex digits,
// optionally after "sha256:").
func ParseFingerprint(s string) (string, error) {
	fp := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(s, "sha256:"), "SHA256:"))
	if len(fp) != 2*sha256.Size {
		return "", fmt.Errorf("key fingerprint %q: want 64 hex digits (the SHA-256 of a certificate's public key, as fedpca certs prints it)", s)
	}
	if _, err := hex.DecodeString(fp); err != nil {
		return "", fmt.Errorf("key fingerprint %q: want 64 hex digits", s)
	}
	return fp, nil
}

// Peer is an authenticated caller: its identity and its key's fingerprint.
type Peer struct {
	Identity
	Key string
}

type identityKey struct{}

// WithPeer returns a context carrying the caller.
func WithPeer(ctx context.Context, p Peer) context.Context {
	return context.WithValue(ctx, identityKey{}, p)
}

// WithIdentity returns a context carrying the caller's identity (and no
// key: insecure mode, tests).
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return WithPeer(ctx, Peer{Identity: id})
}

// ErrNoIdentity reports a context without an authenticated caller.
var ErrNoIdentity = errors.New("no authenticated caller")

// CallerIdentity returns the identity the authorization interceptor put in
// the context.
func CallerIdentity(ctx context.Context) (Identity, error) {
	p, err := CallerPeer(ctx)
	return p.Identity, err
}

// CallerPeer returns the caller the authorization interceptor put in the
// context: its identity and key fingerprint (empty in insecure mode).
func CallerPeer(ctx context.Context) (Peer, error) {
	p, ok := ctx.Value(identityKey{}).(Peer)
	if !ok {
		return Peer{}, ErrNoIdentity
	}
	return p, nil
}
