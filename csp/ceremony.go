package csp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
)

// exchangeContext is the signature context of ceremony exchange keys.
const exchangeContext = "ceremony-exchange-key-v1"

func exchangeMessage(ceremony string, point uint32, key []byte) []byte {
	return append([]byte(ceremony+"|"+strconv.FormatUint(uint64(point), 10)+"|"), key...)
}

func shareAAD(ceremony string, from, to uint32) []byte {
	return []byte(fmt.Sprintf("%s|%d->%d", ceremony, from, to))
}

// GetStatus implements fedpcav1.CspServiceServer.
func (c *CSP) GetStatus(_ context.Context, req *fedpcav1.GetStatusRequest) (*fedpcav1.GetStatusResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resp := &fedpcav1.GetStatusResponse{Id: c.cfg.ID, HeParams: c.params.ID(), Switches: c.switches}
	if st := c.state; st != nil {
		resp.Ready = true
		resp.Point = uint32(st.Secret.Point)
		resp.CeremonyId = st.CeremonyID
		resp.Members = int32(st.Secret.N)
		resp.Threshold = int32(st.Secret.Threshold)
		if req.GetIncludePublicKey() {
			resp.CommitteePublicKey = st.CommitteeKey
		}
		resp.CommitteeKeyFingerprint = st.Fingerprint
		resp.Attestation = st.Attestation
	}
	return resp, nil
}

// KeyGen implements fedpcav1.CspServiceServer: round 1 of the ceremony (the
// member commits to its public-key share).
func (c *CSP) KeyGen(_ context.Context, req *fedpcav1.KeyGenRequest) (*fedpcav1.KeyGenResponse, error) {
	resp, err := c.keyGen(req)
	return resp, c.status(err)
}

