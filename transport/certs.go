package transport

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// CA is a trust domain's certificate authority: it signs the certificates
// of its organisation's nodes and nothing else, and may name them only in
// its own domain (an X.509 name constraint on spiffe://DOMAIN). Keep its key
// offline after issuing them.
type CA struct {
	Cert   *x509.Certificate
	Key    crypto.Signer
	Domain string
}

// Files of a CA directory.
const (
	CAKeyFile = "ca-key.pem"
)

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// NewCA creates a self-signed ECDSA P-256 CA of the single-CA domain
// (TrustDomain) valid for the given duration.
func NewCA(name string, validity time.Duration) (*CA, error) {
	return newCA(TrustDomain, name, validity)
}

// NewDomainCA creates the CA of an organisation's trust domain.
func NewDomainCA(domain string, validity time.Duration) (*CA, error) {
	if _, err := spiffeid.TrustDomainFromString(domain); err != nil {
		return nil, fmt.Errorf("trust domain %q: %w", domain, err)
	}
	return newCA(domain, "fedpca CA of "+domain, validity)
}

func newCA(domain, name string, validity time.Duration) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: name, Organization: []string{"fedpca"}},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
		// SPIFFE: a signing certificate names its trust domain; the name
		// constraint keeps every certificate it signs in that domain.
		URIs:                        []*url.URL{{Scheme: "spiffe", Host: domain}},
		PermittedURIDomains:         []string{domain},
		PermittedDNSDomainsCritical: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, Domain: domain}, nil
}

// domainOf is the trust domain a CA certificate issues in: its name
// constraint's, else its spiffe:// URI's, else (a CA of an earlier release)
// the single-CA domain.
func domainOf(cert *x509.Certificate) string {
	if len(cert.PermittedURIDomains) == 1 {
		return cert.PermittedURIDomains[0]
	}
	for _, u := range cert.URIs {
		if u.Scheme == "spiffe" && u.Host != "" {
			return u.Host
		}
	}
	return TrustDomain
}

// Issue creates a node certificate for the identity (in the CA's domain),
// usable as TLS client and server, with optional DNS names and IP
// addresses (for operators' tools; fedpca itself checks the URI SAN). key
// is the node's key, or nil for a fresh one. It returns PEM cert and key.
func (ca *CA) Issue(id Identity, key crypto.Signer, dns []string, ips []net.IP, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if err := id.Validate(); err != nil {
		return nil, nil, err
	}
	if id.TrustDomain != "" && id.TrustDomain != ca.Domain {
		return nil, nil, fmt.Errorf("%s: this CA issues identities of trust domain %s only", id, ca.Domain)
	}
	id.TrustDomain = ca.Domain
	if key == nil {
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, nil, err
		}
	}
	sn, err := serial()
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: id.Short(), Organization: []string{"fedpca", ca.Domain}},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{id.URI()},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
}

// Credentials issues a certificate for the identity and returns the node's
// credentials in memory, trusting this CA only for every role (tests and
// tools that need no files).
func (ca *CA) Credentials(id Identity, validity time.Duration) (*Credentials, error) {
	certPEM, keyPEM, err := ca.Issue(id, nil, nil, nil, validity)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	trust, err := NewTrust(ca.TrustEntry(slices.Clone(Roles)))
	if err != nil {
		return nil, err
	}
	return NewCredentialsTrust(trust, pair)
}

// TrustEntry is the CA's trust domain as a trust store entry accepting roles,
// with an empty roster.
func (ca *CA) TrustEntry(roles []string) Domain {
	return Domain{Bundle: Bundle{Name: ca.Domain, Authorities: []string{string(ca.CertPEM())}}, Roles: roles}
}

// CertPEM returns the CA certificate in PEM.
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Save writes ca.pem and ca-key.pem (0600) into dir.
func (ca *CA) Save(dir string) error {
	kder, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := writeFile(filepath.Join(dir, CAFile), ca.CertPEM()); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, CAKeyFile), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
}

// LoadCA reads a CA saved by Save.
func LoadCA(dir string) (*CA, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || !cert.IsCA {
		return nil, errors.New("load CA: not a CA certificate and key")
	}
	return &CA{Cert: cert, Key: signer, Domain: domainOf(cert)}, nil
}

// NodeOptions say how WriteNode issues a node's credentials.
type NodeOptions struct {
	DNS      []string
	IPs      []net.IP
	Validity time.Duration
	// CABundle is the ca.pem written beside the certificate (nil: the
	// CA's certificate): the single-CA layout's trust, and a file for
	// operators' tools (curl --cacert).
	CABundle []byte
	// Trust, when set, is written as the node's trust.json (which then
	// takes precedence over ca.pem).
	Trust *Trust
	// NewKey issues the certificate for a fresh key even when the
	// directory holds one. Without it a renewed certificate keeps the
	// node's key, and with it the node's identity: every pin of it holds.
	NewKey bool
	// LinkTrust (WriteDeployment) hard-links one trust.json into every
	// node directory instead of writing a copy into each: for the
	// simulator, whose thousands of throwaway nodes share one disk (n
	// copies of a roster of n nodes were 15 GB and minutes of fsyncs at
	// 10,000 owners). A deployment's nodes keep files of their own, so
	// that a store edited in one node's directory changes no other's.
	LinkTrust bool
}

