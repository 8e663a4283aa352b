package transport_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/transport/transporttest"
)

// committee is a test committee: an owner's and the proxy's credentials
// (all from one CA), the CA, and a committee response that every member
// attested, with a stand-in key (VerifyCommittee never parses it), and the
// pins of its members.
type committee struct {
	ca           *transport.CA
	owner, proxy *transport.Credentials
	resp         *fedpcav1.GetCommitteeResponse
	pins         []job.MemberPin
}

// attestedCommittee is a committee of 3 members, threshold 2.
func attestedCommittee(tb testing.TB) committee { return attestedCommitteeOf(tb, 3, 2) }

// attestedCommitteeOf is a committee of n members csp-1..csp-n and
// threshold t.
func attestedCommitteeOf(tb testing.TB, n, t int) committee {
	ca, err := transport.NewCA("test CA", time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	key := []byte("the committee public key's bytes")
	resp := &fedpcav1.GetCommitteeResponse{HeParams: "bgv", HeParamsHash: job.Fingerprint([]byte("params")), Members: int32(n), Threshold: int32(t),
		PublicKey: key, PublicKeyFingerprint: job.Fingerprint(key), CeremonyId: "c1"}
	st := job.KeyStatement{Ceremony: "c1", HEParams: resp.HeParamsHash, Threshold: t, Key: resp.PublicKeyFingerprint}
	var members []*transport.Credentials
	var pins []job.MemberPin
	for i := range n {
		id := fmt.Sprintf("csp-%d", i+1)
		creds := transporttest.Credentials(tb, ca, transport.Identity{Role: transport.RoleCSP, ID: id})
		members = append(members, creds)
		st.Members, st.MemberKeys = append(st.Members, id), append(st.MemberKeys, creds.Key)
		pins = append(pins, job.MemberPin{ID: id, Key: creds.Key})
	}
	for i, creds := range members {
		a, err := transport.Attest(creds, st.Members[i], uint32(i+1), st)
		if err != nil {
			tb.Fatal(err)
		}
		resp.Attestations = append(resp.Attestations, a)
	}
	return committee{ca: ca, resp: resp, pins: pins,
		owner: transporttest.Credentials(tb, ca, transport.Identity{Role: transport.RoleOwner, ID: "hospital-a"}),
		proxy: transporttest.Credentials(tb, ca, transport.Identity{Role: transport.RoleProxy, ID: "proxy"})}
}

// anyCommittee accepts any committee of the default size that every member
// attested.
var anyCommittee = job.CommitteePolicy{AnyMembers: true}

// TestVerifyCommittee: a key attested by every member verifies; a key that
// is not the one attested, a missing, repeated or re-signed attestation, a
// statement that differs in any field: each is ErrKeyNotAttested; another
// committee than the pinned one is refused by the committee policy.
func TestVerifyCommittee(t *testing.T) {
	c := attestedCommittee(t)
	owner, good, proxy := c.owner, c.resp, c.proxy
	if st, err := transport.VerifyCommittee(owner, good, anyCommittee); err != nil || st.Key != good.PublicKeyFingerprint {
		t.Fatalf("honest committee: %v", err)
	}
	if _, err := transport.VerifyCommittee(owner, good, job.CommitteePolicy{Members: []job.MemberPin{c.pins[2], c.pins[0], c.pins[1]}}); err != nil {
		t.Fatalf("pinned committee: %v", err)
	}
	for name, mutate := range map[string]func(r *fedpcav1.GetCommitteeResponse){
		"another key": func(r *fedpcav1.GetCommitteeResponse) { r.PublicKey = []byte("the proxy's key") },
		"another key and print": func(r *fedpcav1.GetCommitteeResponse) {
			r.PublicKey = []byte("x")
			r.PublicKeyFingerprint = job.Fingerprint([]byte("x"))
		},
		"one attestation less":   func(r *fedpcav1.GetCommitteeResponse) { r.Attestations = r.Attestations[:2] },
		"no attestations":        func(r *fedpcav1.GetCommitteeResponse) { r.Attestations = nil },
		"a repeated attestation": func(r *fedpcav1.GetCommitteeResponse) { r.Attestations[2] = r.Attestations[1] },
		"members relabelled":     func(r *fedpcav1.GetCommitteeResponse) { r.Attestations[0].Member = "csp-9" },
		"points swapped": func(r *fedpcav1.GetCommitteeResponse) {
			r.Attestations[0].Point, r.Attestations[1].Point = 2, 1
		},
		"another ceremony":  func(r *fedpcav1.GetCommitteeResponse) { r.CeremonyId = "c2" },
		"another threshold": func(r *fedpcav1.GetCommitteeResponse) { r.Threshold = 3 },
		"other parameters":  func(r *fedpcav1.GetCommitteeResponse) { r.HeParamsHash = job.Fingerprint(nil) },
		"a member's cert swapped": func(r *fedpcav1.GetCommitteeResponse) {
			r.Attestations[0].Certificate = r.Attestations[1].Certificate
		},
		"signed by the proxy": func(r *fedpcav1.GetCommitteeResponse) {
			st, _ := transport.CommitteeStatement(r)
			a, _ := transport.Attest(proxy, "csp-1", 1, st)
			r.Attestations[0].Certificate, r.Attestations[0].Signature = a.Certificate, a.Signature
		},
	} {
		r := proto.Clone(good).(*fedpcav1.GetCommitteeResponse)
		mutate(r)
		if _, err := transport.VerifyCommittee(owner, r, anyCommittee); !errors.Is(err, transport.ErrKeyNotAttested) {
			t.Errorf("%s: %v", name, err)
		}
	}
	other := transporttest.Credentials(t, c.ca, transport.Identity{Role: transport.RoleCSP, ID: "csp-4"})
	_, err := transport.VerifyCommittee(owner, good, job.CommitteePolicy{Members: []job.MemberPin{c.pins[0], c.pins[1], {ID: "csp-4", Key: other.Key}}})
	if !errors.Is(err, job.ErrCommitteePolicy) || !strings.Contains(err.Error(), "no member of the committee holds the pinned csp/csp-4 (key "+other.Key+")") ||
		!strings.Contains(err.Error(), "csp/csp-3 (key "+c.pins[2].Key+")") {
		t.Errorf("another committee than the pinned one: %v", err)
	}
	if _, err := transport.VerifyCommittee(owner, good, job.CommitteePolicy{Members: job.PinNames("csp-1", "csp-2", "csp-3")}); !errors.Is(err, job.ErrCommitteePolicy) ||
		!strings.Contains(err.Error(), "pins members by key") {
		t.Errorf("a pin by name only, with certificates: %v", err)
	}
}

// TestCommitteePinnedByKey: whoever holds the CA (here the deployment's
// own, as in the single-CA layout) issues csp/csp-1..3 certificates with
// fresh keys and attests a committee of its own: every signature chains to
// the CA and names the right member, and a node that pins the members by
// key refuses it, naming the key it pinned and the one it got.
func TestCommitteePinnedByKey(t *testing.T) {
	honest := attestedCommittee(t)
	forged := attestedCommittee(t)
	// The forged committee is of the same CA as the owner's.
	forged.resp.Attestations = nil
	st, _ := transport.CommitteeStatement(honest.resp)
	st.MemberKeys = nil
	var fresh []*transport.Credentials
	for _, id := range st.Members {
		cr := transporttest.Credentials(t, honest.ca, transport.Identity{Role: transport.RoleCSP, ID: id})
		fresh = append(fresh, cr)
		st.MemberKeys = append(st.MemberKeys, cr.Key)
	}
	for i, cr := range fresh {
		a, _ := transport.Attest(cr, st.Members[i], uint32(i+1), st)
		forged.resp.Attestations = append(forged.resp.Attestations, a)
	}
	forged.resp.CeremonyId = honest.resp.CeremonyId
	if _, err := transport.VerifyCommittee(honest.owner, forged.resp, anyCommittee); err != nil {
		t.Fatalf("the forged committee is well attested by certificates of the deployment's CA: %v", err)
	}
	_, err := transport.VerifyCommittee(honest.owner, forged.resp, job.CommitteePolicy{Members: honest.pins})
	var pe *job.PinError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "csp/csp-1 presents key "+fresh[0].Key+", not the pinned key "+honest.pins[0].Key) {
		t.Errorf("forged committee under key pins: %v", err)
	}
	// A roster that knows the members by key refuses the certificates
	// themselves.
	trust, err := transport.NewTrust(transport.Domain{Bundle: transport.Bundle{Name: transport.TrustDomain, Authorities: []string{string(honest.ca.CertPEM())},
		Nodes: []transport.Node{{ID: "spiffe://fedpca/csp/csp-1", Key: honest.pins[0].Key}}}, Roles: transport.Roles})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := trust.Verify(fresh[0].Leaf); err == nil || !strings.Contains(err.Error(), "presents key "+fresh[0].Key) || !strings.Contains(err.Error(), "by key "+honest.pins[0].Key) {
		t.Errorf("a roster's member with another key: %v", err)
	}
}

