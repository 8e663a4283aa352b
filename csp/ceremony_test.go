package csp

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
)

// TestKeyGenRepeated: a KeyGen request delivered twice (a retransmission
// after the proxy had the first answer) must get the same answer. It used
// to draw a second secret, so the member finalized a secret whose public
// share the proxy never aggregated, and every release under that committee
// key decrypted to garbage (found by the chaos suite's duplicated messages
// during the key ceremony; sim.TestCeremonyUnderDuplicates is the end to end
// check).
func TestKeyGenRepeated(t *testing.T) {
	c, err := openMember(t, t.TempDir())
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
	finishCeremony(t, c, req, first)
	secret := c.state.Secret
	if _, err := c.KeyGen(ctx, req); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("KeyGen of a finished ceremony: %v", err)
	}
	if c.cer != nil || !reflect.DeepEqual(c.state.Secret, secret) {
		t.Fatal("a late KeyGen changed the member's state")
	}
}

// finishCeremony runs the rest of a one-member ceremony that KeyGen (req,
// answered first) started: the reveal, then Finalize with the key.
func finishCeremony(t *testing.T, c *CSP, req *fedpcav1.KeyGenRequest, first *fedpcav1.KeyGenResponse) {
	t.Helper()
	ctx := context.Background()
	r, err := c.RevealKeyShare(ctx, &fedpcav1.RevealKeyShareRequest{CeremonyId: req.GetCeremonyId(),
		Commitments: []*fedpcav1.MemberCommitment{{Point: 1, Commitment: first.GetKeyShareCommitment()}}})
	if err != nil {
		t.Fatal(err)
	}
	share, err := c.params.Codecs().PublicKeyShare.Unmarshal(r.GetPublicKeyShare())
	if err != nil {
		t.Fatal(err)
	}
	pk, err := he.AggregatePublicKey(c.params, req.GetSeed(), []*he.PublicKeyShare{share})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: req.GetCeremonyId(), CommitteePublicKey: c.params.Codecs().PublicKey.Marshal(pk),
		Shares: []*fedpcav1.MemberShare{{Point: 1, PublicKeyShare: r.GetPublicKeyShare(), Nonce: r.GetNonce()}}}); err != nil {
		t.Fatal(err)
	}
}

// TestCommitThenReveal: a member answers KeyGen with a commitment, never
// its share; it reveals the share only given a commitment for every point
// (its own the one it made), once per ceremony (a second reveal against
// other commitments is refused, a replay gets the same answer); the share
// opens its commitment; Finalize before the reveal, or with a share that
// does not open its commitment, is refused and attests nothing.
func TestCommitThenReveal(t *testing.T) {
	c, err := openMember(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	refs := []*fedpcav1.MemberRef{{Id: "csp-1", Point: 1}, {Id: "csp-2", Point: 2}}
	req := &fedpcav1.KeyGenRequest{CeremonyId: "c1", Seed: make([]byte, 32), HeParams: c.params.ID(), Members: 2, Threshold: 2, Committee: refs}
	k, err := c.KeyGen(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(k.GetKeyShareCommitment()) != 32 || proto.Size(k) > 1024 {
		t.Fatalf("KeyGen answered %d bytes with a %d-byte commitment: the share must wait for the reveal", proto.Size(k), len(k.GetKeyShareCommitment()))
	}
	other := bytes.Repeat([]byte{2}, 32)
	mine := &fedpcav1.MemberCommitment{Point: 1, Commitment: k.GetKeyShareCommitment()}
	reveal := func(cs ...*fedpcav1.MemberCommitment) (*fedpcav1.RevealKeyShareResponse, error) {
		return c.RevealKeyShare(ctx, &fedpcav1.RevealKeyShareRequest{CeremonyId: "c1", Commitments: cs})
	}
	want := func(what string, err error, code codes.Code, msg string) {
		t.Helper()
		if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
			t.Errorf("%s: %v, want %v containing %q", what, err, code, msg)
		}
	}
	_, err = c.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: "c1"})
	want("finalize before the reveal", err, codes.FailedPrecondition, "has not revealed its key share")
	_, err = reveal(mine)
	want("a reveal before every commitment is in", err, codes.InvalidArgument, "1 for a committee of 2")
	_, err = reveal(mine, &fedpcav1.MemberCommitment{Point: 1, Commitment: other})
	want("two commitments at one point", err, codes.InvalidArgument, "point 1: out of range or repeated")
	_, err = reveal(&fedpcav1.MemberCommitment{Point: 1, Commitment: other}, &fedpcav1.MemberCommitment{Point: 2, Commitment: other})
	want("another commitment in this member's place", err, codes.InvalidArgument, "is not the one it made")
	_, err = reveal(mine, &fedpcav1.MemberCommitment{Point: 2, Commitment: other[:31]})
	want("a short commitment", err, codes.InvalidArgument, "31 bytes")
	r, err := reveal(mine, &fedpcav1.MemberCommitment{Point: 2, Commitment: other})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(job.KeyShareCommitment("c1", 1, r.GetNonce(), r.GetPublicKeyShare()), k.GetKeyShareCommitment()) {
		t.Fatal("the revealed share does not open the member's commitment")
	}
	if again, err := reveal(mine, &fedpcav1.MemberCommitment{Point: 2, Commitment: other}); err != nil || !proto.Equal(again, r) {
		t.Fatalf("a replayed reveal: %v", err)
	}
	changed := bytes.Repeat([]byte{3}, 32)
	_, err = reveal(mine, &fedpcav1.MemberCommitment{Point: 2, Commitment: changed})
	want("a second reveal against another commitment of member 2", err, codes.FailedPrecondition, "already revealed its key share against other commitments")

	// Member 2's share does not open the commitment this member holds.
	sh2, err := c.params.Codecs().PublicKeyShare.Unmarshal(r.GetPublicKeyShare())
	if err != nil {
		t.Fatal(err)
	}
	sh1, _ := c.params.Codecs().PublicKeyShare.Unmarshal(r.GetPublicKeyShare())
	pk, err := he.AggregatePublicKey(c.params, req.GetSeed(), []*he.PublicKeyShare{sh1, sh2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: "c1", CommitteePublicKey: c.params.Codecs().PublicKey.Marshal(pk), Shares: []*fedpcav1.MemberShare{
		{Point: 1, PublicKeyShare: r.GetPublicKeyShare(), Nonce: r.GetNonce()}, {Point: 2, PublicKeyShare: r.GetPublicKeyShare(), Nonce: r.GetNonce()}}})
	want("a share that does not open its commitment", err, codes.InvalidArgument, "the share at point 2 does not open csp/csp-2's commitment")
	if c.state != nil {
		t.Fatal("the member attested a key")
	}
}
