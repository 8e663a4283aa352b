package proxy

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"google.golang.org/grpc"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/fedpca/fedpca/transport"
)

// memberConn is a connection to a committee member.
type memberConn struct {
	Member
	point  uint32
	conn   *grpc.ClientConn
	client fedpcav1.CspServiceClient
}

// member returns (and caches) the connection to the member at index i.
func (p *Proxy) member(i int) (*memberConn, error) {
	m := p.cfg.Committee[i]
	p.mu.Lock()
	defer p.mu.Unlock()
	if mc, ok := p.members[m.ID]; ok {
		return mc, nil
	}
	conn, err := p.cfg.Dialer.Dial(m.Addr, transport.Identity{Role: transport.RoleCSP, ID: m.ID})
	if err != nil {
		return nil, fmt.Errorf("dial csp/%s at %s: %w", m.ID, m.Addr, err)
	}
	mc := &memberConn{Member: m, point: uint32(i + 1), conn: conn, client: fedpcav1.NewCspServiceClient(conn)}
	p.members[m.ID] = mc
	return mc, nil
}

func (p *Proxy) closeMembers() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, mc := range p.members {
		mc.conn.Close()
	}
	p.members = map[string]*memberConn{}
}

// memberStatus asks every member for its status (nil where unreachable).
func (p *Proxy) memberStatus(ctx context.Context, withKey bool) []*fedpcav1.GetStatusResponse {
	out := make([]*fedpcav1.GetStatusResponse, len(p.cfg.Committee))
	type res struct {
		i int
		s *fedpcav1.GetStatusResponse
	}
	ch := make(chan res, len(out))
	for i := range p.cfg.Committee {
		go func() {
			mc, err := p.member(i)
			if err != nil {
				p.recordHealth(p.cfg.Committee[i].ID, nil, err)
				ch <- res{i, nil}
				return
			}
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			s, err := mc.client.GetStatus(cctx, &fedpcav1.GetStatusRequest{IncludePublicKey: withKey})
			p.recordHealth(mc.ID, s, err)
			if err != nil {
				p.log.Debug("member status", "member", mc.ID, "error", err)
				s = nil
			}
			ch <- res{i, s}
		}()
	}
	for range out {
		r := <-ch
		out[r.i] = r.s
	}
	return out
}