// TestCommitteePolicy: committees of 1 of 1, 2 of 2 and 1 of 3 members,
// every member's attestation valid, are refused by the default policy,
// pinned or not, naming the committee, the minimums and the flags that
// lower them; lowered to their shape, the policy accepts them. A policy
// that pins nothing (without AnyMembers), or pins fewer members than its
// minimum, is refused when the node starts.
func TestCommitteePolicy(t *testing.T) {
	for _, c := range []struct{ n, t int }{{1, 1}, {2, 2}, {3, 1}} {
		cm := attestedCommitteeOf(t, c.n, c.t)
		owner, r := cm.owner, cm.resp
		var ids []string
		for i := range c.n {
			ids = append(ids, fmt.Sprintf("csp-%d", i+1))
		}
		for _, p := range []job.CommitteePolicy{anyCommittee, {Members: cm.pins}} {
			_, err := transport.VerifyCommittee(owner, r, p)
			want := fmt.Sprintf("the committee is %d-of-%d (csp/%s), and this node requires at least 3 members with a threshold of at least 2", c.t, c.n, strings.Join(ids, ", csp/"))
			flags := fmt.Sprintf("--committee-min-members %d --committee-min-threshold %d", c.n, c.t)
			if !errors.Is(err, job.ErrCommitteePolicy) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), flags) {
				t.Errorf("%d-of-%d under %v: %v", c.t, c.n, p, err)
			}
			p.MinMembers, p.MinThreshold = c.n, c.t
			_, err = transport.VerifyCommittee(owner, r, p)
			if minority := 2*c.t <= c.n; minority {
				want := fmt.Sprintf("the committee is %d-of-%d (csp/%s): with a threshold of half the members or fewer, two disjoint sets", c.t, c.n, strings.Join(ids, ", csp/"))
				if !errors.Is(err, job.ErrCommitteePolicy) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--committee-allow-minority-threshold") {
					t.Errorf("%d-of-%d under a policy lowered to it, minority not allowed: %v", c.t, c.n, err)
				}
				p.AllowMinorityThreshold = true
				_, err = transport.VerifyCommittee(owner, r, p)
			}
			if err != nil {
				t.Errorf("%d-of-%d under a policy lowered to it: %v", c.t, c.n, err)
			}
		}
	}
	// 2 of 4 meets the minimums, but two disjoint pairs could each switch a
	// job: refused unless allowed.
	cm := attestedCommitteeOf(t, 4, 2)
	if _, err := transport.VerifyCommittee(cm.owner, cm.resp, job.CommitteePolicy{Members: cm.pins}); !errors.Is(err, job.ErrCommitteePolicy) || !strings.Contains(err.Error(), "two disjoint sets of 2 members") {
		t.Errorf("2-of-4: %v", err)
	}
	if _, err := transport.VerifyCommittee(cm.owner, cm.resp, job.CommitteePolicy{Members: cm.pins, AllowMinorityThreshold: true}); err != nil {
		t.Errorf("2-of-4 allowed: %v", err)
	}
	for _, c := range []struct {
		p   job.CommitteePolicy
		msg string
	}{
		{job.CommitteePolicy{}, "no committee pinned: name the CSP members this node trusts with --committee"},
		{job.CommitteePolicy{MinMembers: 1, MinThreshold: 1}, "no committee pinned"},
		{job.CommitteePolicy{Members: job.PinNames("csp-1")}, "--committee names one member, below this node's minimum committee of 3 (--committee-min-members"},
		{job.CommitteePolicy{Members: job.PinNames("csp-1", "csp-1", "csp-2")}, `pins csp/csp-1 twice`},
		{job.CommitteePolicy{Members: []job.MemberPin{{ID: "csp-1", Key: job.Fingerprint(nil)}, {ID: "csp-2", Key: job.Fingerprint(nil)}, {ID: "csp-3"}}}, `pins csp/csp-2 (key ` + job.Fingerprint(nil) + `) twice`},
		{job.CommitteePolicy{Members: []job.MemberPin{{ID: "csp-1", Key: "abc"}, {ID: "csp-2"}, {ID: "csp-3"}}}, `csp-1: key "abc" is not a 64-hex-digit fingerprint`},
		{job.CommitteePolicy{Members: job.PinNames("csp-1", "csp-2", "csp-3"), AnyMembers: true}, "--committee and --any-committee together"},
		{job.CommitteePolicy{AnyMembers: true, MinMembers: 1}, "a threshold of at least 2 needs at least 2 members, not 1"},
		{job.CommitteePolicy{AnyMembers: true, MinMembers: -1}, "want 1 to 64"},
	} {
		if err := c.p.Validate(); !errors.Is(err, job.ErrCommitteePolicy) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("policy %+v: %v, want %q", c.p, err, c.msg)
		}
	}
	for _, p := range []job.CommitteePolicy{anyCommittee, {Members: job.PinNames("csp-1", "csp-2", "csp-3")}, {AnyMembers: true, MinMembers: 1, MinThreshold: 1}} {
		if err := p.Validate(); err != nil {
			t.Errorf("policy %+v: %v", p, err)
		}
	}
}

