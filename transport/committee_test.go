package transport_test

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/transport/transporttest"
)

// attestedCommittee returns the credentials of an owner and a committee
// response of 3 members (threshold 2) that every member attested, with a
// stand-in key (VerifyCommittee never parses it).
func attestedCommittee(tb testing.TB) (*transport.Credentials, *fedpcav1.GetCommitteeResponse, *transport.Credentials) {
	ca, err := transport.NewCA("test CA", time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	key := []byte("the committee public key's bytes")
	resp := &fedpcav1.GetCommitteeResponse{HeParams: "bgv", HeParamsHash: job.Fingerprint([]byte("params")), Members: 3, Threshold: 2,
		PublicKey: key, PublicKeyFingerprint: job.Fingerprint(key), CeremonyId: "c1"}
	st := job.KeyStatement{Ceremony: "c1", HEParams: resp.HeParamsHash, Threshold: 2, Members: []string{"csp-1", "csp-2", "csp-3"}, Key: resp.PublicKeyFingerprint}
	for i, id := range st.Members {
		creds := transporttest.Credentials(tb, ca, transport.Identity{Role: transport.RoleCSP, ID: id})
		a, err := transport.Attest(creds, id, uint32(i+1), st)
		if err != nil {
			tb.Fatal(err)
		}
		resp.Attestations = append(resp.Attestations, a)
	}
	owner := transporttest.Credentials(tb, ca, transport.Identity{Role: transport.RoleOwner, ID: "hospital-a"})
	proxy := transporttest.Credentials(tb, ca, transport.Identity{Role: transport.RoleProxy, ID: "proxy"})
	return owner, resp, proxy
}

// TestVerifyCommittee: a key attested by every member verifies; a key that
// is not the one attested, a missing, repeated or re-signed attestation, a
// statement that differs in any field, another committee than the pinned
// one: each is ErrKeyNotAttested.
func TestVerifyCommittee(t *testing.T) {
	owner, good, proxy := attestedCommittee(t)
	if st, err := transport.VerifyCommittee(owner, good, nil); err != nil || st.Key != good.PublicKeyFingerprint {
		t.Fatalf("honest committee: %v", err)
	}
	if _, err := transport.VerifyCommittee(owner, good, []string{"csp-3", "csp-1", "csp-2"}); err != nil {
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
		if _, err := transport.VerifyCommittee(owner, r, nil); !errors.Is(err, transport.ErrKeyNotAttested) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := transport.VerifyCommittee(owner, good, []string{"csp-1", "csp-2", "csp-4"}); !errors.Is(err, transport.ErrKeyNotAttested) {
		t.Errorf("another committee than the pinned one: %v", err)
	}
}

// FuzzVerifyCommittee: what the proxy says about the committee key, as an
// owner or user decodes it. Nothing panics, and a response that verifies
// has one attestation per member, a key whose fingerprint is the one
// attested, and every signature from the member it names.
func FuzzVerifyCommittee(f *testing.F) {
	owner, good, _ := attestedCommittee(f)
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
		st, err := transport.VerifyCommittee(owner, &r, nil)
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
			if err := transport.VerifyMemberSignature(owner, a.GetMember(), a.GetCertificate(), job.AttestationContext, st.Bytes(), a.GetSignature()); err != nil {
				t.Fatalf("accepted an attestation that does not verify: %v", err)
			}
		}
	})
}