func (c *CSP) keyGen(req *fedpcav1.KeyGenRequest) (*fedpcav1.KeyGenResponse, error) {
	if req.GetHeParams() != c.params.ID() {
		return nil, invalid("he_params %q: this member runs %s", req.GetHeParams(), c.params.ID())
	}
	if req.GetCeremonyId() == "" || len(req.GetCeremonyId()) > 128 {
		return nil, invalid("ceremony_id: want 1 to 128 characters")
	}
	committee := he.Committee{N: int(req.GetMembers()), Threshold: int(req.GetThreshold())}
	if err := committee.Validate(); err != nil {
		return nil, invalid("members/threshold: %v", err)
	}
	if len(req.GetCommittee()) != committee.N {
		return nil, invalid("committee lists %d members, members = %d", len(req.GetCommittee()), committee.N)
	}
	var point he.Point
	seen := map[uint32]bool{}
	for _, m := range req.GetCommittee() {
		if m.GetPoint() < 1 || int(m.GetPoint()) > committee.N || seen[m.GetPoint()] {
			return nil, invalid("committee: point %d of %q is out of range or repeated", m.GetPoint(), m.GetId())
		}
		seen[m.GetPoint()] = true
		if m.GetId() == c.cfg.ID {
			point = he.Point(m.GetPoint())
		}
	}
	if point == 0 {
		return nil, invalid("committee does not list this member (%s)", c.cfg.ID)
	}
	if _, err := memberIDs(req.GetCommittee(), committee.Threshold); err != nil {
		return nil, invalid("committee: %v", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != nil && c.state.CeremonyID == req.GetCeremonyId() {
		return nil, fmt.Errorf("%w: ceremony %q is finished on this member", ErrCeremony, req.GetCeremonyId())
	}
	if cer := c.cer; cer != nil && cer.id == req.GetCeremonyId() {
		if cer.keyGenReq != roundDigest(req) {
			return nil, fmt.Errorf("%w: ceremony %q was started on this member with another request", ErrCeremony, req.GetCeremonyId())
		}
		return cer.keyGenResp, nil // replayed
	}
	if c.state != nil && c.switches > 0 {
		return nil, fmt.Errorf("%w: this member's committee key (ceremony %s) has switched %d jobs; it cannot be replaced (reset the member's state directory to start a new committee)", ErrCeremony, c.state.CeremonyID, c.switches)
	}
	m, err := he.NewMember(c.params, committee, point)
	if err != nil {
		return nil, invalid("%v", err)
	}
	share, err := m.PublicKeyShare(req.GetSeed())
	if err != nil {
		return nil, invalid("seed: %v", err)
	}
	x, err := seal.NewExchangeKey()
	if err != nil {
		return nil, err
	}
	// Commit to the share; it is revealed only once every member's
	// commitment is in (RevealKeyShare).
	shareBytes := c.params.Codecs().PublicKeyShare.Marshal(share)
	nonce := make([]byte, job.NonceSize)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	resp := &fedpcav1.KeyGenResponse{
		KeyShareCommitment: job.KeyShareCommitment(req.GetCeremonyId(), uint32(point), nonce, shareBytes),
		ExchangeKey:        x.PublicKey().Bytes(),
	}
	if c.cfg.Creds != nil {
		if resp.ExchangeKeySignature, err = seal.Sign(c.cfg.Creds.Signer(), exchangeContext, exchangeMessage(req.GetCeremonyId(), uint32(point), resp.ExchangeKey)); err != nil {
			return nil, err
		}
		if resp.KeyShareCommitmentSignature, err = seal.Sign(c.cfg.Creds.Signer(), job.KeyCommitmentContext, job.KeyCommitmentMessage(req.GetCeremonyId(), uint32(point), resp.KeyShareCommitment)); err != nil {
			return nil, err
		}
		resp.Certificate = c.cfg.Creds.Leaf.Raw
	}
	c.cer = &ceremony{id: req.GetCeremonyId(), seed: bytes.Clone(req.GetSeed()), committee: committee, members: req.GetCommittee(), member: m, exchange: x,
		share: shareBytes, nonce: nonce, keyGenReq: roundDigest(req), keyGenResp: resp}
	c.log.Info("key ceremony started", "ceremony", req.GetCeremonyId(), "members", committee.N, "threshold", committee.Threshold, "point", point)
	return resp, nil
}

// memberIDs returns the committee's member IDs by point (checked: valid,
// distinct), as the key statement lists them.
func memberIDs(refs []*fedpcav1.MemberRef, threshold int) ([]string, error) {
	ids := make([]string, len(refs))
	for _, m := range refs {
		if m.GetPoint() < 1 || int(m.GetPoint()) > len(refs) || ids[m.GetPoint()-1] != "" {
			return nil, fmt.Errorf("point %d is out of range or repeated", m.GetPoint())
		}
		ids[m.GetPoint()-1] = m.GetId()
	}
	st := job.KeyStatement{Ceremony: "x", HEParams: job.Fingerprint(nil), Key: job.Fingerprint(nil), Threshold: threshold, Members: ids, MemberKeys: make([]string, len(ids))}
	if err := st.Validate(); err != nil {
		return nil, err
	}
	return ids, nil
}

// current returns the ceremony in progress with the given ID.
func (c *CSP) current(id string) (*ceremony, error) {
	if c.cer == nil || c.cer.id != id {
		return nil, fmt.Errorf("%w: no ceremony %q in progress on this member (restart the ceremony)", ErrCeremony, id)
	}
	return c.cer, nil
}

// RevealKeyShare implements fedpcav1.CspServiceServer: the member reveals
// its public-key share once it holds every member's signed commitment.
func (c *CSP) RevealKeyShare(_ context.Context, req *fedpcav1.RevealKeyShareRequest) (*fedpcav1.RevealKeyShareResponse, error) {
	resp, err := c.revealKeyShare(req)
	return resp, c.status(err)
}

func (c *CSP) revealKeyShare(req *fedpcav1.RevealKeyShareRequest) (*fedpcav1.RevealKeyShareResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cer, err := c.current(req.GetCeremonyId())
	if err != nil {
		return nil, err
	}
	if cer.revealResp != nil {
		if cer.revealReq != roundDigest(req) {
			return nil, fmt.Errorf("%w: ceremony %q: this member already revealed its key share against other commitments", ErrCeremony, cer.id)
		}
		return cer.revealResp, nil // replayed
	}
	n := cer.committee.N
	if len(req.GetCommitments()) != n {
		return nil, invalid("commitments: %d for a committee of %d (a member reveals its share only once every member has committed)", len(req.GetCommitments()), n)
	}
	me := uint32(cer.member.Point())
	commitments, keys := make([][]byte, n), make([]string, n)
	for _, mc := range req.GetCommitments() {
		p := mc.GetPoint()
		if p < 1 || int(p) > n || commitments[p-1] != nil {
			return nil, invalid("commitment at point %d: out of range or repeated", p)
		}
		if len(mc.GetCommitment()) != sha256.Size {
			return nil, invalid("commitment at point %d: %d bytes, want %d", p, len(mc.GetCommitment()), sha256.Size)
		}
		if p == me {
			if !bytes.Equal(mc.GetCommitment(), cer.keyGenResp.GetKeyShareCommitment()) {
				return nil, invalid("the commitment at this member's point (%d) is not the one it made", p)
			}
			if c.cfg.Creds != nil {
				keys[p-1] = c.cfg.Creds.Key
			}
		} else {
			key, err := transport.VerifyMemberSignature(c.cfg.Creds, cer.memberAt(p), "", mc.GetCertificate(), job.KeyCommitmentContext,
				job.KeyCommitmentMessage(cer.id, p, mc.GetCommitment()), mc.GetSignature())
			if err != nil {
				return nil, invalid("the commitment at point %d is not signed by csp/%s for this ceremony: %v", p, cer.memberAt(p), err)
			}
			keys[p-1] = key
		}
		commitments[p-1] = bytes.Clone(mc.GetCommitment())
	}
	if err := c.checkPeers(cer, keys); err != nil {
		c.log.Error("refusing a ceremony with members this member does not pin", "ceremony", cer.id, "error", err)
		return nil, err
	}
	cer.commitments, cer.memberKeys = commitments, keys
	cer.revealReq, cer.revealResp = roundDigest(req), &fedpcav1.RevealKeyShareResponse{PublicKeyShare: cer.share, Nonce: cer.nonce}
	return cer.revealResp, nil
}

// DealShares implements fedpcav1.CspServiceServer: round 3 (t < n only).
func (c *CSP) DealShares(_ context.Context, req *fedpcav1.DealSharesRequest) (*fedpcav1.DealSharesResponse, error) {
	resp, err := c.dealShares(req)
	return resp, c.status(err)
}

func (c *CSP) dealShares(req *fedpcav1.DealSharesRequest) (*fedpcav1.DealSharesResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cer, err := c.current(req.GetCeremonyId())
	if err != nil {
		return nil, err
	}
	if cer.dealResp != nil {
		if cer.dealReq != roundDigest(req) {
			return nil, fmt.Errorf("%w: ceremony %q: this member already dealt its shares to other exchange keys", ErrCeremony, cer.id)
		}
		return cer.dealResp, nil // replayed
	}
	if cer.commitments == nil {
		return nil, fmt.Errorf("%w: ceremony %q: shares are dealt only after every member committed and revealed", ErrCeremony, cer.id)
	}
	if len(req.GetMembers()) != cer.committee.N {
		return nil, invalid("members: %d exchange keys for a committee of %d", len(req.GetMembers()), cer.committee.N)
	}
	keys := map[he.Point][]byte{}
	certs := map[uint32][]byte{}
	for _, mk := range req.GetMembers() {
		if err := c.checkExchangeKey(cer, mk); err != nil {
			return nil, invalid("member %d: %v", mk.GetPoint(), err)
		}
		if _, dup := keys[he.Point(mk.GetPoint())]; dup {
			return nil, invalid("member %d: listed twice", mk.GetPoint())
		}
		keys[he.Point(mk.GetPoint())] = mk.GetExchangeKey()
		certs[mk.GetPoint()] = mk.GetCertificate()
	}
	dealt, err := cer.member.DealShamir()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCeremony, err)
	}
	resp := &fedpcav1.DealSharesResponse{}
	from := uint32(cer.member.Point())
	for to, share := range dealt {
		box, err := seal.Seal(keys[to], shareAAD(cer.id, from, uint32(to)), c.params.Codecs().ShamirShare.Marshal(share))
		if err != nil {
			return nil, err
		}
		ss := &fedpcav1.SealedShare{FromPoint: from, ToPoint: uint32(to), Sealed: box}
		if c.cfg.Creds != nil {
			if ss.Signature, err = seal.Sign(c.cfg.Creds.Signer(), job.DealtShareContext, job.DealtShareMessage(cer.id, from, uint32(to), box)); err != nil {
				return nil, err
			}
		}
		resp.Shares = append(resp.Shares, ss)
	}
	cer.keys, cer.certs, cer.dealReq, cer.dealResp = keys, certs, roundDigest(req), resp
	return resp, nil
}

