package transport

import (
	"crypto"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// Files of a node's credentials directory (as written by WriteNode).
const (
	CAFile   = "ca.pem"
	CertFile = "cert.pem"
	KeyFile  = "key.pem"
)

// Credentials are a node's certificate, key and trust store. Immutable
// after loading; safe for concurrent use.
type Credentials struct {
	Trust    *Trust
	Cert     tls.Certificate
	Leaf     *x509.Certificate
	Identity Identity
	// Key is the node's key fingerprint (KeyFingerprint of Leaf): what
	// others pin it by.
	Key string
}

// LoadCredentials reads cert.pem and key.pem from dir, and its trust store:
// trust.json (a federation of trust domains with their rosters), or, in a
// directory that has none, ca.pem (one or more CA certificates of the
// single-CA domain fedpca: a bundle lets nodes trust an old and a new CA
// while certificates are rotated). The key file must not be readable by
// others.
func LoadCredentials(dir string) (*Credentials, error) { return new(Loader).Credentials(dir) }

// A Loader loads the credentials of many nodes in one process (the
// simulator, an owner farm): a trust store that several directories hold
// byte for byte is parsed once and shared, a Trust being read-only once
// made. Each node parsing its own copy made n nodes whose rosters name n
// nodes hold n^2 entries (1,000 simulated owners: 201 MB of heap; 10,000
// owners, a hundred times that). The zero
// Loader is ready; safe for concurrent use.
type Loader struct {
	mu     sync.Mutex
	trusts map[[sha256.Size]byte]*Trust
}

// Credentials is LoadCredentials, sharing trust stores already loaded.
func (l *Loader) Credentials(dir string) (*Credentials, error) {
	keyPath := filepath.Join(dir, KeyFile)
	if fi, err := os.Stat(keyPath); err == nil && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("credentials: %s is readable by group or others (mode %v); chmod 600 it", keyPath, fi.Mode().Perm())
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CertFile), keyPath)
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	trust, err := l.trust(dir)
	if err != nil {
		return nil, err
	}
	return NewCredentialsTrust(trust, pair)
}

// trust reads the trust store of a credentials directory: trust.json, or
// else ca.pem (LegacyTrust).
func (l *Loader) trust(dir string) (*Trust, error) {
	b, err := os.ReadFile(filepath.Join(dir, TrustFile))
	if err == nil {
		sum := sha256.Sum256(b)
		l.mu.Lock()
		defer l.mu.Unlock()
		if t, ok := l.trusts[sum]; ok {
			return t, nil
		}
		t, err := ParseTrust(b)
		if err != nil {
			return nil, fmt.Errorf("credentials: %s: %w", filepath.Join(dir, TrustFile), err)
		}
		if l.trusts == nil {
			l.trusts = map[[sha256.Size]byte]*Trust{}
		}
		l.trusts[sum] = t
		return t, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, CAFile))
	if err != nil {
		return nil, fmt.Errorf("credentials: %s has neither %s nor %s: %w", dir, TrustFile, CAFile, err)
	}
	t, err := LegacyTrust(caPEM)
	if err != nil {
		return nil, fmt.Errorf("credentials: %s: %w", filepath.Join(dir, CAFile), err)
	}
	return t, nil
}

// NewCredentials builds credentials of the single-CA domain from a PEM CA
// bundle and a key pair.
func NewCredentials(caPEM []byte, pair tls.Certificate) (*Credentials, error) {
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
	}
	trust, err := LegacyTrust(caPEM)
	if err != nil {
		return nil, err
	}
	return NewCredentialsTrust(trust, pair)
}

// NewCredentialsTrust builds credentials from a trust store and a key pair,
// which the trust store must accept.
func NewCredentialsTrust(trust *Trust, pair tls.Certificate) (*Credentials, error) {
	if len(pair.Certificate) == 0 {
		return nil, errors.New("credentials: no certificate")
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("credentials: %w", err)
	}
	pair.Leaf = leaf
	c := &Credentials{Trust: trust, Cert: pair, Leaf: leaf, Key: KeyFingerprint(leaf)}
	if c.Identity, err = c.Verify(leaf, pair.Certificate[1:]...); err != nil {
		return nil, fmt.Errorf("credentials: own certificate: %w", err)
	}
	return c, nil
}

// Verify checks that cert is a trusted identity (Trust.Verify: its domain's
// CAs, a role accepted from the domain, the roster's key) and returns it.
// It is also how signed job specs and statements are checked: the signer's
// certificate travels with them.
func (c *Credentials) Verify(cert *x509.Certificate, intermediates ...[]byte) (Identity, error) {
	var inter []*x509.Certificate
	for _, der := range intermediates {
		ic, err := x509.ParseCertificate(der)
		if err != nil {
			return Identity{}, err
		}
		inter = append(inter, ic)
	}
	return c.Trust.Verify(cert, inter...)
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
		ClientCAs:    c.Trust.Pool(),
		// The chain to some trusted CA is not enough: the client's
		// identity must be of its own domain's CAs, of a role accepted
		// from that domain, and of the roster's key.
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("client presented no certificate")
			}
			_, err := c.verifyPeer(cs.PeerCertificates)
			return err
		},
	}
}

// verifyPeer checks a TLS peer's chain (leaf first).
func (c *Credentials) verifyPeer(chain []*x509.Certificate) (Identity, error) {
	return c.Trust.Verify(chain[0], chain[1:]...)
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
			id, err := c.verifyPeer(cs.PeerCertificates)
			if err != nil {
				return fmt.Errorf("server certificate: %w", err)
			}
			if !id.Matches(expect) {
				want := expect.Role + "/" + expect.ID
				if expect.ID == "" {
					want = expect.Role + "/*"
				}
				if expect.TrustDomain != "" {
					want = "spiffe://" + expect.TrustDomain + "/" + want
				}
				return fmt.Errorf("server is %s, expected %s", id, want)
			}
			return nil
		},
	}
}
