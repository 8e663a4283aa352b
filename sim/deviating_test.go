package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// keySwapper is a deviating proxy's interceptor: it answers GetCommittee
// with a committee key of the proxy's own (whose secret it holds, so that it
// could decrypt every upload made under it), to owners and, once users is
// set, to users. How
// it dresses the key up is forge: it may keep the members' attestations (of
// the honest key), drop them, or sign the statement of its own key with the
// proxy's certificate.
type keySwapper struct {
	key    []byte
	users  atomic.Bool
	forge  func(resp *fedpcav1.GetCommitteeResponse, proxy *transport.Credentials)
	proxy  atomic.Pointer[transport.Credentials] // its cluster's proxy's, once started
	served atomic.Int64
}

func (k *keySwapper) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil || info.FullMethod != fedpcav1.ProxyService_GetCommittee_FullMethodName {
		return resp, err
	}
	who, err := transport.CallerIdentity(ctx)
	if err != nil || !(who.Role == transport.RoleOwner || who.Role == transport.RoleUser && k.users.Load()) {
		return resp, nil
	}
	swapped := proto.Clone(resp.(*fedpcav1.GetCommitteeResponse)).(*fedpcav1.GetCommitteeResponse)
	swapped.PublicKey, swapped.PublicKeyFingerprint = k.key, job.Fingerprint(k.key)
	if k.forge != nil {
		k.forge(swapped, k.proxy.Load())
	}
	k.served.Add(1)
	return swapped, nil
}

// TestDeviatingProxySwapsCommitteeKey: a proxy that hands out a committee
// key of its own instead of the committee's (it could then decrypt every
// owner's upload, which carries no noise under the servers plan). Whatever
// attestations it shows with the key (the members' own, none, or its own
// signature of a statement naming its key), every owner refuses the job with
// the committee_key code and uploads nothing, its ledger untouched, and its
// log says why; a user refuses to create a job under such a key. The honest
// path is unchanged (the other tests).
func TestDeviatingProxySwapsCommitteeKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, false)
	owners = owners[:3]
	// Each subtest's own proxy signs (a cluster of an earlier subtest may
	// still be answering its owners while the next one starts).
	forgeries := map[string]func(*fedpcav1.GetCommitteeResponse, *transport.Credentials){
		"the members' attestations of the honest key": nil,
		"no attestations": func(r *fedpcav1.GetCommitteeResponse, _ *transport.Credentials) { r.Attestations = nil },
		"the statement of its own key signed by the proxy": func(r *fedpcav1.GetCommitteeResponse, proxy *transport.Credentials) {
			if proxy == nil {
				// An owner's first look, while the cluster starts: the
				// key unattested (refused alike).
				r.Attestations = nil
				return
			}
			st, err := transport.CommitteeStatement(r)
			if err != nil {
				t.Error(err)
				return
			}
			for _, a := range r.Attestations {
				a.Signature, _ = seal.Sign(proxy.Signer(), job.AttestationContext, st.Bytes())
				a.Certificate = proxy.Leaf.Raw
			}
		},
	}
	for name, forge := range forgeries {
		t.Run(name, func(t *testing.T) {
			p, err := he.NewDefaultParams()
			if err != nil {
				t.Fatal(err)
			}
			evil := he.GenerateKeyPair(p)
			sw := &keySwapper{key: p.Codecs().PublicKey.Marshal(evil.Public), forge: forge}
			cl, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 3, Threshold: 2, Owners: owners, Logger: testLogger(t),
				ProxyServerOptions: []grpc.ServerOption{grpc.ChainUnaryInterceptor(sw.intercept)}}, "alice")
			sw.proxy.Store(cl.Creds("proxy/proxy"))
			// The user, shown the honest key, creates a job; the owners are
			// shown the proxy's key. One owner would do (MinOwners 1), so
			// the job fails only once every owner has declined (a job fails
			// as soon as the declines leave too few owners).
			ids := IDs(owners)
			_, st := submitWait(ctx, t, u, sch, user.Request{Analysis: job.PCA, K: 2, Epsilon: 1, Owners: ids, MinOwners: 1, Deadline: time.Now().Add(time.Minute)})
			if st.GetState() != fedpcav1.JobState_JOB_STATE_FAILED || len(st.GetUploadedOwners()) != 0 || len(st.GetDeclinedOwners()) != len(owners) ||
				!strings.HasPrefix(st.GetReason(), "all 3 owners declined; declined: ") {
				t.Fatalf("job %s (%s): uploaded %v, declined %v", st.GetState(), st.GetReason(), st.GetUploadedOwners(), st.GetDeclinedOwners())
			}
			for _, d := range st.GetDeclinedOwners() {
				if d.GetReason() != fedpcav1.DeclineReason_DECLINE_REASON_COMMITTEE_KEY {
					t.Errorf("%s declined with %s", d.GetOwner(), d.GetReason())
				}
			}
			if sw.served.Load() == 0 {
				t.Fatal("the swapped key was never served")
			}
			for _, o := range owners {
				recs, err := cl.Owner(o.ID).JobRecords()
				if err != nil || len(recs) != 1 || recs[0].Code != "committee_key" || !strings.Contains(recs[0].Reason, "not attested") {
					t.Errorf("%s's record: %+v %v", o.ID, recs, err)
				}
				bal, err := cl.Owner(o.ID).Balance("wdbc")
				if err != nil || bal.Spent != 0 || bal.Reserved != 0 {
					t.Errorf("%s's ledger: %+v %v", o.ID, bal, err)
				}
			}

			// A user shown the proxy's key refuses to create a job under it.
			sw.users.Store(true)
			u2, err := cl.User("alice")
			if err != nil {
				t.Fatal(err)
			}
			defer u2.Close()
			_, err = u2.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 2, Epsilon: 1, Owners: ids, Deadline: time.Now().Add(time.Minute)})
			if !errors.Is(err, transport.ErrKeyNotAttested) {
				t.Fatalf("the user accepted the proxy's key: %v", err)
			}
		})
	}
}

