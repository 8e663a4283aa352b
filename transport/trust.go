package transport

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// TrustFile is the trust store in a node's credentials directory (and in an
// organisation's directory, from which fedpca certs copies it to the
// organisation's nodes).
const TrustFile = "trust.json"

// trustVersion is the trust store's format version.
const trustVersion = 1

// Bundle is what an organisation publishes to the others (fedpca certs
// export): its trust domain, the CA certificates that issue the domain's
// identities, and the roster of its nodes, each by its SPIFFE ID and key
// fingerprint. It holds no secret.
type Bundle struct {
	Name        string   `json:"trust_domain"`
	Authorities []string `json:"x509_authorities"` // PEM, one certificate each
	Nodes       []Node   `json:"nodes,omitempty"`
}

// Node is a roster entry: a node's SPIFFE ID and its key's fingerprint
// (KeyFingerprint).
type Node struct {
	ID  string `json:"id"`
	Key string `json:"key"`
}

// Domain is a trust domain a node trusts: its bundle and the roles this node
// accepts from it. A certificate naming spiffe://DOMAIN/ROLE/ID is accepted
// only when it chains to DOMAIN's own CAs (no organisation can issue an
// identity in another's domain), when ROLE is among Roles, and, when the
// roster lists the ID, when it carries the listed key.
type Domain struct {
	Bundle
	Roles []string `json:"roles"`
}

// Trust is a node's trust store: the federation of trust domains it accepts,
// each with its CAs, the roles accepted from it and its roster. Immutable
// once parsed; safe for concurrent use.
type Trust struct {
	Version int      `json:"version"`
	Domains []Domain `json:"domains"`

	set   *x509bundle.Set
	pool  *x509.CertPool
	nodes map[string]Node // by SPIFFE ID
}

// ParseTrust reads and checks a trust store (TrustFile).
func ParseTrust(b []byte) (*Trust, error) {
	var t Trust
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return nil, fmt.Errorf("trust store: %w", err)
	}
	if t.Version != trustVersion {
		return nil, fmt.Errorf("trust store: version %d, want %d", t.Version, trustVersion)
	}
	if err := t.index(); err != nil {
		return nil, err
	}
	return &t, nil
}

// NewTrust builds a trust store of the domains (checked as ParseTrust
// does).
func NewTrust(domains ...Domain) (*Trust, error) {
	t := &Trust{Version: trustVersion, Domains: slices.Clone(domains)}
	if err := t.index(); err != nil {
		return nil, err
	}
	return t, nil
}

// LegacyTrust is the trust store of a single-CA deployment's node whose
// credentials directory holds only ca.pem: the CAs of the bundle issue the
// domain fedpca, accepted for every role, with no roster.
func LegacyTrust(caPEM []byte) (*Trust, error) {
	var authorities []string
	for rest := caPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		authorities = append(authorities, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})))
	}
	if len(authorities) == 0 {
		return nil, errors.New("credentials: CA bundle holds no certificate")
	}
	return NewTrust(Domain{Bundle: Bundle{Name: TrustDomain, Authorities: authorities}, Roles: slices.Clone(Roles)})
}

// index checks the domains and builds the lookups.
func (t *Trust) index() error {
	if len(t.Domains) == 0 {
		return errors.New("trust store: no trust domain")
	}
	t.set, t.pool, t.nodes = x509bundle.NewSet(), x509.NewCertPool(), map[string]Node{}
	for i := range t.Domains {
		d := &t.Domains[i]
		td, err := spiffeid.TrustDomainFromString(d.Name)
		if err != nil {
			return fmt.Errorf("trust store: trust domain %q: %w", d.Name, err)
		}
		if t.set.Has(td) {
			return fmt.Errorf("trust store: trust domain %s listed twice", d.Name)
		}
		if len(d.Roles) == 0 {
			return fmt.Errorf("trust store: trust domain %s: no role is accepted from it", d.Name)
		}
		for _, r := range d.Roles {
			if !slices.Contains(Roles, r) {
				return fmt.Errorf("trust store: trust domain %s: unknown role %q (want %s)", d.Name, r, strings.Join(Roles, ", "))
			}
		}
		certs, err := d.certificates()
		if err != nil {
			return fmt.Errorf("trust store: %w", err)
		}
		for _, c := range certs {
			t.pool.AddCert(c)
		}
		t.set.Add(x509bundle.FromX509Authorities(td, certs))
		for _, n := range d.Nodes {
			id, err := ParseIdentity(n.ID)
			if err != nil {
				return fmt.Errorf("trust store: trust domain %s: roster: %w", d.Name, err)
			}
			if id.TrustDomain != d.Name {
				return fmt.Errorf("trust store: trust domain %s: roster lists %s, of another domain", d.Name, n.ID)
			}
			if !slices.Contains(d.Roles, id.Role) {
				return fmt.Errorf("trust store: trust domain %s: roster lists %s, but role %s is not accepted from the domain (roles: %s)",
					d.Name, n.ID, id.Role, strings.Join(d.Roles, ", "))
			}
			if _, err := ParseFingerprint(n.Key); err != nil {
				return fmt.Errorf("trust store: %s: %w", n.ID, err)
			}
			if _, dup := t.nodes[id.String()]; dup {
				return fmt.Errorf("trust store: roster lists %s twice", n.ID)
			}
			t.nodes[id.String()] = Node{ID: id.String(), Key: n.Key}
		}
	}
	return nil
}

