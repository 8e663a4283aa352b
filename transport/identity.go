package transport

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
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

// TrustDomain is the SPIFFE trust domain of fedpca identities.
const TrustDomain = "fedpca"

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Identity is a node's role and ID.
type Identity struct {
	Role string
	ID   string
}

// ParseIdentity parses "role/id" or "spiffe://fedpca/role/id".
func ParseIdentity(s string) (Identity, error) {
	rest, ok := strings.CutPrefix(s, "spiffe://"+TrustDomain+"/")
	if !ok {
		rest = s
	}
	role, id, ok := strings.Cut(rest, "/")
	if !ok {
		return Identity{}, fmt.Errorf("identity %q: want role/id", s)
	}
	in := Identity{Role: role, ID: id}
	return in, in.Validate()
}

// Validate checks the role and the ID.
func (i Identity) Validate() error {
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

// URI returns the SPIFFE ID.
func (i Identity) URI() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: TrustDomain, Path: "/" + i.Role + "/" + i.ID}
}

// String returns "spiffe://fedpca/role/id".
func (i Identity) String() string { return i.URI().String() }

// Short returns "role/id".
func (i Identity) Short() string { return i.Role + "/" + i.ID }

// IdentityOf returns the identity in a certificate's URI SAN. A certificate
// must carry exactly one fedpca SPIFFE ID.
func IdentityOf(cert *x509.Certificate) (Identity, error) {
	var found []Identity
	for _, u := range cert.URIs {
		if u.Scheme != "spiffe" || u.Host != TrustDomain {
			continue
		}
		in, err := ParseIdentity(u.String())
		if err != nil {
			return Identity{}, fmt.Errorf("certificate %q: %w", cert.Subject.CommonName, err)
		}
		found = append(found, in)
	}
	switch len(found) {
	case 0:
		return Identity{}, fmt.Errorf("certificate %q has no spiffe://%s/ URI SAN", cert.Subject.CommonName, TrustDomain)
	case 1:
		return found[0], nil
	}
	return Identity{}, fmt.Errorf("certificate %q has %d fedpca identities, want one", cert.Subject.CommonName, len(found))
}

type identityKey struct{}

// WithIdentity returns a context carrying the caller's identity.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// ErrNoIdentity reports a context without an authenticated caller.
var ErrNoIdentity = errors.New("no authenticated caller")

// CallerIdentity returns the identity the authorization interceptor put in
// the context.
func CallerIdentity(ctx context.Context) (Identity, error) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	if !ok {
		return Identity{}, ErrNoIdentity
	}
	return id, nil
}