// TestCeremonyRefusesSubstitutedKey: a proxy that runs the key ceremony
// honestly but sends the members a key of its own at Finalize, or a key
// built with a share of its own in place of a member's (chosen after seeing
// the others': the rogue-key attack), gets no member's attestation: each
// refuses, naming the problem. With the honest key and shares, each member
// attests it, and the attestations verify. (TestRogueKeyMember: a member
// colluding with the proxy.)
func TestCeremonyRefusesSubstitutedKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	_, owners := wdbcOwners(t, true)
	cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: 3, Threshold: 3, Owners: owners[:1], Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	p := cl.Params()
	members := memberClients(t, cl)
	// A new ceremony (the members have switched nothing yet).
	const cid = "substitute"
	seed := bytes.Repeat([]byte{9}, 32)
	commitments := commitAll(ctx, t, p, members, cid, seed, 3, 3)
	opened, shares := revealAll(ctx, t, p, members, cid, commitments)
	honest, err := he.AggregatePublicKey(p, seed, shares)
	if err != nil {
		t.Fatal(err)
	}
	honestKey := p.Codecs().PublicKey.Marshal(honest)

	// The proxy's own key, with the honest shares.
	evilKey := p.Codecs().PublicKey.Marshal(he.GenerateKeyPair(p).Public)
	for i, m := range members {
		_, err := m.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: cid, CommitteePublicKey: evilKey, Shares: opened})
		wantCode(t, "finalize with the proxy's key", err, codes.InvalidArgument, "not the aggregate of the members' committed shares")
		if st, err := m.GetStatus(ctx, &fedpcav1.GetStatusRequest{}); err != nil || st.GetCeremonyId() == cid {
			t.Errorf("member %d took the proxy's key: %v %v", i+1, st, err)
		}
	}
	// A rogue share in place of member 2's (the rogue-key attack: the
	// proxy picks it so that the aggregate is a key it knows), with a nonce
	// of its own: it opens no commitment of member 2's.
	rogueMember, err := he.NewMember(p, he.Committee{N: 3, Threshold: 3}, 2)
	if err != nil {
		t.Fatal(err)
	}
	rogueShare, err := rogueMember.PublicKeyShare(seed)
	if err != nil {
		t.Fatal(err)
	}
	rogue := proto.Clone(opened[1]).(*fedpcav1.MemberShare)
	rogue.PublicKeyShare = p.Codecs().PublicKeyShare.Marshal(rogueShare)
	rogueKey, err := he.AggregatePublicKey(p, seed, []*he.PublicKeyShare{shares[0], rogueShare, shares[2]})
	if err != nil {
		t.Fatal(err)
	}
	withRogue := []*fedpcav1.MemberShare{opened[0], rogue, opened[2]}
	for i, m := range members {
		_, err = m.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: cid, CommitteePublicKey: p.Codecs().PublicKey.Marshal(rogueKey), Shares: withRogue})
		wantCode(t, fmt.Sprintf("member %d shown a share of the proxy's at point 2", i+1), err, codes.InvalidArgument, "the share at point 2 does not open csp/csp-2's commitment")
	}

	// The honest key: every member attests it, and the attestations verify
	// as an owner checks them.
	info := &fedpcav1.GetCommitteeResponse{HeParams: p.ID(), HeParamsHash: p.Fingerprint(), Members: 3, Threshold: 3,
		PublicKey: honestKey, PublicKeyFingerprint: job.Fingerprint(honestKey), CeremonyId: cid}
	for i, m := range members {
		r, err := m.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: cid, CommitteePublicKey: honestKey, Shares: opened})
		if err != nil {
			t.Fatalf("member %d: %v", i+1, err)
		}
		info.Attestations = append(info.Attestations, r.GetAttestation())
	}
	if _, err := transport.VerifyCommittee(cl.Creds("owner/"+owners[0].ID), info, cl.Policy()); err != nil {
		t.Fatal(err)
	}
	others := cl.Pins()
	others[2].Key = job.Fingerprint([]byte("csp-4's key"))
	if _, err := transport.VerifyCommittee(cl.Creds("owner/"+owners[0].ID), info, job.CommitteePolicy{Members: others}); !errors.Is(err, job.ErrCommitteePolicy) {
		t.Fatalf("a pinned committee of other members accepted: %v", err)
	}
}
