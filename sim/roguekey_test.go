package sim

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/seal"
)

// commitAll starts a ceremony of n members csp-1..csp-n on every member
// given (members[i] at point i+1; nil: none there) and returns their signed
// commitments, as the proxy relays them. A member answers with a
// commitment, never its share.
func commitAll(ctx context.Context, t *testing.T, p he.Params, members []fedpcav1.CspServiceClient, cid string, seed []byte, n, threshold int) []*fedpcav1.MemberCommitment {
	t.Helper()
	refs := make([]*fedpcav1.MemberRef, n)
	for i := range refs {
		refs[i] = &fedpcav1.MemberRef{Id: CSPID(i), Point: uint32(i + 1)}
	}
	out := make([]*fedpcav1.MemberCommitment, len(members))
	for i, m := range members {
		if m == nil {
			continue
		}
		r, err := m.KeyGen(ctx, &fedpcav1.KeyGenRequest{CeremonyId: cid, Seed: seed, HeParams: p.ID(), Members: int32(n), Threshold: int32(threshold), Committee: refs})
		if err != nil {
			t.Fatalf("keygen on member %d: %v", i+1, err)
		}
		if len(r.GetKeyShareCommitment()) != 32 || proto.Size(r) > 4096 {
			t.Fatalf("member %d answered KeyGen with %d bytes, a %d-byte commitment", i+1, proto.Size(r), len(r.GetKeyShareCommitment()))
		}
		out[i] = &fedpcav1.MemberCommitment{Point: uint32(i + 1), Commitment: r.GetKeyShareCommitment(),
			Signature: r.GetKeyShareCommitmentSignature(), Certificate: r.GetCertificate()}
	}
	return out
}

// revealAll asks every member (members[i] at point i+1; nil: none there)
// for its share against the commitments and returns the opened shares as
// Finalize takes them, and decoded.
func revealAll(ctx context.Context, t *testing.T, p he.Params, members []fedpcav1.CspServiceClient, cid string, commitments []*fedpcav1.MemberCommitment) ([]*fedpcav1.MemberShare, []*he.PublicKeyShare) {
	t.Helper()
	opened := make([]*fedpcav1.MemberShare, len(members))
	shares := make([]*he.PublicKeyShare, len(members))
	for i, m := range members {
		if m == nil {
			continue
		}
		r, err := m.RevealKeyShare(ctx, &fedpcav1.RevealKeyShareRequest{CeremonyId: cid, Commitments: commitments})
		if err != nil {
			t.Fatalf("reveal on member %d: %v", i+1, err)
		}
		opened[i] = &fedpcav1.MemberShare{Point: uint32(i + 1), PublicKeyShare: r.GetPublicKeyShare(), Nonce: r.GetNonce()}
		if shares[i], err = p.Codecs().PublicKeyShare.Unmarshal(r.GetPublicKeyShare()); err != nil {
			t.Fatal(err)
		}
	}
	return opened, shares
}

