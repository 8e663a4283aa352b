package transport

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// FuzzIdentity: identities arrive as URI SANs of certificates and, in
// insecure mode, as a request header. ParseIdentity accepts only a valid
// trust domain, role and ID and round-trips; IdentityOf accepts a
// certificate only with exactly one URI SAN, a SPIFFE ID of the form
// spiffe://DOMAIN/ROLE/ID, which is then the identity's URI.
func FuzzIdentity(f *testing.F) {
	for _, s := range []string{
		"owner/hospital-a", "spiffe://fedpca/csp/csp-1", "user/alice.b", "admin/x", "owner/", "owner/a/b",
		"spiffe://fedpca/owner/a\nspiffe://fedpca/user/b", "spiffe://other/owner/x\nspiffe://fedpca/proxy/proxy",
		"spiffe://x@fedpca/owner/a", "spiffe://fedpca/owner/%61", "spiffe://fedpca/owner/a#f", "spiffe://fedpca/owner/a?q",
		"https://fedpca/owner/a", "spiffe://FEDPCA/owner/a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if id, err := ParseIdentity(s); err == nil {
			if id.Validate() != nil {
				t.Fatalf("accepted invalid %+v", id)
			}
			back, err := ParseIdentity(id.String())
			if err != nil || back.Short() != id.Short() || back.Domain() != id.Domain() || back.TrustDomain == "" {
				t.Fatalf("%q -> %+v -> %s -> %+v, %v", s, id, id.String(), back, err)
			}
			if short, err := ParseIdentity(id.Short()); err != nil || short.Short() != id.Short() || short.TrustDomain != "" {
				t.Fatalf("short form of %+v: %+v, %v", id, short, err)
			}
		}
		cert := &x509.Certificate{}
		for _, line := range strings.Split(s, "\n") {
			u, err := url.Parse(line)
			if err != nil {
				continue
			}
			cert.URIs = append(cert.URIs, u)
		}
		id, err := IdentityOf(cert)
		if err != nil {
			return
		}
		if len(cert.URIs) != 1 || id.String() != cert.URIs[0].String() || id.Validate() != nil || id.TrustDomain == "" {
			t.Fatalf("certificate with URIs %q: identity %+v", cert.URIs, id)
		}
	})
}

// FuzzCertificates: certificates received from other parties (a user's
// certificate in a job ticket, a CSP member's certificate with its exchange
// key) and read from files (the CA bundle, a node's certificate). Hostile
// bytes are refused with an error; what is accepted chains to the CA and has
// a valid identity.
func FuzzCertificates(f *testing.F) {
	ca, err := NewCA("fuzz CA", time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	other, _ := NewCA("another CA", time.Hour)
	node := func(c *CA, id Identity) (certPEM, keyPEM []byte) {
		cp, kp, err := c.Issue(id, nil, nil, nil, time.Hour)
		if err != nil {
			f.Fatal(err)
		}
		return cp, kp
	}
	proxyCert, proxyKey := node(ca, Identity{Role: RoleProxy, ID: "proxy"})
	pair, err := tls.X509KeyPair(proxyCert, proxyKey)
	if err != nil {
		f.Fatal(err)
	}
	creds, err := NewCredentials(ca.CertPEM(), pair)
	if err != nil {
		f.Fatal(err)
	}
	der := func(p []byte) []byte { b, _ := pem.Decode(p); return b.Bytes }
	userCert, _ := node(ca, Identity{Role: RoleUser, ID: "alice"})
	foreignCert, _ := node(other, Identity{Role: RoleUser, ID: "alice"})
	for _, b := range [][]byte{der(userCert), der(proxyCert), der(foreignCert), ca.Cert.Raw, der(userCert)[:100]} {
		f.Add(uint8(0), b)
	}
	f.Add(uint8(1), ca.CertPEM())
	f.Add(uint8(1), append(ca.CertPEM(), other.CertPEM()...))
	f.Add(uint8(1), userCert)
	f.Add(uint8(1), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
	f.Add(uint8(2), proxyCert)
	f.Add(uint8(2), append(proxyCert, ca.CertPEM()...))
	f.Fuzz(func(t *testing.T, mode uint8, b []byte) {
		switch mode % 3 {
		case 0: // a DER certificate from the wire
			cert, id, err := creds.VerifyDER(b)
			if err != nil {
				return
			}
			if id.Validate() != nil {
				t.Fatalf("accepted identity %+v", id)
			}
			if again, err := creds.Verify(cert); err != nil || again != id {
				t.Fatalf("accepted certificate does not verify again: %v", err)
			}
		case 1: // a CA bundle file
			c, err := NewCredentials(b, pair)
			if err != nil {
				return
			}
			if c.Identity != creds.Identity {
				t.Fatalf("identity %+v from a CA bundle", c.Identity)
			}
		default: // a node's certificate file
			p, err := tls.X509KeyPair(b, proxyKey)
			if err != nil {
				return
			}
			c, err := NewCredentials(ca.CertPEM(), p)
			if err != nil {
				return
			}
			if c.Identity.Validate() != nil {
				t.Fatalf("accepted identity %+v", c.Identity)
			}
		}
	})
}

// FuzzUploadMessage: the server codec decodes an UploadRequest holding a
// ciphertext into a recycled buffer (unmarshalCiphertext) and leaves every
// other encoding to the proto codec; whatever the bytes, the message it
// yields is the proto codec's, and so is whether it fails.
func FuzzUploadMessage(f *testing.F) {
	ct := func(b []byte) []byte {
		out, _ := proto.Marshal(&fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Ciphertext{Ciphertext: b}})
		return out
	}
	hd, _ := proto.Marshal(&fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Header{Header: &fedpcav1.UploadHeader{JobId: "j", Ciphertexts: 1}}})
	for _, b := range [][]byte{ct(nil), ct([]byte("abc")), ct(make([]byte, 1000)), hd, append(ct([]byte("x")), hd...),
		append(hd, ct([]byte("y"))...), append(ct([]byte("x")), 0x18, 0x01), {0x12, 0x05, 'a'}, {0x12}, {0x11, 1, 2, 3, 4, 5, 6, 7, 8}} {
		f.Add(b)
	}
	codec := sharingCodec{encoding.GetCodecV2("proto")}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := &fedpcav1.UploadRequest{}
		wantErr := proto.Unmarshal(b, want)
		got := &fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Header{Header: &fedpcav1.UploadHeader{JobId: "stale"}}}
		err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got)
		if (err == nil) != (wantErr == nil) {
			t.Fatalf("codec error %v, proto error %v", err, wantErr)
		}
		if err == nil && !proto.Equal(got, want) {
			t.Fatalf("codec decoded %v, proto %v", got, want)
		}
		if c := got.GetCiphertext(); c != nil {
			RecycleCiphertext(c)
		}
	})
}
