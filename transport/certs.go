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
	"time"
)

// CA is a deployment's certificate authority. The CA key signs node
// certificates and nothing else; keep it offline after issuing them.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Files of a CA directory.
const (
	CAKeyFile = "ca-key.pem"
)

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// NewCA creates a self-signed ECDSA P-256 CA valid for the given duration.
func NewCA(name string, validity time.Duration) (*CA, error) {
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
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Issue creates a node certificate for the identity, usable as TLS client
// and server, with optional DNS names and IP addresses (for operators'
// tools; fedpca itself checks the URI SAN). It returns PEM cert and key.
func (ca *CA) Issue(id Identity, dns []string, ips []net.IP, validity time.Duration) (certPEM, keyPEM []byte, err error) {
	if err := id.Validate(); err != nil {
		return nil, nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
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
		Subject:      pkix.Name{CommonName: id.Short(), Organization: []string{"fedpca"}},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{id.URI()},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
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
// credentials in memory, trusting this CA only (tests and tools that need
// no files).
func (ca *CA) Credentials(id Identity, validity time.Duration) (*Credentials, error) {
	certPEM, keyPEM, err := ca.Issue(id, nil, nil, validity)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	return NewCredentials(ca.CertPEM(), pair)
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
	return &CA{Cert: cert, Key: signer}, nil
}

// WriteNode issues a certificate for the identity and writes a node's
// credentials directory: ca.pem (the CA bundle to trust), cert.pem and
// key.pem, all 0600.
func (ca *CA) WriteNode(dir string, id Identity, caBundle []byte, dns []string, ips []net.IP, validity time.Duration) error {
	certPEM, keyPEM, err := ca.Issue(id, dns, ips, validity)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if caBundle == nil {
		caBundle = ca.CertPEM()
	}
	for name, b := range map[string][]byte{CAFile: caBundle, CertFile: certPEM, KeyFile: keyPEM} {
		if err := writeFile(filepath.Join(dir, name), b); err != nil {
			return err
		}
	}
	return nil
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
	if err := os.Rename(tmp.Name(), path); err != nil {
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