// roundDigest identifies a ceremony request, so that a replay is answered
// as the original was.
func roundDigest(m proto.Message) [32]byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	return sha256.Sum256(b)
}

// checkExchangeKey verifies that a member's exchange key is signed by the
// certificate of the committee member listed at its point.
func (c *CSP) checkExchangeKey(cer *ceremony, mk *fedpcav1.MemberKey) error {
	if mk.GetPoint() < 1 || int(mk.GetPoint()) > cer.committee.N || len(mk.GetExchangeKey()) != 32 {
		return fmt.Errorf("bad point or exchange key")
	}
	if c.cfg.Creds == nil {
		return nil // insecure mode: nothing to verify against
	}
	_, err := transport.VerifyMemberSignature(c.cfg.Creds, cer.memberAt(mk.GetPoint()), cer.memberKeys[mk.GetPoint()-1], mk.GetCertificate(),
		exchangeContext, exchangeMessage(cer.id, mk.GetPoint(), mk.GetExchangeKey()), mk.GetExchangeKeySignature())
	return err
}

// checkPeers checks the committee's keys, as the signed commitments gave
// them, against the member's pins (Config.Peers), if any: exactly the
// pinned keys, this member's own among them.
func (c *CSP) checkPeers(cer *ceremony, keys []string) error {
	if len(c.cfg.Peers) == 0 {
		return nil
	}
	st := job.KeyStatement{Members: make([]string, len(keys)), MemberKeys: keys, Threshold: cer.committee.Threshold}
	for i := range keys {
		st.Members[i] = cer.memberAt(uint32(i + 1))
	}
	p := job.CommitteePolicy{Members: c.cfg.Peers, MinMembers: 1, MinThreshold: 1, AllowMinorityThreshold: true}
	if err := p.Check(st); err != nil {
		return invalid("this member takes part only in the committee it pins (csp serve --committee): %v", err)
	}
	return nil
}