// FuzzVerifyCommittee: what the proxy says about the committee key, as an
// owner or user decodes it. Nothing panics, and a response that verifies
// has one attestation per member, a key whose fingerprint is the one
// attested, and every signature from the member it names.
func FuzzVerifyCommittee(f *testing.F) {
	c := attestedCommittee(f)
	owner, good := c.owner, c.resp
	b, _ := proto.Marshal(good)
	f.Add(b)
	bad := proto.Clone(good).(*fedpcav1.GetCommitteeResponse)
	bad.Attestations = bad.Attestations[1:]
	b, _ = proto.Marshal(bad)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var r fedpcav1.GetCommitteeResponse
		if proto.Unmarshal(b, &r) != nil {
			return
		}
		st, err := transport.VerifyCommittee(owner, &r, job.CommitteePolicy{AnyMembers: true, MinMembers: 1, MinThreshold: 1, AllowMinorityThreshold: true})
		if err != nil {
			if !errors.Is(err, transport.ErrKeyNotAttested) {
				t.Fatalf("error not marked as unattested: %v", err)
			}
			return
		}
		if st.Key != job.Fingerprint(r.GetPublicKey()) || len(st.Members) != int(r.GetMembers()) || len(r.GetAttestations()) != len(st.Members) {
			t.Fatalf("accepted %+v for a key %s with %d attestations", st, job.Fingerprint(r.GetPublicKey()), len(r.GetAttestations()))
		}
		for _, a := range r.GetAttestations() {
			if _, err := transport.VerifyMemberSignature(owner, a.GetMember(), st.MemberKey(a.GetPoint()), a.GetCertificate(), job.AttestationContext, st.Bytes(), a.GetSignature()); err != nil {
				t.Fatalf("accepted an attestation that does not verify: %v", err)
			}
		}
	})
}

