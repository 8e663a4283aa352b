package transport

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Org is an organisation's directory (fedpca certs init, issue, export,
// import): its trust domain's CA in ca/ (ca.pem, and ca-key.pem, to keep
// offline once the nodes are issued), its trust store trust.json (its own
// domain with the roster of its nodes, and the other organisations' bundles
// it imported, each for the roles it accepts from them), and one directory
// of credentials per node, ROLE-ID/, each with a copy of the trust store.
// An organisation issues identities in its own domain only; it trusts the
// others' by their bundles, exchanged out of band.
type Org struct {
	Dir    string
	Domain string
}

// orgCADir is the CA's directory in an organisation's.
const orgCADir = "ca"

// InitOrg creates an organisation: its CA for the trust domain and a trust
// store of its own domain alone (every role, an empty roster). It refuses a
// directory that already holds a CA.
func InitOrg(dir, domain string, validity time.Duration) (*Org, error) {
	if _, err := os.Stat(filepath.Join(dir, orgCADir, CAKeyFile)); err == nil {
		return nil, fmt.Errorf("%s already holds an organisation's CA (%s): nothing done", dir, filepath.Join(dir, orgCADir))
	}
	if _, err := os.Stat(filepath.Join(dir, orgCADir, CAFile)); err == nil {
		return nil, fmt.Errorf("%s already holds an organisation's CA certificate (%s): nothing done", dir, filepath.Join(dir, orgCADir, CAFile))
	}
	ca, err := NewDomainCA(domain, validity)
	if err != nil {
		return nil, err
	}
	if err := ca.Save(filepath.Join(dir, orgCADir)); err != nil {
		return nil, err
	}
	t, err := NewTrust(ca.TrustEntry(slices.Clone(Roles)))
	if err != nil {
		return nil, err
	}
	o := &Org{Dir: dir, Domain: domain}
	return o, writeFile(filepath.Join(dir, TrustFile), t.Marshal())
}

// OpenOrg opens an organisation's directory; its CA's key is not read.
func OpenOrg(dir string) (*Org, error) {
	b, err := os.ReadFile(filepath.Join(dir, orgCADir, CAFile))
	if err != nil {
		return nil, fmt.Errorf("%s is not an organisation's directory (fedpca certs init --org %s): %w", dir, dir, err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("%s: not a PEM certificate", filepath.Join(dir, orgCADir, CAFile))
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil, err
	}
	return &Org{Dir: dir, Domain: domainOf(cert)}, nil
}

// Trust reads the organisation's trust store.
func (o *Org) Trust() (*Trust, error) {
	b, err := os.ReadFile(filepath.Join(o.Dir, TrustFile))
	if err != nil {
		return nil, err
	}
	t, err := ParseTrust(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(o.Dir, TrustFile), err)
	}
	return t, nil
}

// Issue issues certificates of the organisation's domain to the nodes
// (keeping a key a node's directory already holds unless opt.NewKey), adds
// them to its roster and gives every node of the organisation the updated
// trust store. It returns the new roster entries.
func (o *Org) Issue(ids []Identity, opt NodeOptions) ([]Node, error) {
	ca, err := LoadCA(filepath.Join(o.Dir, orgCADir))
	if err != nil {
		return nil, err
	}
	t, err := o.Trust()
	if err != nil {
		return nil, err
	}
	own, ok := t.Domain(o.Domain)
	if !ok {
		return nil, fmt.Errorf("%s lists no domain %s, its own", filepath.Join(o.Dir, TrustFile), o.Domain)
	}
	var issued []Node
	for _, id := range ids {
		if id.TrustDomain != "" && id.TrustDomain != o.Domain {
			return nil, fmt.Errorf("%s: this organisation issues identities of trust domain %s only", id, o.Domain)
		}
		id.TrustDomain = o.Domain
		dir := filepath.Join(o.Dir, id.Role+"-"+id.ID)
		o := opt
		o.Trust = nil
		key, err := ca.WriteNode(dir, id, o)
		if err != nil {
			return nil, err
		}
		n := Node{ID: id.String(), Key: key}
		own.Nodes = slices.DeleteFunc(own.Nodes, func(x Node) bool { return x.ID == n.ID })
		own.Nodes = append(own.Nodes, n)
		issued = append(issued, n)
	}
	slices.SortFunc(own.Nodes, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	if t, err = t.With(own); err != nil {
		return nil, err
	}
	return issued, o.save(t)
}

// Bundle is what the organisation publishes (fedpca certs export): its
// CAs and its roster.
func (o *Org) Bundle() (Bundle, error) {
	t, err := o.Trust()
	if err != nil {
		return Bundle{}, err
	}
	own, ok := t.Domain(o.Domain)
	if !ok {
		return Bundle{}, fmt.Errorf("%s lists no domain %s, its own", filepath.Join(o.Dir, TrustFile), o.Domain)
	}
	return own.Bundle, nil
}

// ErrOwnBundle reports a bundle of the organisation's own domain, which
// Import leaves alone.
var ErrOwnBundle = errors.New("the bundle is of this organisation's own trust domain")

// Import trusts another organisation's bundle for the roles given (none:
// the roles of its roster), replacing an earlier bundle of the same domain,
// and gives every node of the organisation the updated trust store. It
// returns the domain as it is now trusted. A bundle of the organisation's
// own domain changes nothing (ErrOwnBundle): its own roster comes from its
// CA alone.
func (o *Org) Import(b Bundle, roles []string) (Domain, error) {
	if b.Name == o.Domain {
		return Domain{}, fmt.Errorf("%w (%s)", ErrOwnBundle, b.Name)
	}
	if len(roles) == 0 {
		roles = b.Roles()
	}
	if len(roles) == 0 {
		return Domain{}, fmt.Errorf("the bundle of %s lists no node: name the roles to accept from it (--roles)", b.Name)
	}
	d := Domain{Bundle: b, Roles: slices.Sorted(slices.Values(roles))}
	// The roster keeps only the nodes of the roles accepted.
	d.Nodes = slices.DeleteFunc(slices.Clone(b.Nodes), func(n Node) bool {
		id, err := ParseIdentity(n.ID)
		return err != nil || !slices.Contains(d.Roles, id.Role)
	})
	t, err := o.Trust()
	if err != nil {
		return Domain{}, err
	}
	if t, err = t.With(d); err != nil {
		return Domain{}, err
	}
	return d, o.save(t)
}

// save writes the trust store to the organisation's directory and to each
// of its nodes'.
func (o *Org) save(t *Trust) error {
	if err := writeFile(filepath.Join(o.Dir, TrustFile), t.Marshal()); err != nil {
		return err
	}
	certs, err := filepath.Glob(filepath.Join(o.Dir, "*", CertFile))
	if err != nil {
		return err
	}
	for _, c := range certs {
		if err := writeFile(filepath.Join(filepath.Dir(c), TrustFile), t.Marshal()); err != nil {
			return err
		}
	}
	return nil
}

// Digest is a bundle's SHA-256 (hex), for the two organisations to compare
// over another channel (a phone call) before one imports the other's.
func (b Bundle) Digest() string {
	h := sha256.Sum256(b.Marshal())
	return hex.EncodeToString(h[:])
}