// WriteNode issues a certificate for the identity and writes a node's
// credentials directory, all 0600: ca.pem, cert.pem, key.pem and, with
// opt.Trust, trust.json. It returns the node's key fingerprint.
func (ca *CA) WriteNode(dir string, id Identity, opt NodeOptions) (string, error) {
	var key crypto.Signer
	if !opt.NewKey {
		if b, err := os.ReadFile(filepath.Join(dir, KeyFile)); err == nil {
			if key, err = parseKey(b); err != nil {
				return "", fmt.Errorf("%s: %w (remove it, or issue with a new key)", filepath.Join(dir, KeyFile), err)
			}
		}
	}
	certPEM, keyPEM, err := ca.Issue(id, key, opt.DNS, opt.IPs, opt.Validity)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	bundle := opt.CABundle
	if bundle == nil {
		bundle = ca.CertPEM()
	}
	files := map[string][]byte{CAFile: bundle, CertFile: certPEM, KeyFile: keyPEM}
	if opt.Trust != nil {
		files[TrustFile] = opt.Trust.Marshal()
	}
	for name, b := range files {
		if err := writeFile(filepath.Join(dir, name), b); err != nil {
			return "", err
		}
	}
	blk, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return "", err
	}
	return KeyFingerprint(cert), nil
}

// parseKey reads a PEM PKCS #8 private key.
func parseKey(b []byte) (crypto.Signer, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("not a PEM key")
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, errors.New("not a signing key")
	}
	return s, nil
}

// NodeFingerprint reads the key fingerprint of the certificate in a node's
// credentials directory.
func NodeFingerprint(dir string) (Identity, string, error) {
	b, err := os.ReadFile(filepath.Join(dir, CertFile))
	if err != nil {
		return Identity{}, "", err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return Identity{}, "", fmt.Errorf("%s: not a PEM certificate", filepath.Join(dir, CertFile))
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return Identity{}, "", err
	}
	id, err := IdentityOf(cert)
	if err != nil {
		return Identity{}, "", err
	}
	return id, KeyFingerprint(cert), nil
}

// writeFile writes b to path with mode 0600, atomically (temporary file and
// rename), and fsyncs it and its directory (so that the rename survives a
// crash).
func writeFile(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return renameSynced(tmp.Name(), path)
}

// renameSynced renames from to path and fsyncs path's directory, so that
// the rename survives a crash.
func renameSynced(from, path string) error {
	if err := os.Rename(from, path); err != nil {
		return err
	}
	dir, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// WriteFileAtomic is writeFile for the daemons' own state files (0600).
func WriteFileAtomic(path string, b []byte) error { return writeFile(path, b) }

// WriteDeployment issues certificates of a single-CA deployment: each
// identity's into dir/ROLE-ID (keeping a key already there unless
// opt.NewKey), then gives every node directory under dir a trust.json: the
// CA's domain accepted for every role (with the CAs of opt.CABundle), and
// the roster of every node under dir by key, so that a node knows the
// others by their keys from the moment it is issued. It returns the
// roster.
func (ca *CA) WriteDeployment(dir string, ids []Identity, opt NodeOptions) ([]Node, error) {
	for _, id := range ids {
		o := opt
		o.Trust = nil
		if _, err := ca.WriteNode(filepath.Join(dir, id.Role+"-"+id.ID), id, o); err != nil {
			return nil, err
		}
	}
	return ca.writeRoster(dir, opt)
}

// writeRoster writes the trust.json of dir and of every node directory
// under it (a single-CA deployment of ca; linked with opt.LinkTrust):
// every role accepted from the CA's domain (opt.CABundle: the CAs to
// trust, default the CA's certificate), the roster of every node there.
func (ca *CA) writeRoster(dir string, opt NodeOptions) ([]Node, error) {
	bundle := opt.CABundle
	nodeDirs, err := filepath.Glob(filepath.Join(dir, "*", CertFile))
	if err != nil {
		return nil, err
	}
	d := ca.TrustEntry(slices.Clone(Roles))
	if bundle != nil {
		d.Authorities = nil
		for rest := bundle; ; {
			var b *pem.Block
			if b, rest = pem.Decode(rest); b == nil {
				break
			}
			d.Authorities = append(d.Authorities, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: b.Bytes})))
		}
	}
	var dirs []string
	for _, f := range nodeDirs {
		nd := filepath.Dir(f)
		id, key, err := NodeFingerprint(nd)
		if err != nil || id.Domain() != ca.Domain {
			continue // not a node of this CA's domain
		}
		d.Nodes = append(d.Nodes, Node{ID: id.String(), Key: key})
		dirs = append(dirs, nd)
	}
	slices.SortFunc(d.Nodes, func(a, b Node) int { return strings.Compare(a.ID, b.ID) })
	trust, err := NewTrust(d)
	if err != nil {
		return nil, err
	}
	b, shared := trust.Marshal(), filepath.Join(dir, TrustFile)
	if err := writeFile(shared, b); err != nil {
		return nil, err
	}
	for _, nd := range dirs {
		path := filepath.Join(nd, TrustFile)
		if opt.LinkTrust {
			err = linkFile(shared, path, b)
		} else {
			err = writeFile(path, b)
		}
		if err != nil {
			return nil, err
		}
	}
	return d.Nodes, nil
}

// linkFile puts at path a hard link to src, whose content is b, or a copy
// of b where a link cannot be made (another file system) (NodeOptions.
// LinkTrust). The nodes' own tools replace trust.json by renaming a new
// file over it (writeFile), never write into it, so that a link is not
// changed under another node by them.
func linkFile(src, path string, b []byte) error {
	tmp := filepath.Join(filepath.Dir(path), ".tmp-link-"+filepath.Base(path))
	os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		return writeFile(path, b)
	}
	defer os.Remove(tmp) // a no-op once renamed
	return renameSynced(tmp, path)
}