// certificates parses a bundle's CAs: each a CA certificate that may issue
// only in the bundle's domain (when it says which domains it may issue in).
func (b *Bundle) certificates() ([]*x509.Certificate, error) {
	if len(b.Authorities) == 0 {
		return nil, fmt.Errorf("trust domain %s: no CA certificate", b.Name)
	}
	var out []*x509.Certificate
	for _, a := range b.Authorities {
		blk, rest := pem.Decode([]byte(a))
		if blk == nil || blk.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) > 0 {
			return nil, fmt.Errorf("trust domain %s: an authority is not one PEM certificate", b.Name)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("trust domain %s: %w", b.Name, err)
		}
		if !c.IsCA {
			return nil, fmt.Errorf("trust domain %s: %q is not a CA", b.Name, c.Subject.CommonName)
		}
		if len(c.PermittedURIDomains) > 0 && !slices.Equal(c.PermittedURIDomains, []string{b.Name}) {
			return nil, fmt.Errorf("trust domain %s: CA %q issues identities of %s, not of %s: a bundle of another domain?",
				b.Name, c.Subject.CommonName, strings.Join(c.PermittedURIDomains, ", "), b.Name)
		}
		out = append(out, c)
	}
	return out, nil
}

// Marshal encodes the trust store (TrustFile), indented.
func (t *Trust) Marshal() []byte {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("trust store: %v", err))
	}
	return append(b, '\n')
}

// Domain returns a trust domain's entry.
func (t *Trust) Domain(name string) (Domain, bool) {
	for _, d := range t.Domains {
		if d.Name == name {
			return d, true
		}
	}
	return Domain{}, false
}

// Names lists the trust domains.
func (t *Trust) Names() []string {
	var out []string
	for _, d := range t.Domains {
		out = append(out, d.Name)
	}
	return out
}

// Pool holds every domain's CAs (the TLS stack's first check; Verify binds
// each identity to its own domain's CAs).
func (t *Trust) Pool() *x509.CertPool { return t.pool }

// Verify checks a certificate chain and returns its identity: its SPIFFE ID
// names a trusted domain, the chain leads to that domain's CAs (go-spiffe's
// X509-SVID verification), the domain is trusted for the ID's role, and if
// the roster lists the ID, the certificate carries the listed key.
func (t *Trust) Verify(leaf *x509.Certificate, intermediates ...*x509.Certificate) (Identity, error) {
	id, err := IdentityOf(leaf)
	if err != nil {
		return Identity{}, err
	}
	d, ok := t.Domain(id.Domain())
	if !ok {
		return id, fmt.Errorf("%s: trust domain %s is not trusted here (trusted: %s; fedpca certs import adds an organisation's bundle)",
			id, id.Domain(), strings.Join(t.Names(), ", "))
	}
	if _, _, err := x509svid.Verify(append([]*x509.Certificate{leaf}, intermediates...), t.set, x509svid.WithTime(time.Now())); err != nil {
		return id, fmt.Errorf("%s: not issued by trust domain %s's CA: %w", id, id.Domain(), err)
	}
	if !slices.Contains(d.Roles, id.Role) {
		return id, fmt.Errorf("%s: role %s is not accepted from trust domain %s (accepted from it: %s)", id, id.Role, d.Name, strings.Join(d.Roles, ", "))
	}
	if n, ok := t.nodes[id.String()]; ok {
		if got := KeyFingerprint(leaf); got != n.Key {
			return id, &KeyMismatchError{Who: id.String(), Want: n.Key, Got: got, Where: "this node's roster (" + TrustFile + ")"}
		}
	}
	return id, nil
}

// KeyMismatchError reports a certificate with the expected name and another
// key.
type KeyMismatchError struct {
	Who, Want, Got string
	// Where the expected key comes from (a roster, a pin, a job spec).
	Where string
}