// TestRogueKeyMember mounts the rogue-key attack of a member colluding with
// the proxy (docs/PROTOCOL.md, section 10): the proxy drives a ceremony of
// csp-1, csp-2 and csp-3 by hand while the rogue, with csp-2's certificate
// key, plays csp-2. It wants a committee key whose secret it knows: its
// share must be the target's minus the others', so it needs theirs first.
//
//   - Before committing it cannot get them: honest members reveal only
//     against a commitment for every point, each signed by the member at
//     that point for this ceremony and point (none missing, unsigned, signed
//     by the proxy, by another member, for another ceremony or point).
//   - Committed, it gets them, and its adaptive share does make the
//     aggregate the target key (the attack is real); but that share does not
//     open its commitment, and every honest member refuses to attest,
//     naming it; nor can it commit again, since a member reveals against
//     one set of commitments per ceremony.
//
// No member attests the rogue key, so no owner or user would accept it; the
// committee's own key is unchanged.
func TestRogueKeyMember(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: 3, Threshold: 3, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	p := cl.Params()
	members := memberClients(t, cl)
	honest := []fedpcav1.CspServiceClient{members[0], members[2]}
	before, err := members[0].GetStatus(ctx, &fedpcav1.GetStatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	const cid = "rogue-key"
	seed := bytes.Repeat([]byte{5}, 32)
	commits := commitAll(ctx, t, p, []fedpcav1.CspServiceClient{members[0], nil, members[2]}, cid, seed, 3, 3)
	// sign puts commitment at point 2, signed with creds' key for a ceremony
	// and point.
	sign := func(commitment []byte, creds string, ceremony string, point uint32) *fedpcav1.MemberCommitment {
		c := &fedpcav1.MemberCommitment{Point: 2, Commitment: commitment}
		cr := cl.Creds(creds)
		c.Signature, _ = seal.Sign(cr.Signer(), job.KeyCommitmentContext, job.KeyCommitmentMessage(ceremony, point, c.Commitment))
		c.Certificate = cr.Leaf.Raw
		return c
	}

	// Before committing: no honest member reveals.
	placeholder := bytes.Repeat([]byte{1}, 32)
	for _, tc := range []struct {
		what, msg string
		c2        *fedpcav1.MemberCommitment
	}{
		{"no commitment for csp-2", "2 for a committee of 3", nil},
		{"csp-2's commitment unsigned", "not signed by csp/csp-2", &fedpcav1.MemberCommitment{Point: 2, Commitment: placeholder}},
		{"signed by the proxy", "signed by spiffe://fedpca/proxy/proxy, expected csp/csp-2", sign(placeholder, "proxy/proxy", cid, 2)},
		{"csp-3's commitment at csp-2's point", "not signed by csp/csp-2", &fedpcav1.MemberCommitment{Point: 2, Commitment: commits[2].GetCommitment(),
			Signature: commits[2].GetSignature(), Certificate: commits[2].GetCertificate()}},
		{"signed by csp-2 for another ceremony", "not signed by csp/csp-2 for this ceremony", sign(placeholder, "csp/csp-2", "another", 2)},
		{"signed by csp-2 for another point", "not signed by csp/csp-2 for this ceremony", sign(placeholder, "csp/csp-2", cid, 3)},
	} {
		cs := []*fedpcav1.MemberCommitment{commits[0], commits[2]}
		if tc.c2 != nil {
			cs = []*fedpcav1.MemberCommitment{commits[0], tc.c2, commits[2]}
		}
		for i, m := range honest {
			r, err := m.RevealKeyShare(ctx, &fedpcav1.RevealKeyShareRequest{CeremonyId: cid, Commitments: cs})
			wantCode(t, fmt.Sprintf("%s (member %d)", tc.what, 2*i+1), err, codes.InvalidArgument, tc.msg)
			if len(r.GetPublicKeyShare()) > 0 {
				t.Fatalf("%s: member %d revealed its share", tc.what, 2*i+1)
			}
		}
	}

	// Committed (to a share made honestly, for all the rogue cares).
	decoy, err := he.NewMember(p, he.Committee{N: 3, Threshold: 3}, 2)
	if err != nil {
		t.Fatal(err)
	}
	decoyShare, err := decoy.PublicKeyShare(seed)
	if err != nil {
		t.Fatal(err)
	}
	nonce := bytes.Repeat([]byte{6}, job.NonceSize)
	c2 := sign(job.KeyShareCommitment(cid, 2, nonce, p.Codecs().PublicKeyShare.Marshal(decoyShare)), "csp/csp-2", cid, 2)
	all := []*fedpcav1.MemberCommitment{commits[0], c2, commits[2]}
	opened, shares := revealAll(ctx, t, p, []fedpcav1.CspServiceClient{members[0], nil, members[2]}, cid, all)
	// The adaptive share: the target's minus the others', so that the
	// aggregate is the target key, whose secret the rogue holds.
	target, err := he.NewMember(p, he.Committee{N: 1, Threshold: 1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	targetShare, err := target.PublicKeyShare(seed)
	if err != nil {
		t.Fatal(err)
	}
	adaptive := &he.PublicKeyShare{Value: p.RingQP().NewPoly()}
	p.RingQP().Sub(targetShare.Value, shares[0].Value, adaptive.Value)
	p.RingQP().Sub(adaptive.Value, shares[2].Value, adaptive.Value)
	rogueKey, err := he.AggregatePublicKey(p, seed, []*he.PublicKeyShare{shares[0], adaptive, shares[2]})
	if err != nil {
		t.Fatal(err)
	}
	targetKey, err := he.AggregatePublicKey(p, seed, []*he.PublicKeyShare{targetShare})
	if err != nil {
		t.Fatal(err)
	}
	rogueKeyBytes := p.Codecs().PublicKey.Marshal(rogueKey)
	if !bytes.Equal(rogueKeyBytes, p.Codecs().PublicKey.Marshal(targetKey)) {
		t.Fatal("the adaptive share does not make the aggregate the rogue's key: the test mounts no attack")
	}
	opened[1] = &fedpcav1.MemberShare{Point: 2, PublicKeyShare: p.Codecs().PublicKeyShare.Marshal(adaptive), Nonce: nonce}
	for _, i := range []int{0, 2} {
		_, err := members[i].Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: cid, CommitteePublicKey: rogueKeyBytes, Shares: opened})
		wantCode(t, fmt.Sprintf("member %d shown the adaptive share", i+1), err, codes.InvalidArgument, "the share at point 2 does not open csp/csp-2's commitment")
	}
	// Nor can it commit again to the adaptive share.
	again := sign(job.KeyShareCommitment(cid, 2, nonce, opened[1].GetPublicKeyShare()), "csp/csp-2", cid, 2)
	for _, i := range []int{0, 2} {
		_, err := members[i].RevealKeyShare(ctx, &fedpcav1.RevealKeyShareRequest{CeremonyId: cid, Commitments: []*fedpcav1.MemberCommitment{commits[0], again, commits[2]}})
		wantCode(t, fmt.Sprintf("member %d asked to reveal again against a new commitment", i+1), err, codes.FailedPrecondition, "already revealed its key share against other commitments")
	}
	for i, m := range members {
		st, err := m.GetStatus(ctx, &fedpcav1.GetStatusRequest{})
		if err != nil || st.GetCeremonyId() != before.GetCeremonyId() || st.GetCommitteeKeyFingerprint() != before.GetCommitteeKeyFingerprint() {
			t.Fatalf("member %d: %v %v, want the committee's own key (ceremony %s)", i+1, st, err, before.GetCeremonyId())
		}
	}
}