// TestCommitteeDistinctDomains: a committee whose members' certificates
// come from three organisations' CAs passes a policy that requires each
// member of its own trust domain; one where an organisation runs two
// members is refused by it (and accepted without it), naming both members
// and the domain.
func TestCommitteeDistinctDomains(t *testing.T) {
	for _, c := range []struct {
		domains []string
		refused string
	}{
		{[]string{"op-1", "op-2", "op-3"}, ""},
		{[]string{"op-1", "op-2", "op-1"}, "csp/csp-1 and csp/csp-3 are both of trust domain op-1"},
	} {
		cas := map[string]*transport.CA{}
		var domains []transport.Domain
		for _, d := range c.domains {
			if cas[d] == nil {
				ca, err := transport.NewDomainCA(d, time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				cas[d] = ca
				domains = append(domains, ca.TrustEntry([]string{transport.RoleCSP}))
			}
		}
		hosp, err := transport.NewDomainCA("hospital-a", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		trust, err := transport.NewTrust(append(domains, hosp.TrustEntry(transport.Roles))...)
		if err != nil {
			t.Fatal(err)
		}
		certPEM, keyPEM, err := hosp.Issue(transport.Identity{Role: transport.RoleOwner, ID: "hospital-a"}, nil, nil, nil, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pair, _ := tls.X509KeyPair(certPEM, keyPEM)
		owner, err := transport.NewCredentialsTrust(trust, pair)
		if err != nil {
			t.Fatal(err)
		}
		key := []byte("the committee public key's bytes")
		resp := &fedpcav1.GetCommitteeResponse{HeParams: "bgv", HeParamsHash: job.Fingerprint([]byte("params")), Members: 3, Threshold: 2,
			PublicKey: key, PublicKeyFingerprint: job.Fingerprint(key), CeremonyId: "c1"}
		st := job.KeyStatement{Ceremony: "c1", HEParams: resp.HeParamsHash, Threshold: 2, Key: resp.PublicKeyFingerprint}
		var members []*transport.Credentials
		for i, d := range c.domains {
			id := fmt.Sprintf("csp-%d", i+1)
			cr := transporttest.Credentials(t, cas[d], transport.Identity{Role: transport.RoleCSP, ID: id})
			members = append(members, cr)
			st.Members, st.MemberKeys = append(st.Members, id), append(st.MemberKeys, cr.Key)
		}
		for i, cr := range members {
			a, err := transport.Attest(cr, st.Members[i], uint32(i+1), st)
			if err != nil {
				t.Fatal(err)
			}
			resp.Attestations = append(resp.Attestations, a)
		}
		policy := job.CommitteePolicy{AnyMembers: true, DistinctDomains: true}
		_, err = transport.VerifyCommittee(owner, resp, policy)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%v: %v", c.domains, err)
		case c.refused != "" && (!errors.Is(err, job.ErrCommitteePolicy) || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%v: %v, want %q", c.domains, err, c.refused)
		}
		policy.DistinctDomains = false
		if _, err := transport.VerifyCommittee(owner, resp, policy); err != nil {
			t.Errorf("%v without the policy: %v", c.domains, err)
		}
	}
}
