package csp

import (
	"context"
	"net"
	"reflect"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
)

// TestKeyGenRepeated: a KeyGen request delivered twice (a retransmission
// after the proxy had the first answer) must get the same answer. It used
// to draw a second secret, so the member finalized a secret whose public
// share the proxy never aggregated, and every release under that committee
// key decrypted to garbage (found by the chaos suite's duplicated messages
// during the key ceremony; sim.TestCeremonyUnderDuplicates is the end to end
// check).
func TestKeyGenRepeated(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := New(Config{ID: "csp-1", Listener: l, Insecure: true, Store: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	req := &fedpcav1.KeyGenRequest{CeremonyId: "c1", Seed: make([]byte, 32), HeParams: c.params.ID(), Members: 1, Threshold: 1,
		Committee: []*fedpcav1.MemberRef{{Id: "csp-1", Point: 1}}}
	ctx := context.Background()
	first, err := c.KeyGen(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.KeyGen(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(first, again) {
		t.Fatal("a repeated KeyGen drew a new secret")
	}
	other := proto.Clone(req).(*fedpcav1.KeyGenRequest)
	other.Seed[0] = 1
	if _, err := c.KeyGen(ctx, other); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("another request for the same ceremony: %v", err)
	}
	// After the ceremony, a late copy of its KeyGen is refused and changes
	// nothing.
	share, err := c.params.Codecs().PublicKeyShare.Unmarshal(first.GetPublicKeyShare())
	if err != nil {
		t.Fatal(err)
	}
	pk, err := he.AggregatePublicKey(c.params, req.Seed, []*he.PublicKeyShare{share})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: "c1", CommitteePublicKey: c.params.Codecs().PublicKey.Marshal(pk),
		Shares: []*fedpcav1.MemberShare{{Point: 1, PublicKeyShare: first.GetPublicKeyShare()}}}); err != nil {
		t.Fatal(err)
	}
	secret := c.state.Secret
	if _, err := c.KeyGen(ctx, req); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("KeyGen of a finished ceremony: %v", err)
	}
	if c.cer != nil || !reflect.DeepEqual(c.state.Secret, secret) {
		t.Fatal("a late KeyGen changed the member's state")
	}
}
