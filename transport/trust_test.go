package transport

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// domainCA is a CA of a trust domain, and a helper to issue its nodes'
// certificates.
func domainCA(t testing.TB, domain string) *CA {
	t.Helper()
	ca, err := NewDomainCA(domain, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func leaf(t testing.TB, ca *CA, id Identity) *x509.Certificate {
	t.Helper()
	certPEM, _, err := ca.Issue(id, nil, nil, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(certPEM)
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// unconstrainedCA is a CA of no fedpca making: no name constraint, so it
// could sign a certificate naming any domain.
func unconstrainedCA(t testing.TB) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "rogue CA"}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, key
}

// signLeaf makes a node certificate for the URI, signed by the given CA,
// bypassing CA.Issue's checks.
func signLeaf(t testing.TB, ca *x509.Certificate, caKey any, uri string) *x509.Certificate {
	t.Helper()
	u, _ := url.Parse(uri)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(8), Subject: pkix.Name{CommonName: "forged"}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}, URIs: []*url.URL{u}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

// TestTrustDomains: a node of organisation "proxy-op" that trusts
// "hospital-a" for role owner and "csp-op" for role csp. A certificate is
// accepted only from a listed domain, of that domain's own CAs, for a role
// accepted from it, and of the roster's key where the roster lists it. No
// organisation issues in another's domain: its CA refuses to, a
// certificate its CA signed anyway fails the other domain's chain and its
// own CA's name constraint, and a bundle of its CA under another domain's
// name is refused.
func TestTrustDomains(t *testing.T) {
	proxyOp, hospital, cspOp := domainCA(t, "proxy-op"), domainCA(t, "hospital-a"), domainCA(t, "csp-op")
	owner := leaf(t, hospital, Identity{Role: RoleOwner, ID: "hospital-a"})
	member := leaf(t, cspOp, Identity{Role: RoleCSP, ID: "csp-1"})
	trust, err := NewTrust(proxyOp.TrustEntry(Roles), hospital.TrustEntry([]string{RoleOwner}),
		Domain{Bundle: Bundle{Name: "csp-op", Authorities: []string{string(cspOp.CertPEM())}, Nodes: []Node{{ID: "spiffe://csp-op/csp/csp-1", Key: KeyFingerprint(member)}}}, Roles: []string{RoleCSP}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*x509.Certificate{owner, member} {
		if id, err := trust.Verify(c); err != nil || id.TrustDomain == "" {
			t.Fatalf("%v: %v", c.URIs, err)
		}
	}
	rogue, rogueKey := unconstrainedCA(t)
	forgedByProxy := signLeaf(t, proxyOp.Cert, proxyOp.Key, "spiffe://hospital-a/owner/hospital-b")
	for _, c := range []struct {
		what string
		cert *x509.Certificate
		want string
	}{
		{"the hospital's CA issuing a member", leaf(t, hospital, Identity{Role: RoleCSP, ID: "csp-1"}), "role csp is not accepted from trust domain hospital-a"},
		{"the proxy's operator issuing a member in its own domain", leaf(t, proxyOp, Identity{Role: RoleCSP, ID: "csp-1"}), ""},
		{"a member of the roster with another key", leaf(t, cspOp, Identity{Role: RoleCSP, ID: "csp-1"}), "by key " + KeyFingerprint(member)},
		{"a domain nobody imported", leaf(t, domainCA(t, "elsewhere"), Identity{Role: RoleOwner, ID: "x"}), "trust domain elsewhere is not trusted here"},
		{"the proxy's CA signing an identity of the hospital's domain", forgedByProxy, "not issued by trust domain hospital-a's CA"},
		{"a CA of no domain signing one", signLeaf(t, rogue, rogueKey, "spiffe://hospital-a/owner/hospital-a"), "not issued by trust domain hospital-a's CA"},
		{"two URIs", func() *x509.Certificate { c := *owner; c.URIs = append(c.URIs, c.URIs[0]); return &c }(), "more than one URI SAN"},
	} {
		_, err := trust.Verify(c.cert)
		if c.want == "" {
			// Accepted by the chain and role: the proxy trusts its own
			// domain for every role. That is why no one else pins keys
			// from its bundle for role csp (TestCommitteePinnedByKey).
			if err != nil {
				t.Errorf("%s: %v", c.what, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.what, err, c.want)
		}
	}
	var km *KeyMismatchError
	if _, err := trust.Verify(leaf(t, cspOp, Identity{Role: RoleCSP, ID: "csp-1"})); !errors.As(err, &km) || km.Want != KeyFingerprint(member) {
		t.Errorf("a key mismatch is not a KeyMismatchError naming the key: %v", err)
	}
	// The constrained CA refuses to issue outside its domain, and the name
	// constraint holds even were its certificate listed as another domain's.
	if _, _, err := proxyOp.Issue(Identity{TrustDomain: "hospital-a", Role: RoleOwner, ID: "x"}, nil, nil, nil, time.Hour); err == nil {
		t.Error("a domain's CA issued in another domain")
	}
	if _, err := NewTrust(Domain{Bundle: Bundle{Name: "hospital-a", Authorities: []string{string(proxyOp.CertPEM())}}, Roles: []string{RoleOwner}}); err == nil ||
		!strings.Contains(err.Error(), "issues identities of proxy-op, not of hospital-a") {
		t.Errorf("a bundle of another domain's CA: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(proxyOp.Cert)
	if _, err := forgedByProxy.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
		t.Error("the name constraint let the proxy's CA sign a hospital's identity")
	}
}

// TestResolve: names resolve to the roster's keys (an ID, a SPIFFE ID),
// keys may be given (ID=FINGERPRINT, a fingerprint), an ID two domains
// hold is ambiguous, and an unknown ID is refused with the nearest known.
func TestResolve(t *testing.T) {
	a, b := domainCA(t, "org-a"), domainCA(t, "org-b")
	ka, kb := KeyFingerprint(leaf(t, a, Identity{Role: RoleCSP, ID: "csp-1"})), KeyFingerprint(leaf(t, b, Identity{Role: RoleCSP, ID: "csp-1"}))
	kc := KeyFingerprint(leaf(t, b, Identity{Role: RoleCSP, ID: "csp-2"}))
	da, db := a.TrustEntry([]string{RoleCSP}), b.TrustEntry([]string{RoleCSP})
	da.Nodes = []Node{{ID: "spiffe://org-a/csp/csp-1", Key: ka}}
	db.Nodes = []Node{{ID: "spiffe://org-b/csp/csp-1", Key: kb}, {ID: "spiffe://org-b/csp/csp-2", Key: kc}}
	trust, err := NewTrust(da, db)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, id, key string }{
		{"csp-2", "spiffe://org-b/csp/csp-2", kc},
		{"spiffe://org-a/csp/csp-1", "spiffe://org-a/csp/csp-1", ka},
		{"csp-9=" + ka, "spiffe://fedpca/csp/csp-9", ka},
		{"sha256:" + kc, "spiffe://org-b/csp/csp-2", kc},
	} {
		p, err := trust.Resolve(RoleCSP, c.name)
		if err != nil || p.String() != c.id || p.Key != c.key {
			t.Errorf("%s: %v (%s), %v", c.name, p.Identity, p.Key, err)
		}
	}
	for _, c := range []struct{ name, want string }{
		{"csp-1", "csp/csp-1 is ambiguous: spiffe://org-a/csp/csp-1, spiffe://org-b/csp/csp-1"},
		{"csp-3", "no key is known for csp/csp-3 (did you mean csp-1?)"},
		{"csp-1=abc", "want 64 hex digits"},
	} {
		if _, err := trust.Resolve(RoleCSP, c.name); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := trust.Resolve(RoleOwner, "csp-2"); err == nil {
		t.Error("a member resolved as an owner")
	}
}

// TestOrgWorkflow: init, issue, export, import as fedpca certs runs them:
// each organisation's nodes get its trust store; an import reaches the
// organisation's nodes and accepts the other's nodes for the roles given
// only; a bundle of the organisation's own domain changes nothing; a
// renewed certificate keeps its key unless a new one is asked for; the
// bundle holds no secret.
func TestOrgWorkflow(t *testing.T) {
	dir := t.TempDir()
	hosp, err := InitOrg(filepath.Join(dir, "hospital-a"), "hospital-a", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := InitOrg(filepath.Join(dir, "hospital-a"), "hospital-a", time.Hour); err == nil {
		t.Fatal("init over an organisation's CA")
	}
	op, err := InitOrg(filepath.Join(dir, "csp-op"), "csp-op", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issued, err := hosp.Issue([]Identity{{Role: RoleOwner, ID: "hospital-a"}}, NodeOptions{Validity: time.Hour})
	if err != nil || len(issued) != 1 || issued[0].ID != "spiffe://hospital-a/owner/hospital-a" {
		t.Fatalf("issue: %v %v", issued, err)
	}
	if _, err := hosp.Issue([]Identity{{TrustDomain: "csp-op", Role: RoleCSP, ID: "csp-1"}}, NodeOptions{Validity: time.Hour}); err == nil {
		t.Fatal("an organisation issued in another's domain")
	}
	members, err := op.Issue([]Identity{{Role: RoleCSP, ID: "csp-1"}, {Role: RoleOperator, ID: "ops"}}, NodeOptions{Validity: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b, err := op.Bundle()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b.Marshal()), "PRIVATE KEY") || len(b.Nodes) != 2 {
		t.Fatalf("bundle: %s", b.Marshal())
	}
	parsed, err := ParseBundle(b.Marshal())
	if err != nil || parsed.Digest() != b.Digest() {
		t.Fatalf("bundle round trip: %v", err)
	}
	d, err := hosp.Import(parsed, []string{RoleCSP})
	if err != nil || !slices.Equal(d.Roles, []string{RoleCSP}) || len(d.Nodes) != 1 || d.Nodes[0] != members[0] {
		t.Fatalf("import: %+v, %v", d, err)
	}
	own, _ := hosp.Bundle()
	if _, err := hosp.Import(own, nil); !errors.Is(err, ErrOwnBundle) {
		t.Fatalf("own bundle: %v", err)
	}
	node := filepath.Join(dir, "hospital-a", "owner-hospital-a")
	creds, err := LoadCredentials(node)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := creds.Trust.Known(Identity{TrustDomain: "csp-op", Role: RoleCSP, ID: "csp-1"}); !ok || k != members[0].Key {
		t.Fatalf("the node does not know the member by key after the import: %v %v", k, ok)
	}
	ops, err := LoadCredentials(filepath.Join(dir, "csp-op", "operator-ops"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := creds.Verify(ops.Leaf); err == nil || !strings.Contains(err.Error(), "role operator is not accepted from trust domain csp-op") {
		t.Errorf("the member operator's operator certificate at the hospital: %v", err)
	}
	again, err := hosp.Issue([]Identity{{Role: RoleOwner, ID: "hospital-a"}}, NodeOptions{Validity: time.Hour})
	if err != nil || again[0].Key != issued[0].Key {
		t.Fatalf("a renewal changed the key: %v %v", again, err)
	}
	rolled, err := hosp.Issue([]Identity{{Role: RoleOwner, ID: "hospital-a"}}, NodeOptions{Validity: time.Hour, NewKey: true})
	if err != nil || rolled[0].Key == issued[0].Key {
		t.Fatalf("--new-key kept the key: %v %v", rolled, err)
	}
	if creds, err = LoadCredentials(node); err != nil || creds.Key != rolled[0].Key {
		t.Fatalf("the node after --new-key: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(node, TrustFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("trust.json: %v %v", fi, err)
	}
}

// TestDeploymentRoster: the one-machine layout (fedpca certs --out) gives
// every node a roster of every node it issued there, which refuses the same
// names with fresh keys from the same CA; a directory with only ca.pem (an
// earlier release's) still loads, without a roster.
func TestDeploymentRoster(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ids := []Identity{{Role: RoleCSP, ID: "csp-1"}, {Role: RoleOwner, ID: "hospital-a"}}
	roster, err := ca.WriteDeployment(dir, ids, NodeOptions{Validity: time.Hour})
	if err != nil || len(roster) != 2 {
		t.Fatalf("%v %v", roster, err)
	}
	if _, err := ca.WriteDeployment(dir, []Identity{{Role: RoleUser, ID: "alice"}}, NodeOptions{Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	owner, err := LoadCredentials(filepath.Join(dir, "owner-hospital-a"))
	if err != nil {
		t.Fatal(err)
	}
	fo, _ := os.Stat(filepath.Join(dir, "owner-hospital-a", TrustFile))
	fc, _ := os.Stat(filepath.Join(dir, "csp-csp-1", TrustFile))
	if fo == nil || fc == nil || os.SameFile(fo, fc) {
		t.Fatal("a deployment's nodes share one trust.json: editing one node's store would change another's")
	}
	if _, ok := owner.Trust.Known(Identity{Role: RoleUser, ID: "alice"}); !ok {
		t.Fatal("a node issued earlier does not know a node issued later")
	}
	forged := leaf(t, ca, Identity{Role: RoleCSP, ID: "csp-1"})
	if _, err := owner.Verify(forged); err == nil || !strings.Contains(err.Error(), "presents key "+KeyFingerprint(forged)) {
		t.Fatalf("csp-1 with a fresh key from the same CA: %v", err)
	}
	os.Remove(filepath.Join(dir, "owner-hospital-a", TrustFile))
	old, err := LoadCredentials(filepath.Join(dir, "owner-hospital-a"))
	if err != nil || len(old.Trust.Domains) != 1 || len(old.Trust.Domains[0].Nodes) != 0 {
		t.Fatalf("an earlier release's directory: %v", err)
	}
	if pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "csp-csp-1", CertFile), filepath.Join(dir, "csp-csp-1", KeyFile)); err != nil {
		t.Fatal(err)
	} else if _, err := NewCredentialsTrust(owner.Trust, pair); err != nil {
		t.Fatalf("csp-1's own certificate under the roster: %v", err)
	}
}

// TestLoaderSharesTrust: the simulator's layout links one trust.json into
// its nodes' directories (NodeOptions.LinkTrust), and a Loader parses a
// trust store that node directories hold byte for byte once (what keeps n
// simulated nodes with rosters of n from holding n^2 entries), and a
// directory whose store differs gets its own.
func TestLoaderSharesTrust(t *testing.T) {
	dir := t.TempDir()
	ca, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ids := []Identity{{Role: RoleOwner, ID: "a"}, {Role: RoleOwner, ID: "b"}, {Role: RoleOwner, ID: "c"}}
	if _, err := ca.WriteDeployment(dir, ids, NodeOptions{Validity: time.Hour, LinkTrust: true}); err != nil {
		t.Fatal(err)
	}
	fa, _ := os.Stat(filepath.Join(dir, "owner-a", TrustFile))
	fb, _ := os.Stat(filepath.Join(dir, "owner-b", TrustFile))
	if fa == nil || fb == nil || !os.SameFile(fa, fb) {
		t.Fatal("the nodes' trust.json are not one file linked (n nodes' rosters of n nodes written n times)")
	}
	var l Loader
	a, err := l.Credentials(filepath.Join(dir, "owner-a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Credentials(filepath.Join(dir, "owner-b"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Trust != b.Trust || a.Identity == b.Identity {
		t.Fatalf("one deployment's nodes: shared trust %v, identities %v and %v", a.Trust == b.Trust, a.Identity, b.Identity)
	}
	own, err := LoadCredentials(filepath.Join(dir, "owner-a"))
	if err != nil || own.Trust == a.Trust || !bytes.Equal(own.Trust.Marshal(), a.Trust.Marshal()) {
		t.Fatalf("LoadCredentials parses its own copy: %v", err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "owner-a", TrustFile))
	if err := WriteFileAtomic(filepath.Join(dir, "owner-c", TrustFile), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "owner-a", TrustFile)); len(b) == 0 || !bytes.Equal(b, before) {
		t.Fatal("a node's new trust.json changed another node's")
	}
	os.Remove(filepath.Join(dir, "owner-c", TrustFile))
	c, err := l.Credentials(filepath.Join(dir, "owner-c"))
	if err != nil || c.Trust == a.Trust || len(c.Trust.Domains[0].Nodes) != 0 {
		t.Fatalf("a directory with only ca.pem: its own store without a roster: %v", err)
	}
}

// FuzzTrust: a trust store and a bundle as a node reads them from files it
// is given (trust.json, another organisation's bundle). Hostile bytes are
// refused with an error, never a panic; what is accepted re-encodes to a
// store that parses to the same, and verifies the certificates of its CAs'
// own issuing only for its listed roles.
func FuzzTrust(f *testing.F) {
	a := domainCA(f, "org-a")
	member := leaf(f, a, Identity{Role: RoleCSP, ID: "csp-1"})
	d := a.TrustEntry([]string{RoleCSP})
	d.Nodes = []Node{{ID: "spiffe://org-a/csp/csp-1", Key: KeyFingerprint(member)}}
	trust, err := NewTrust(d)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(trust.Marshal())
	f.Add(d.Bundle.Marshal())
	f.Add([]byte(`{"version":1,"domains":[]}`))
	f.Add([]byte(`{"trust_domain":"x","x509_authorities":["-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"]}`))
	f.Add([]byte(strings.Replace(string(trust.Marshal()), "org-a", "org-b", 1)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if tr, err := ParseTrust(b); err == nil {
			again, err := ParseTrust(tr.Marshal())
			if err != nil || string(again.Marshal()) != string(tr.Marshal()) {
				t.Fatalf("an accepted trust store does not round-trip: %v", err)
			}
			if id, err := tr.Verify(member); err == nil {
				dm, ok := tr.Domain(id.Domain())
				if !ok || !slices.Contains(dm.Roles, id.Role) {
					t.Fatalf("accepted %s under %+v", id, dm)
				}
				if k, ok := tr.Known(id); ok && k != KeyFingerprint(member) {
					t.Fatalf("accepted %s with a key its roster does not list", id)
				}
			}
		}
		if bd, err := ParseBundle(b); err == nil {
			if _, err := ParseBundle(bd.Marshal()); err != nil {
				t.Fatalf("an accepted bundle does not round-trip: %v", err)
			}
		}
	})
}
