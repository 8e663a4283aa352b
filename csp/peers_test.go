package csp

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/transport/transporttest"
)

// TestMemberPinsPeers: a member that pins its committee by key (csp serve
// --committee) reveals its share against signed commitments of exactly
// those keys, and refuses a ceremony in which a pinned member's place is
// taken by a certificate of its name and another key (which whoever holds
// the CA could issue), naming both keys. The keys it verified are the ones
// it attests.
func TestMemberPinsPeers(t *testing.T) {
	ca, err := transport.NewCA("peers CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	one := transporttest.Credentials(t, ca, transport.Identity{Role: transport.RoleCSP, ID: "csp-1"})
	two := transporttest.Credentials(t, ca, transport.Identity{Role: transport.RoleCSP, ID: "csp-2"})
	forged := transporttest.Credentials(t, ca, transport.Identity{Role: transport.RoleCSP, ID: "csp-2"})
	member := func(cr *transport.Credentials, peers []job.MemberPin) *CSP {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		c, err := New(Config{ID: cr.Identity.ID, Listener: l, Creds: cr, Store: t.TempDir(), Peers: peers})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	pins := []job.MemberPin{{ID: "csp-1", Key: one.Key}, {ID: "csp-2", Key: two.Key}}
	ctx := context.Background()
	for _, c := range []struct {
		what   string
		second *transport.Credentials
		refuse string
	}{
		{"the pinned committee", two, ""},
		{"csp-2's name with another key", forged, "csp/csp-2 presents key " + forged.Key + ", not the pinned key " + two.Key},
	} {
		m1, m2 := member(one, pins), member(c.second, nil)
		refs := []*fedpcav1.MemberRef{{Id: "csp-1", Point: 1}, {Id: "csp-2", Point: 2}}
		req := &fedpcav1.KeyGenRequest{CeremonyId: "c1", Seed: make([]byte, 32), HeParams: m1.params.ID(), Members: 2, Threshold: 2, Committee: refs}
		var commitments []*fedpcav1.MemberCommitment
		for i, m := range []*CSP{m1, m2} {
			k, err := m.KeyGen(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			commitments = append(commitments, &fedpcav1.MemberCommitment{Point: uint32(i + 1), Commitment: k.GetKeyShareCommitment(),
				Signature: k.GetKeyShareCommitmentSignature(), Certificate: k.GetCertificate()})
		}
		_, err := m1.RevealKeyShare(ctx, &fedpcav1.RevealKeyShareRequest{CeremonyId: "c1", Commitments: commitments})
		switch {
		case c.refuse == "" && err != nil:
			t.Errorf("%s: %v", c.what, err)
		case c.refuse == "" && (m1.cer.memberKeys[0] != one.Key || m1.cer.memberKeys[1] != two.Key):
			t.Errorf("%s: the member holds keys %v", c.what, m1.cer.memberKeys)
		case c.refuse != "" && (status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.refuse)):
			t.Errorf("%s: %v, want InvalidArgument containing %q", c.what, err, c.refuse)
		}
	}
}