// memberAt returns the ID of the committee member at a point ("" if none).
func (cer *ceremony) memberAt(point uint32) string {
	for _, m := range cer.members {
		if m.GetPoint() == point {
			return m.GetId()
		}
	}
	return ""
}

// ReceiveShares implements fedpcav1.CspServiceServer: round 4 (t < n only).
func (c *CSP) ReceiveShares(_ context.Context, req *fedpcav1.ReceiveSharesRequest) (*fedpcav1.ReceiveSharesResponse, error) {
	return &fedpcav1.ReceiveSharesResponse{}, c.status(c.receiveShares(req))
}

func (c *CSP) receiveShares(req *fedpcav1.ReceiveSharesRequest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cer, err := c.current(req.GetCeremonyId())
	if err != nil {
		return err
	}
	if cer.keys == nil {
		return fmt.Errorf("%w: shares received before this member dealt its own", ErrCeremony)
	}
	if cer.received {
		if cer.receiveReq != roundDigest(req) {
			return fmt.Errorf("%w: ceremony %q: this member already received other shares", ErrCeremony, cer.id)
		}
		return nil // replayed
	}
	me := uint32(cer.member.Point())
	got := map[uint32]bool{}
	var mine []*he.ShamirShare
	for _, s := range req.GetShares() {
		from := s.GetFromPoint()
		if s.GetToPoint() != me || from < 1 || int(from) > cer.committee.N || got[from] {
			return invalid("share from %d to %d: not for this member, or repeated", from, s.GetToPoint())
		}
		got[from] = true
		// Only the dealer at that point can have made the box: the proxy
		// that relays it could otherwise seal a share of its own.
		if _, err := transport.VerifyMemberSignature(c.cfg.Creds, cer.memberAt(from), cer.memberKeys[from-1], cer.certs[from], job.DealtShareContext,
			job.DealtShareMessage(cer.id, from, me, s.GetSealed()), s.GetSignature()); err != nil {
			return invalid("share from member %d is not signed by it: %v", from, err)
		}
		plain, err := seal.Open(cer.exchange, shareAAD(cer.id, from, me), s.GetSealed())
		if err != nil {
			return invalid("share from member %d: %v", from, err)
		}
		sh, err := c.params.Codecs().ShamirShare.Unmarshal(plain)
		if err != nil {
			return invalid("share from member %d: %v", from, err)
		}
		mine = append(mine, sh)
	}
	if err := cer.member.SetThresholdShares(mine); err != nil {
		return invalid("%v", err)
	}
	cer.received, cer.receiveReq = true, roundDigest(req)
	return nil
}