func (e *KeyMismatchError) Error() string {
	return fmt.Sprintf("%s presents key %s, but %s names it by key %s: a certificate with the right name and another key (re-issued by whoever holds a CA, or a key rolled without telling the others)",
		e.Who, e.Got, e.Where, e.Want)
}

// Known returns the key the roster lists for an identity.
func (t *Trust) Known(id Identity) (string, bool) {
	n, ok := t.nodes[id.String()]
	return n.Key, ok
}

// Resolve names a node of a role by key. name is a fingerprint (the
// identity's ID is then the roster's, or empty), ID=FINGERPRINT (the ID for
// messages), a SPIFFE ID, or an ID that exactly one roster entry of the role
// holds.
func (t *Trust) Resolve(role, name string) (Peer, error) {
	if id, fp, ok := strings.Cut(name, "="); ok {
		key, err := ParseFingerprint(fp)
		if err != nil {
			return Peer{}, err
		}
		in := Identity{Role: role, ID: id}
		if strings.HasPrefix(id, "spiffe://") {
			if in, err = ParseIdentity(id); err != nil {
				return Peer{}, err
			}
		}
		if err := in.Validate(); err != nil {
			return Peer{}, err
		}
		return Peer{Identity: in, Key: key}, nil
	}
	if key, err := ParseFingerprint(name); err == nil {
		for _, n := range t.nodes {
			if n.Key == key {
				id, _ := ParseIdentity(n.ID)
				if id.Role == role {
					return Peer{Identity: id, Key: key}, nil
				}
			}
		}
		return Peer{Identity: Identity{Role: role}, Key: key}, nil
	}
	var found []Peer
	for _, n := range t.nodes {
		id, _ := ParseIdentity(n.ID)
		if id.Role == role && (id.ID == name || id.String() == name) {
			found = append(found, Peer{Identity: id, Key: n.Key})
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		var known []string
		for _, p := range t.Roster(role) {
			known = append(known, p.ID)
		}
		hint := ""
		if k := Nearest(name, known); k != "" {
			hint = fmt.Sprintf(" (did you mean %s?)", k)
		}
		return Peer{}, fmt.Errorf("no key is known for %s/%s%s: the trust store lists no such node (%s: add its organisation's bundle with fedpca certs import, or name it by key as %s=FINGERPRINT)",
			role, name, hint, TrustFile, name)
	}
	var ids []string
	for _, p := range found {
		ids = append(ids, p.String())
	}
	slices.Sort(ids)
	return Peer{}, fmt.Errorf("%s/%s is ambiguous: %s; name one by its SPIFFE ID", role, name, strings.Join(ids, ", "))
}

// Roster lists the roster's nodes of a role, sorted by SPIFFE ID.
func (t *Trust) Roster(role string) []Peer {
	var out []Peer
	for _, n := range t.nodes {
		if id, _ := ParseIdentity(n.ID); id.Role == role {
			out = append(out, Peer{Identity: id, Key: n.Key})
		}
	}
	slices.SortFunc(out, func(a, b Peer) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// With returns a copy of the trust store with the domain added, or replaced
// if it is there (an organisation's newer bundle).
func (t *Trust) With(d Domain) (*Trust, error) {
	var domains []Domain
	for _, o := range t.Domains {
		if o.Name != d.Name {
			domains = append(domains, o)
		}
	}
	domains = append(domains, d)
	slices.SortFunc(domains, func(a, b Domain) int { return strings.Compare(a.Name, b.Name) })
	return NewTrust(domains...)
}

// ParseBundle reads an organisation's bundle (fedpca certs export) and
// checks it as a trust domain.
func ParseBundle(b []byte) (Bundle, error) {
	var bd Bundle
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&bd); err != nil {
		return Bundle{}, fmt.Errorf("bundle: %w", err)
	}
	if _, err := spiffeid.TrustDomainFromString(bd.Name); err != nil {
		return Bundle{}, fmt.Errorf("bundle: trust domain %q: %w", bd.Name, err)
	}
	if _, err := NewTrust(Domain{Bundle: bd, Roles: slices.Clone(Roles)}); err != nil {
		return Bundle{}, fmt.Errorf("bundle: %w", err)
	}
	return bd, nil
}

// Roles lists the roles of the bundle's roster, sorted.
func (b Bundle) Roles() []string {
	var out []string
	for _, n := range b.Nodes {
		if id, err := ParseIdentity(n.ID); err == nil && !slices.Contains(out, id.Role) {
			out = append(out, id.Role)
		}
	}
	slices.Sort(out)
	return out
}

// Marshal encodes the bundle, indented.
func (b Bundle) Marshal() []byte {
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		panic(fmt.Sprintf("bundle: %v", err))
	}
	return append(out, '\n')
}
