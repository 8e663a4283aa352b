package sim

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/fedpca/fedpca/csp"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// TestReplayedAndReorderedCeremony drives CSP members by hand with the
// proxy's certificate, after the committee key was made: every round of the
// finished ceremony replayed, the rounds of a new ceremony out of order and
// replayed, an exchange key certified for the wrong role, shares addressed
// to another member, and a key switch asked of a member that never had a
// ceremony. Each gets the right code and a message naming the problem;
// replays of a round get the original answer. The committee key is
// unchanged: a job then completes and its release is exactly the sum of the
// owners' statistics. Once a member has switched a job it refuses any new
// ceremony.
func TestReplayedAndReorderedCeremony(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:2]
	cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: 3, Threshold: 2, Owners: owners, Users: []string{"alice"},
		Identities: []string{"owner/eve", "csp/csp-9"}, AllowNoNoise: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	members := memberClients(t, cl)
	m1 := members[0]
	st, err := m1.GetStatus(ctx, &fedpcav1.GetStatusRequest{IncludePublicKey: true})
	if err != nil || !st.GetReady() {
		t.Fatalf("member status: %v %v", st, err)
	}
	cid, cpk := st.GetCeremonyId(), st.GetCommitteePublicKey()
	refs := []*fedpcav1.MemberRef{{Id: "csp-1", Point: 1}, {Id: "csp-2", Point: 2}, {Id: "csp-3", Point: 3}}
	seed := bytes.Repeat([]byte{7}, 32)
	keyGen := func(id string, seed []byte) *fedpcav1.KeyGenRequest {
		return &fedpcav1.KeyGenRequest{CeremonyId: id, Seed: seed, HeParams: cl.Params().ID(), Members: 3, Threshold: 2, Committee: refs}
	}

	// Every round of the finished ceremony replayed.
	_, err = m1.KeyGen(ctx, keyGen(cid, seed))
	wantCode(t, "finished ceremony: keygen replayed", err, codes.FailedPrecondition, "is finished on this member")
	_, err = m1.DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: cid})
	wantCode(t, "finished ceremony: deal replayed", err, codes.FailedPrecondition, "no ceremony \""+cid+"\" in progress")
	_, err = m1.ReceiveShares(ctx, &fedpcav1.ReceiveSharesRequest{CeremonyId: cid})
	wantCode(t, "finished ceremony: receive replayed", err, codes.FailedPrecondition, "no ceremony \""+cid+"\" in progress")
	_, err = m1.RevealKeyShare(ctx, &fedpcav1.RevealKeyShareRequest{CeremonyId: cid})
	wantCode(t, "finished ceremony: reveal replayed", err, codes.FailedPrecondition, "no ceremony \""+cid+"\" in progress")
	if r, err := m1.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: cid, CommitteePublicKey: cpk}); err != nil || r.GetCommitteeKeyFingerprint() != st.GetCommitteeKeyFingerprint() {
		t.Fatalf("finalize replayed: %v %v", r, err)
	}
	otherKey := cl.Params().Codecs().PublicKey.Marshal(he.GenerateKeyPair(cl.Params()).Public)
	_, err = m1.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: cid, CommitteePublicKey: otherKey})
	wantCode(t, "finalize replayed with another key", err, codes.FailedPrecondition, "was finalized with another committee key")

	// A new ceremony, its rounds out of order and replayed.
	const rogue = "rogue"
	_, err = m1.DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: rogue})
	wantCode(t, "deal before keygen", err, codes.FailedPrecondition, `no ceremony "rogue" in progress`)
	k1, err := m1.KeyGen(ctx, keyGen(rogue, seed))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := m1.KeyGen(ctx, keyGen(rogue, seed)); err != nil || !proto.Equal(again, k1) {
		t.Fatalf("keygen replayed: %v, same answer %v", err, err == nil && proto.Equal(again, k1))
	}
	_, err = m1.KeyGen(ctx, keyGen(rogue, bytes.Repeat([]byte{8}, 32)))
	wantCode(t, "keygen again with another seed", err, codes.FailedPrecondition, "was started on this member with another request")
	_, err = m1.ReceiveShares(ctx, &fedpcav1.ReceiveSharesRequest{CeremonyId: rogue})
	wantCode(t, "receive before deal", err, codes.FailedPrecondition, "before this member dealt its own")
	_, err = m1.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: rogue, CommitteePublicKey: cpk})
	wantCode(t, "finalize before the shares", err, codes.FailedPrecondition, "threshold shares not received yet")
	keys := make([]*fedpcav1.MemberKey, 3)
	commitments := make([]*fedpcav1.MemberCommitment, 3)
	for i, m := range members {
		r := k1
		if i > 0 {
			if r, err = m.KeyGen(ctx, keyGen(rogue, seed)); err != nil {
				t.Fatal(err)
			}
		}
		keys[i] = &fedpcav1.MemberKey{Point: uint32(i + 1), ExchangeKey: r.GetExchangeKey(), ExchangeKeySignature: r.GetExchangeKeySignature(), Certificate: r.GetCertificate()}
		commitments[i] = &fedpcav1.MemberCommitment{Point: uint32(i + 1), Commitment: r.GetKeyShareCommitment(), Signature: r.GetKeyShareCommitmentSignature(), Certificate: r.GetCertificate()}
	}
	_, err = m1.DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: rogue, Members: keys})
	wantCode(t, "deal before the reveal", err, codes.FailedPrecondition, "shares are dealt only after every member committed and revealed")
	for _, m := range members[:2] {
		if _, err := m.RevealKeyShare(ctx, &fedpcav1.RevealKeyShareRequest{CeremonyId: rogue, Commitments: commitments}); err != nil {
			t.Fatal(err)
		}
	}
	forged := make([]*fedpcav1.MemberKey, 3)
	for i, k := range keys {
		forged[i] = proto.Clone(k).(*fedpcav1.MemberKey)
	}
	forged[1].Certificate = cl.Creds("owner/eve").Leaf.Raw
	_, err = m1.DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: rogue, Members: forged})
	wantCode(t, "exchange key certified for the wrong role", err, codes.InvalidArgument, "signed by spiffe://fedpca/owner/eve, expected csp/csp-2")
	forged[1].Certificate = keys[2].GetCertificate()
	_, err = m1.DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: rogue, Members: forged})
	wantCode(t, "exchange key certified for another member", err, codes.InvalidArgument, "signed by spiffe://fedpca/csp/csp-3, expected csp/csp-2")
	// Whoever holds the deployment's CA issues csp/csp-2 a certificate of
	// another key and signs an exchange key of its own with it: member 1
	// knows csp-2 by the key of its signed commitment (and its roster).
	other, err := cl.ForgeCredentials("proxy/proxy", transport.Identity{Role: transport.RoleCSP, ID: "csp-2"})
	if err != nil {
		t.Fatal(err)
	}
	forged[1].Certificate = other.Leaf.Raw
	if forged[1].ExchangeKeySignature, err = seal.Sign(other.Signer(), "ceremony-exchange-key-v1", append([]byte(rogue+"|2|"), forged[1].GetExchangeKey()...)); err != nil {
		t.Fatal(err)
	}
	_, err = m1.DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: rogue, Members: forged})
	wantCode(t, "exchange key signed by another key of csp-2", err, codes.InvalidArgument, "presents key "+other.Key)
	d1, err := m1.DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: rogue, Members: keys})
	if err != nil {
		t.Fatal(err)
	}
	if again, err := m1.DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: rogue, Members: keys}); err != nil || !proto.Equal(again, d1) {
		t.Fatalf("deal replayed: %v", err)
	}
	_, err = m1.DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: rogue, Members: []*fedpcav1.MemberKey{keys[0], keys[2], keys[1]}})
	wantCode(t, "deal again to other keys", err, codes.FailedPrecondition, "already dealt its shares to other exchange keys")
	d2, err := members[1].DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: rogue, Members: keys})
	if err != nil {
		t.Fatal(err)
	}
	var toThree *fedpcav1.SealedShare
	for _, s := range d2.GetShares() {
		if s.GetToPoint() == 3 {
			toThree = s
		}
	}
	_, err = m1.ReceiveShares(ctx, &fedpcav1.ReceiveSharesRequest{CeremonyId: rogue, Shares: []*fedpcav1.SealedShare{toThree}})
	wantCode(t, "share addressed to another member", err, codes.InvalidArgument, "share from 2 to 3: not for this member")
	relabelled := proto.Clone(toThree).(*fedpcav1.SealedShare)
	relabelled.ToPoint = 1
	_, err = m1.ReceiveShares(ctx, &fedpcav1.ReceiveSharesRequest{CeremonyId: rogue, Shares: []*fedpcav1.SealedShare{relabelled}})
	wantCode(t, "share sealed for another member, relabelled", err, codes.InvalidArgument, "share from member 2 is not signed by it")
	// The proxy relays the boxes and knows every exchange key: a box it
	// seals itself to member 1, as if from member 2 (a share of its own
	// choosing), is refused whatever signature it carries.
	var fromTwo *fedpcav1.SealedShare
	for _, s := range d2.GetShares() {
		if s.GetToPoint() == 1 {
			fromTwo = s
		}
	}
	box, err := seal.Seal(keys[0].GetExchangeKey(), []byte(fmt.Sprintf("%s|%d->%d", rogue, 2, 1)), make([]byte, 100))
	if err != nil {
		t.Fatal(err)
	}
	substituted := &fedpcav1.SealedShare{FromPoint: 2, ToPoint: 1, Sealed: box, Signature: fromTwo.GetSignature()}
	_, err = m1.ReceiveShares(ctx, &fedpcav1.ReceiveSharesRequest{CeremonyId: rogue, Shares: []*fedpcav1.SealedShare{substituted}})
	wantCode(t, "share sealed by the proxy with member 2's signature of another box", err, codes.InvalidArgument, "share from member 2 is not signed by it")
	substituted.Signature = nil
	_, err = m1.ReceiveShares(ctx, &fedpcav1.ReceiveSharesRequest{CeremonyId: rogue, Shares: []*fedpcav1.SealedShare{substituted}})
	wantCode(t, "share sealed by the proxy, unsigned", err, codes.InvalidArgument, "share from member 2 is not signed by it")

	// A key switch asked of a member that never had a ceremony.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := csp.New(csp.Config{Listener: lis, Creds: cl.Creds("csp/csp-9"), Store: filepath.Join(t.TempDir(), "csp-9")})
	if err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- fresh.Run(fctx) }()
	defer func() { fcancel(); <-done }()
	fconn, err := transport.Dialer{Creds: cl.Creds("proxy/proxy")}.Dial(lis.Addr().String(), transport.Identity{Role: transport.RoleCSP, ID: "csp-9"})
	if err != nil {
		t.Fatal(err)
	}
	defer fconn.Close()
	ks, err := fedpcav1.NewCspServiceClient(fconn).KeySwitch(ctx)
	if err == nil {
		_ = ks.Send(&fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Header{Header: &fedpcav1.KeySwitchHeader{JobId: "x"}}})
		_ = ks.CloseSend()
		_, err = ks.Recv()
	}
	wantCode(t, "key switch before the ceremony", err, codes.FailedPrecondition, "has no committee key yet")
	_, err = fedpcav1.NewCspServiceClient(fconn).Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: rogue, CommitteePublicKey: cpk})
	wantCode(t, "finalize before keygen", err, codes.FailedPrecondition, `no ceremony "rogue" in progress`)

	// The committee key is unchanged: a job completes exactly.
	u, err := cl.User("alice")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, NoNoise: true, Owners: []string{owners[0].ID, owners[1].ID},
		Deadline: time.Now().Add(3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if spec.CommitteeKey != st.GetCommitteeKeyFingerprint() {
		t.Fatalf("the committee key changed: %s… -> %s…", st.GetCommitteeKeyFingerprint()[:12], spec.CommitteeKey[:12])
	}
	if _, err := u.Submit(ctx, spec, sch); err != nil {
		t.Fatal(err)
	}
	finishExact(ctx, t, u, spec, sch, owners[0].CSV, owners[1].CSV)

	// A member that has switched a job starts no new ceremony.
	_, err = m1.KeyGen(ctx, keyGen("late", seed))
	wantCode(t, "new ceremony after a switch", err, codes.FailedPrecondition, "has switched 1 jobs; it cannot be replaced")
}

// memberClients dials every committee member with the proxy's certificate,
// for tests that drive the members by hand; the connections close when the
// test ends.
func memberClients(t *testing.T, cl *Cluster) []fedpcav1.CspServiceClient {
	t.Helper()
	pd, err := cl.Dialer("proxy/proxy")
	if err != nil {
		t.Fatal(err)
	}
	members := make([]fedpcav1.CspServiceClient, cl.cfg.CSPs)
	for i := range members {
		conn, err := pd.Dial(cl.CSPAddr(i), transport.Identity{Role: transport.RoleCSP, ID: CSPID(i)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		members[i] = fedpcav1.NewCspServiceClient(conn)
	}
	return members
}