// runCeremony establishes the committee key: it keeps the stored one (and
// checks that the members still hold it), adopts the members' key if they
// all agree on one (a proxy that lost its store), or runs a new ceremony. It
// retries with backoff and jitter until it succeeds or ctx ends.
func (p *Proxy) runCeremony(ctx context.Context) {
	p.warnSmallCommittee()
	backoff := transport.Backoff{Initial: p.cfg.RetryInterval, Max: 30 * time.Second}
	for attempt := 1; ; attempt++ {
		err := p.ceremonyOnce(ctx)
		if err == nil || ctx.Err() != nil {
			return
		}
		pause := backoff.Next()
		p.log.Warn("committee key not ready; retrying", "attempt", attempt, "error", err, "retry_in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

func (p *Proxy) ceremonyOnce(ctx context.Context) error {
	p.mu.Lock()
	cmt := p.cmt
	p.mu.Unlock()
	sts := p.memberStatus(ctx, cmt == nil)
	if cmt != nil {
		for i, s := range sts {
			switch {
			case s == nil:
				p.log.Warn("committee member unreachable", "member", p.cfg.Committee[i].ID)
			case s.GetCommitteeKeyFingerprint() != cmt.Fingerprint:
				p.log.Error("committee member holds another key; it cannot take part in key switches",
					"member", p.cfg.Committee[i].ID, "its_key", short(s.GetCommitteeKeyFingerprint()), "committee_key", short(cmt.Fingerprint))
			}
		}
		p.log.Info("committee key ready", "ceremony", cmt.CeremonyID, "key", short(cmt.Fingerprint), "members", len(cmt.Members), "threshold", cmt.Threshold)
		return nil
	}
	// Adopt: every member finalized the same ceremony with this committee.
	agree := true
	for i, s := range sts {
		if s == nil {
			return fmt.Errorf("member %s unreachable", p.cfg.Committee[i].ID)
		}
		agree = agree && s.GetReady() && s.GetCommitteeKeyFingerprint() == sts[0].GetCommitteeKeyFingerprint() &&
			s.GetCeremonyId() == sts[0].GetCeremonyId() && s.GetPoint() == uint32(i+1) &&
			int(s.GetMembers()) == len(p.cfg.Committee) && int(s.GetThreshold()) == p.cfg.Threshold
	}
	if agree {
		rec := &committeeRecord{CeremonyID: sts[0].GetCeremonyId(), Members: p.cfg.Committee, Threshold: p.cfg.Threshold,
			HEParams: p.params.ID(), PublicKey: sts[0].GetCommitteePublicKey(), Fingerprint: job.Fingerprint(sts[0].GetCommitteePublicKey()), At: time.Now().UTC()}
		for _, s := range sts {
			rec.Attestations = append(rec.Attestations, s.GetAttestation())
		}
		if err := p.checkCommittee(rec); err != nil {
			p.log.Warn("the members' committee key cannot be adopted; running a new ceremony", "error", err)
		} else {
			p.log.Info("adopting the committee key the members hold", "ceremony", rec.CeremonyID)
			return p.saveCommittee(rec)
		}
	}
	return p.ceremony(ctx)
}

// checkCommittee verifies a committee record as owners and users will: a
// key that parses and every member's attestation of it. The proxy never
// publishes a key it cannot show attested.
func (p *Proxy) checkCommittee(c *committeeRecord) error {
	if _, err := p.params.Codecs().PublicKey.Unmarshal(c.PublicKey); err != nil {
		return fmt.Errorf("committee key: %w", err)
	}
	st, err := transport.VerifyCommittee(p.cfg.Creds, p.committeeInfo(c), job.CommitteePolicy{AnyMembers: true, MinMembers: 1, MinThreshold: 1, AllowMinorityThreshold: true})
	if err != nil {
		return err
	}
	// Exactly the configured members, whatever their number (the minimum
	// is the owners' and users' policy to enforce; warnSmallCommittee
	// tells the operator), each by the key its TLS certificate showed
	// (Trust.Verify held it to the proxy's roster, if it lists it).
	if want := memberIDs(c.Members); !slices.Equal(st.Members, want) {
		return fmt.Errorf("%w: the attested committee is csp/%s, this proxy's is csp/%s", transport.ErrKeyNotAttested, strings.Join(st.Members, ", csp/"), strings.Join(want, ", csp/"))
	}
	return nil
}

// warnSmallCommittee tells the operator of a committee that owners and
// users with the default committee policy refuse.
func (p *Proxy) warnSmallCommittee() {
	n, t := len(p.cfg.Committee), p.cfg.Threshold
	if n < job.DefaultMinCommitteeMembers || t < job.DefaultMinCommitteeThreshold {
		p.log.Warn("the committee is below the default committee policy of owners and users; they refuse its key unless each lowers its minimum (--committee-min-members, --committee-min-threshold: local tests only)",
			"members", n, "threshold", t, "policy_min_members", job.DefaultMinCommitteeMembers, "policy_min_threshold", job.DefaultMinCommitteeThreshold)
	}
}

func memberIDs(ms []Member) []string {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	return ids
}

// committeeInfo is what the proxy publishes about the committee key, without
// the members' health.
func (p *Proxy) committeeInfo(c *committeeRecord) *fedpcav1.GetCommitteeResponse {
	return &fedpcav1.GetCommitteeResponse{HeParams: p.params.ID(), HeParamsHash: p.params.Fingerprint(), Members: int32(len(c.Members)),
		Threshold: int32(c.Threshold), PublicKey: c.PublicKey, PublicKeyFingerprint: c.Fingerprint,
		CeremonyId: c.CeremonyID, Attestations: c.Attestations}
}

func short(s string) string {
	if len(s) > 16 {
		return s[:16]
	}
	return s
}

// ceremony runs a new key ceremony with every member.
func (p *Proxy) ceremony(ctx context.Context) error {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return err
	}
	id := hex.EncodeToString(seed[:8])
	n, t := len(p.cfg.Committee), p.cfg.Threshold
	refs := make([]*fedpcav1.MemberRef, n)
	mcs := make([]*memberConn, n)
	for i, m := range p.cfg.Committee {
		refs[i] = &fedpcav1.MemberRef{Id: m.ID, Point: uint32(i + 1)}
		mc, err := p.member(i)
		if err != nil {
			return err
		}
		mcs[i] = mc
	}
	p.log.Info("key ceremony", "ceremony", id, "members", n, "threshold", t)
	// Each call is retried on its own while the member is unreachable or an
	// answer is lost (all are idempotent within a ceremony: a repeated
	// KeyGen, reveal or dealing gets the same answer, receiving the same
	// shares again sets the same key, a repeated Finalize is
	// acknowledged); a refusal starts a new ceremony.
	call := func(what string, mc *memberConn, fn func(context.Context) error) error {
		return transport.Retry(ctx, transport.Call{What: what + " on csp/" + mc.ID, Timeout: p.cfg.CallTimeout, Attempts: 5,
			Backoff: transport.Backoff{Initial: p.cfg.RetryInterval, Max: 10 * time.Second}}, fn)
	}
	// Round 1: commitments to the public key shares, and exchange keys.
	commitments := make([]*fedpcav1.MemberCommitment, n)
	keys := make([]*fedpcav1.MemberKey, n)
	for i, mc := range mcs {
		var r *fedpcav1.KeyGenResponse
		err := call("keygen", mc, func(ctx context.Context) (err error) {
			r, err = mc.client.KeyGen(ctx, &fedpcav1.KeyGenRequest{CeremonyId: id, Seed: seed[:], HeParams: p.params.ID(), Members: int32(n), Threshold: int32(t), Committee: refs})
			return err
		})
		if err != nil {
			return err
		}
		commitments[i] = &fedpcav1.MemberCommitment{Point: mc.point, Commitment: r.GetKeyShareCommitment(), Signature: r.GetKeyShareCommitmentSignature(), Certificate: r.GetCertificate()}
		keys[i] = &fedpcav1.MemberKey{Point: mc.point, ExchangeKey: r.GetExchangeKey(), ExchangeKeySignature: r.GetExchangeKeySignature(), Certificate: r.GetCertificate()}
	}
	// Round 2: every member, given every commitment, reveals its share.
	shares := make([]*he.PublicKeyShare, n)
	opened := make([]*fedpcav1.MemberShare, n)
	for i, mc := range mcs {
		var r *fedpcav1.RevealKeyShareResponse
		err := call("reveal key share", mc, func(ctx context.Context) (err error) {
			r, err = mc.client.RevealKeyShare(ctx, &fedpcav1.RevealKeyShareRequest{CeremonyId: id, Commitments: commitments})
			return err
		})
		if err != nil {
			return err
		}
		if !bytes.Equal(job.KeyShareCommitment(id, mc.point, r.GetNonce(), r.GetPublicKeyShare()), commitments[i].GetCommitment()) {
			return fmt.Errorf("reveal key share on %s: the share does not open the member's commitment", mc.ID)
		}
		if shares[i], err = p.params.Codecs().PublicKeyShare.Unmarshal(r.GetPublicKeyShare()); err != nil {
			return fmt.Errorf("reveal key share on %s: %w", mc.ID, err)
		}
		opened[i] = &fedpcav1.MemberShare{Point: mc.point, PublicKeyShare: r.GetPublicKeyShare(), Nonce: r.GetNonce()}
	}
	pk, err := he.AggregatePublicKey(p.params, seed[:], shares)
	if err != nil {
		return err
	}
	// Rounds 3 and 4: sealed Shamir shares, relayed.
	if p.committee.Thresholdized() {
		inbox := make([][]*fedpcav1.SealedShare, n)
		for _, mc := range mcs {
			var r *fedpcav1.DealSharesResponse
			err := call("deal shares", mc, func(ctx context.Context) (err error) {
				r, err = mc.client.DealShares(ctx, &fedpcav1.DealSharesRequest{CeremonyId: id, Members: keys})
				return err
			})
			if err != nil {
				return err
			}
			if len(r.GetShares()) != n {
				return fmt.Errorf("deal shares on %s: %d shares, want %d", mc.ID, len(r.GetShares()), n)
			}
			for _, s := range r.GetShares() {
				if s.GetFromPoint() != mc.point || s.GetToPoint() < 1 || int(s.GetToPoint()) > n {
					return fmt.Errorf("deal shares on %s: share %d->%d is misaddressed", mc.ID, s.GetFromPoint(), s.GetToPoint())
				}
				inbox[s.GetToPoint()-1] = append(inbox[s.GetToPoint()-1], s)
			}
		}
		for i, mc := range mcs {
			if err := call("receive shares", mc, func(ctx context.Context) error {
				_, err := mc.client.ReceiveShares(ctx, &fedpcav1.ReceiveSharesRequest{CeremonyId: id, Shares: inbox[i]})
				return err
			}); err != nil {
				return err
			}
		}
	}
	// Finalize: each member checks the key against every member's committed
	// share and attests it.
	pkBytes := p.params.Codecs().PublicKey.Marshal(pk)
	fp := job.Fingerprint(pkBytes)
	rec := &committeeRecord{CeremonyID: id, Members: p.cfg.Committee, Threshold: t, HEParams: p.params.ID(), PublicKey: pkBytes, Fingerprint: fp, At: time.Now().UTC()}
	for _, mc := range mcs {
		var r *fedpcav1.FinalizeResponse
		err := call("finalize", mc, func(ctx context.Context) (err error) {
			r, err = mc.client.Finalize(ctx, &fedpcav1.FinalizeRequest{CeremonyId: id, CommitteePublicKey: pkBytes, Shares: opened})
			return err
		})
		if err != nil {
			return err
		}
		if r.GetCommitteeKeyFingerprint() != fp {
			return fmt.Errorf("finalize on %s: member reports key %s, want %s", mc.ID, short(r.GetCommitteeKeyFingerprint()), short(fp))
		}
		rec.Attestations = append(rec.Attestations, r.GetAttestation())
	}
	if err := p.checkCommittee(rec); err != nil {
		return err
	}
	return p.saveCommittee(rec)
}

func (p *Proxy) saveCommittee(c *committeeRecord) error {
	if err := p.store.putCommittee(c); err != nil {
		return err
	}
	p.mu.Lock()
	p.cmt, p.zkKey, p.zkPK = c, nil, nil
	p.mu.Unlock()
	p.log.Info("committee key ready", "ceremony", c.CeremonyID, "key", short(c.Fingerprint), "members", len(c.Members), "threshold", c.Threshold)
	return nil
}

// committeeKey returns the committee record, or ErrCommitteeNotReady.
func (p *Proxy) committeeKey() (*committeeRecord, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmt == nil {
		return nil, ErrCommitteeNotReady
	}
	return p.cmt, nil
}

// committeeKeys returns, for a job under the committee key with
// fingerprint fp (the committee's), the key that upload proofs are verified
// with and the committee public key (key switches are combined on the sum
// re-randomised under it).
func (p *Proxy) committeeKeys(fp string) (*zk.Key, *rlwe.PublicKey, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmt == nil {
		return nil, nil, ErrCommitteeNotReady
	}
	if p.cmt.Fingerprint != fp {
		return nil, nil, fmt.Errorf("%w: the job is for committee key %s…, the committee's is %s…", ErrBadRequest, short(fp), short(p.cmt.Fingerprint))
	}
	if p.zkKey == nil {
		pk, err := p.params.Codecs().PublicKey.Unmarshal(p.cmt.PublicKey)
		if err != nil {
			return nil, nil, fmt.Errorf("committee key: %w", err)
		}
		if p.zkKey, err = p.params.ProofKey(pk); err != nil {
			return nil, nil, err
		}
		p.zkPK = pk
	}
	return p.zkKey, p.zkPK, nil
}

// GetCommittee implements fedpcav1.ProxyServiceServer.
func (p *Proxy) GetCommittee(ctx context.Context, req *fedpcav1.GetCommitteeRequest) (*fedpcav1.GetCommitteeResponse, error) {
	p.contacted(caller(ctx))
	c, err := p.committeeKey()
	if err != nil {
		return nil, p.toStatus(err)
	}
	r := p.committeeResponse(ctx, c)
	if req.GetWithoutKey() {
		r = &fedpcav1.GetCommitteeResponse{HeParams: r.GetHeParams(), HeParamsHash: r.GetHeParamsHash(), Members: r.GetMembers(), Threshold: r.GetThreshold(),
			PublicKeyFingerprint: r.GetPublicKeyFingerprint(), MemberStatus: r.GetMemberStatus(), CeremonyId: r.GetCeremonyId(), Attestations: r.GetAttestations()}
	}
	return r, nil
}

// committeeResponse describes the committee, with which members hold its key
// measured at most every few seconds. Every owner asks for it, often all at
// once, so the response is built once and shared (transport.Share): a
// thousand owners fetching the key at once cost one copy of it, not a
// thousand.
func (p *Proxy) committeeResponse(ctx context.Context, c *committeeRecord) *fedpcav1.GetCommitteeResponse {
	fresh := func() *fedpcav1.GetCommitteeResponse {
		p.mu.Lock()
		defer p.mu.Unlock()
		if r := p.cmtResp; r != nil && r.GetPublicKeyFingerprint() == c.Fingerprint && time.Since(p.cmtRespAt) < 5*time.Second {
			return r
		}
		return nil
	}
	if r := fresh(); r != nil {
		return r
	}
	// One caller refreshes; the others wait for its response.
	p.cmtRefresh.Lock()
	defer p.cmtRefresh.Unlock()
	if r := fresh(); r != nil {
		return r
	}
	resp := p.committeeInfo(c)
	for i, s := range p.memberStatus(ctx, false) {
		resp.MemberStatus = append(resp.MemberStatus, &fedpcav1.CommitteeMember{Id: c.Members[i].ID, Point: uint32(i + 1),
			Healthy: s != nil && s.GetCommitteeKeyFingerprint() == c.Fingerprint})
	}
	transport.Share(resp)
	p.mu.Lock()
	old := p.cmtResp
	p.cmtResp, p.cmtRespAt = resp, time.Now()
	p.mu.Unlock()
	if old != nil {
		transport.Unshare(old) // responses being sent keep their bytes
	}
	return resp
}

var errNoQuorum = errors.New("not enough committee members reachable with the committee key")

// CommitteeReady reports whether the committee key is established.
func (p *Proxy) CommitteeReady() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmt != nil
}