// Finalize implements fedpcav1.CspServiceServer: the member checks the
// committee key against every member's committed share, attests it, writes
// its secrets and the key to disk and becomes ready.
func (c *CSP) Finalize(_ context.Context, req *fedpcav1.FinalizeRequest) (*fedpcav1.FinalizeResponse, error) {
	resp, err := c.finalize(req)
	return resp, c.status(err)
}

func (c *CSP) finalize(req *fedpcav1.FinalizeRequest) (*fedpcav1.FinalizeResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != nil && c.state.CeremonyID == req.GetCeremonyId() && (c.cer == nil || c.cer.id != req.GetCeremonyId()) {
		if !bytes.Equal(req.GetCommitteePublicKey(), c.state.CommitteeKey) {
			return nil, fmt.Errorf("%w: ceremony %q was finalized with another committee key (%s…)", ErrCeremony, req.GetCeremonyId(), c.state.Fingerprint[:16])
		}
		return &fedpcav1.FinalizeResponse{CommitteeKeyFingerprint: c.state.Fingerprint, Attestation: c.state.Attestation}, nil // retry
	}
	cer, err := c.current(req.GetCeremonyId())
	if err != nil {
		return nil, err
	}
	if !cer.member.Ready() {
		return nil, fmt.Errorf("%w: threshold shares not received yet", ErrCeremony)
	}
	if err := c.checkCommitteeKey(cer, req); err != nil {
		c.log.Error("refusing to attest the committee key the proxy sent", "ceremony", cer.id, "error", err)
		return nil, err
	}
	fp := job.Fingerprint(req.GetCommitteePublicKey())
	ids, err := memberIDs(cer.members, cer.committee.Threshold)
	if err != nil {
		return nil, invalid("committee: %v", err)
	}
	statement := job.KeyStatement{Ceremony: cer.id, HEParams: c.params.Fingerprint(), Threshold: cer.committee.Threshold, Members: ids, MemberKeys: cer.memberKeys, Key: fp}
	att, err := transport.Attest(c.cfg.Creds, c.cfg.ID, uint32(cer.member.Point()), statement)
	if err != nil {
		return nil, err
	}
	st := &secretFile{
		CeremonyID: cer.id, HEParams: c.params.ID(), Members: cer.members, MemberKeys: cer.memberKeys, Secret: cer.member.SecretState(),
		CommitteeKey: req.GetCommitteePublicKey(), Fingerprint: fp, Attestation: att,
		FinalizedAt: time.Now().UTC(),
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	// The switch log becomes the new key's (switchlog.go): pending before
	// the key file is written, bound after.
	lb := bindingOf(c.cfg.ID, st)
	if err := c.beginBind(lb); err != nil {
		return nil, err
	}
	if err := transport.WriteFileAtomic(c.secretPath(), b); err != nil {
		return nil, fmt.Errorf("write secret key file: %w", err)
	}
	if err := c.endBind(lb); err != nil {
		return nil, fmt.Errorf("bind the switch log to the new key: %w", err)
	}
	c.state, c.member, c.cer = st, cer.member, nil
	c.log.Info("key ceremony finished; committee key attested", "ceremony", st.CeremonyID, "committee_key", st.Fingerprint[:16])
	return &fedpcav1.FinalizeResponse{CommitteeKeyFingerprint: st.Fingerprint, Attestation: att}, nil
}

// ErrKeyMismatch reports a committee key that is not the aggregate of the
// members' public key shares: the member does not attest it.
var ErrKeyMismatch = errors.New("the committee key is not the aggregate of the members' committed shares")

// checkCommitteeKey verifies, before the member attests it, that the
// committee key is the aggregate (from the ceremony's seed) of one public
// key share from each member, each opening the signed commitment of the
// member at its point that this member held before it revealed its own
// share (its own commitment being the one it made).
func (c *CSP) checkCommitteeKey(cer *ceremony, req *fedpcav1.FinalizeRequest) error {
	if cer.commitments == nil {
		return fmt.Errorf("%w: ceremony %q: this member has not revealed its key share (commitments first)", ErrCeremony, cer.id)
	}
	if _, err := c.params.Codecs().PublicKey.Unmarshal(req.GetCommitteePublicKey()); err != nil {
		return invalid("committee_public_key: %v", err)
	}
	if len(req.GetShares()) != cer.committee.N {
		return fmt.Errorf("%w: %d shares for a committee of %d", ErrKeyMismatch, len(req.GetShares()), cer.committee.N)
	}
	shares := make([]*he.PublicKeyShare, cer.committee.N)
	for _, ms := range req.GetShares() {
		p := ms.GetPoint()
		if p < 1 || int(p) > cer.committee.N || shares[p-1] != nil {
			return fmt.Errorf("%w: share at point %d is out of range or repeated", ErrKeyMismatch, p)
		}
		if !bytes.Equal(job.KeyShareCommitment(cer.id, p, ms.GetNonce(), ms.GetPublicKeyShare()), cer.commitments[p-1]) {
			return fmt.Errorf("%w: the share at point %d does not open csp/%s's commitment", ErrKeyMismatch, p, cer.memberAt(p))
		}
		sh, err := c.params.Codecs().PublicKeyShare.Unmarshal(ms.GetPublicKeyShare())
		if err != nil {
			return fmt.Errorf("%w: share at point %d: %v", ErrKeyMismatch, p, err)
		}
		shares[p-1] = sh
	}
	pk, err := he.AggregatePublicKey(c.params, cer.seed, shares)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrKeyMismatch, err)
	}
	if !bytes.Equal(c.params.Codecs().PublicKey.Marshal(pk), req.GetCommitteePublicKey()) {
		return ErrKeyMismatch
	}
	return nil
}
