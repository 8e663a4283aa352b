package transport

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Files of a node's credentials directory (as written by WriteNode).
const (
	CAFile   = "ca.pem"
	CertFile = "cert.pem"
	KeyFile  = "key.pem"
)

// Credentials are a node's certificate, key and trusted CAs. Immutable after
// loading; safe for concurrent use.
type Credentials struct {
	Pool     *x509.CertPool
	Cert     tls.Certificate
	Leaf     *x509.Certificate
	Identity Identity
}

// LoadCredentials reads ca.pem (one or more CA certificates: a bundle lets
// nodes trust an old and a new CA while certificates are rotated), cert.pem
// and key.pem from dir. The key file must not be readable by others.
func LoadCredentials(dir string) (*Credentials, error) {
	caPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	keyPath := filepath.Join(dir, KeyFile)
	if fi, err := os.Stat(keyPath); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("credentials: %s is readable by group or others (mode %v); chmod 600 it", keyPath, fi.Mode().Perm())
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), keyPath)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	return NewCredentials(caPEM, pair)
}

// NewCredentials builds credentials from a PEM CA bundle and a key pair.
func NewCredentials(caPEM []byte, pair tls.Certificate) (*Credentials, error) {
	pool := x509.NewCertPool()
	n := 0
	for rest := caPEM; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("credentials: CA bundle: %w", err)
		}
		if !c.IsCA {
			return nil, fmt.Errorf("credentials: CA bundle holds %q, which is not a CA", c.Subject.CommonName)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("credentials: CA bundle holds no certificate")
	}
	if len(pair.Certificate) == 0 {
		return nil, errors.New("credentials: no certificate")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	pair.Leaf = leaf
	c := &Credentials{Pool: pool, Cert: pair, Leaf: leaf}
	if c.Identity, err = c.Verify(leaf, pair.Certificate[1:]...); err != nil {
		return nil, fmt.Errorf("credentials: own certificate: %w", err)
	}
	return c, nil
}

// Verify checks that cert chains to a trusted CA (for client or server use)
// and returns its identity. It is also how signed job specs are checked: the
// user's certificate travels with the spec.
func (c *Credentials) Verify(cert *x509.Certificate, intermediates ...[]byte) (Identity, error) {
	inter := x509.NewCertPool()
	for _, der := range intermediates {
		ic, err := x509.ParseCertificate(der)
		if err != nil {
			return Identity{}, err
		}
		inter.AddCert(ic)
	}
	if _, err := cert.Verify(x509.VerifyOptions{
		Roots:         c.Pool,
		Intermediates: inter,
		CurrentTime:   time.Now(),
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth},
	}); err != nil {
		return Identity{}, fmt.Errorf("certificate %q: %w", cert.Subject.CommonName, err)
	}
	return IdentityOf(cert)
}

// VerifyDER is Verify for a DER-encoded certificate.
func (c *Credentials) VerifyDER(der []byte) (*x509.Certificate, Identity, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, Identity{}, fmt.Errorf("certificate: %w", err)
	}
	id, err := c.Verify(cert)
	return cert, id, err
}

// Signer returns the node's certificate key, to sign job specs and
// ceremony exchange keys.
func (c *Credentials) Signer() crypto.Signer {
	s, _ := c.Cert.PrivateKey.(crypto.Signer)
	return s
}

// ServerTLS returns the server side of mutual TLS 1.3: the client must
// present a certificate from a trusted CA.
func (c *Credentials) ServerTLS() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.Cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    c.Pool,
	}
}

// ClientTLS returns the client side of mutual TLS 1.3. The server's chain is
// verified against the trusted CAs and its identity must have the expected
// role (any role if expect.Role is empty) and ID (unless expect.ID is
// empty). Host names play no part:
// identities are in the URI SAN, as in SPIFFE.
func (c *Credentials) ClientTLS(expect Identity) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{c.Cert},
		// Verification is done by VerifyConnection below, against our CA and
		// the expected SPIFFE ID rather than a host name.
		InsecureSkipVerify: true, //nolint:gosec
		// Reconnections (an owner that drops idle connections and polls, a
		// restarted peer) resume the TLS 1.3 session: a PSK with a fresh
		// ephemeral key exchange, no certificate signature or chain to
		// verify again on either side (VerifyConnection still sees the
		// certificates of the first handshake). The cache is this
		// connection's alone: Dial builds a config per target.
		ClientSessionCache: tls.NewLRUClientSessionCache(4),
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("server presented no certificate")
			}
			var inter [][]byte
			for _, ic := range cs.PeerCertificates[1:] {
				inter = append(inter, ic.Raw)
			}
			id, err := c.Verify(cs.PeerCertificates[0], inter...)
			if err != nil {
				return fmt.Errorf("server certificate: %w", err)
			}
			if expect.Role != "" && (id.Role != expect.Role || (expect.ID != "" && id.ID != expect.ID)) {
				want := expect.Role + "/" + expect.ID
				if expect.ID == "" {
					want = expect.Role + "/*"
				}
				return fmt.Errorf("server is %s, expected %s", id.Short(), want)
			}
			return nil
		},
	}
}
