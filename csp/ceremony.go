package csp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
	}
	return resp, nil
}

// KeyGen implements fedpcav1.CspServiceServer: round 1 of the ceremony.
func (c *CSP) KeyGen(_ context.Context, req *fedpcav1.KeyGenRequest) (*fedpcav1.KeyGenResponse, error) {
	if req.GetHeParams() != c.params.ID() {
		return nil, status.Errorf(codes.InvalidArgument, "he_params %q: this member runs %s", req.GetHeParams(), c.params.ID())
	}
	if req.GetCeremonyId() == "" || len(req.GetCeremonyId()) > 128 {
		return nil, status.Error(codes.InvalidArgument, "ceremony_id: want 1 to 128 characters")
	}
	committee := he.Committee{N: int(req.GetMembers()), Threshold: int(req.GetThreshold())}
	if err := committee.Validate(); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "members/threshold: %v", err)
	}
	if len(req.GetCommittee()) != committee.N {
		return nil, status.Errorf(codes.InvalidArgument, "committee lists %d members, members = %d", len(req.GetCommittee()), committee.N)
	}
	var point he.Point
	seen := map[uint32]bool{}
	for _, m := range req.GetCommittee() {
		if m.GetPoint() < 1 || int(m.GetPoint()) > committee.N || seen[m.GetPoint()] {
			return nil, status.Errorf(codes.InvalidArgument, "committee: point %d of %q is out of range or repeated", m.GetPoint(), m.GetId())
		}
		seen[m.GetPoint()] = true
		if m.GetId() == c.cfg.ID {
			point = he.Point(m.GetPoint())
		}
	}
	if point == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "committee does not list this member (%s)", c.cfg.ID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != nil && c.state.CeremonyID == req.GetCeremonyId() {
		return nil, status.Errorf(codes.FailedPrecondition, "ceremony %q is finished on this member", req.GetCeremonyId())
	}
	if cer := c.cer; cer != nil && cer.id == req.GetCeremonyId() {
		if cer.keyGenReq != roundDigest(req) {
			return nil, status.Errorf(codes.FailedPrecondition, "ceremony %q was started on this member with another request", req.GetCeremonyId())
		}
		return cer.keyGenResp, nil // replayed
	}
	if c.state != nil && c.switches > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "this member's committee key (ceremony %s) has switched %d jobs; it cannot be replaced (reset the member's state directory to start a new committee)", c.state.CeremonyID, c.switches)
	}
	m, err := he.NewMember(c.params, committee, point)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	share, err := m.PublicKeyShare(req.GetSeed())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "seed: %v", err)
	}
	x, err := seal.NewExchangeKey()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	resp := &fedpcav1.KeyGenResponse{
		PublicKeyShare: c.params.Codecs().PublicKeyShare.Marshal(share),
		ExchangeKey:    x.PublicKey().Bytes(),
	}
	if c.cfg.Creds != nil {
		sig, err := seal.Sign(c.cfg.Creds.Signer(), exchangeContext, exchangeMessage(req.GetCeremonyId(), uint32(point), resp.ExchangeKey))
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		resp.ExchangeKeySignature, resp.Certificate = sig, c.cfg.Creds.Leaf.Raw
	}
	c.cer = &ceremony{id: req.GetCeremonyId(), committee: committee, members: req.GetCommittee(), member: m, exchange: x,
		keyGenReq: roundDigest(req), keyGenResp: resp}
	c.log.Info("key ceremony started", "ceremony", req.GetCeremonyId(), "members", committee.N, "threshold", committee.Threshold, "point", point)
	return resp, nil
}

// current returns the ceremony in progress with the given ID.
func (c *CSP) current(id string) (*ceremony, error) {
	if c.cer == nil || c.cer.id != id {
		return nil, status.Errorf(codes.FailedPrecondition, "no ceremony %q in progress on this member (restart the ceremony)", id)
	}
	return c.cer, nil
}

// DealShares implements fedpcav1.CspServiceServer: round 2 (t < n only).
func (c *CSP) DealShares(_ context.Context, req *fedpcav1.DealSharesRequest) (*fedpcav1.DealSharesResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cer, err := c.current(req.GetCeremonyId())
	if err != nil {
		return nil, err
	}
	if cer.dealResp != nil {
		if cer.dealReq != roundDigest(req) {
			return nil, status.Errorf(codes.FailedPrecondition, "ceremony %q: this member already dealt its shares to other exchange keys", cer.id)
		}
		return cer.dealResp, nil // replayed
	}
	if len(req.GetMembers()) != cer.committee.N {
		return nil, status.Errorf(codes.InvalidArgument, "members: %d exchange keys for a committee of %d", len(req.GetMembers()), cer.committee.N)
	}
	keys := map[he.Point][]byte{}
	for _, mk := range req.GetMembers() {
		if err := c.checkExchangeKey(cer, mk); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "member %d: %v", mk.GetPoint(), err)
		}
		keys[he.Point(mk.GetPoint())] = mk.GetExchangeKey()
	}
	dealt, err := cer.member.DealShamir()
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	resp := &fedpcav1.DealSharesResponse{}
	from := uint32(cer.member.Point())
	for to, share := range dealt {
		box, err := seal.Seal(keys[to], shareAAD(cer.id, from, uint32(to)), c.params.Codecs().ShamirShare.Marshal(share))
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		resp.Shares = append(resp.Shares, &fedpcav1.SealedShare{FromPoint: from, ToPoint: uint32(to), Sealed: box})
	}
	cer.keys, cer.dealReq, cer.dealResp = keys, roundDigest(req), resp
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
	cert, id, err := c.cfg.Creds.VerifyDER(mk.GetCertificate())
	if err != nil {
		return err
	}
	var want string
	for _, m := range cer.members {
		if m.GetPoint() == mk.GetPoint() {
			want = m.GetId()
		}
	}
	if id.Role != transport.RoleCSP || id.ID != want {
		return fmt.Errorf("exchange key certified for %s, committee lists csp/%s at this point", id.Short(), want)
	}
	return seal.Verify(cert.PublicKey, exchangeContext, exchangeMessage(cer.id, mk.GetPoint(), mk.GetExchangeKey()), mk.GetExchangeKeySignature())
}

// ReceiveShares implements fedpcav1.CspServiceServer: round 3 (t < n only).
func (c *CSP) ReceiveShares(_ context.Context, req *fedpcav1.ReceiveSharesRequest) (*fedpcav1.ReceiveSharesResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cer, err := c.current(req.GetCeremonyId())
	if err != nil {
		return nil, err
	}
	if cer.keys == nil {
		return nil, status.Error(codes.FailedPrecondition, "shares received before this member dealt its own")
	}
	if cer.received {
		if cer.receiveReq != roundDigest(req) {
			return nil, status.Errorf(codes.FailedPrecondition, "ceremony %q: this member already received other shares", cer.id)
		}
		return &fedpcav1.ReceiveSharesResponse{}, nil // replayed
	}
	me := uint32(cer.member.Point())
	got := map[uint32]bool{}
	var mine []*he.ShamirShare
	for _, s := range req.GetShares() {
		if s.GetToPoint() != me || s.GetFromPoint() < 1 || int(s.GetFromPoint()) > cer.committee.N || got[s.GetFromPoint()] {
			return nil, status.Errorf(codes.InvalidArgument, "share from %d to %d: not for this member, or repeated", s.GetFromPoint(), s.GetToPoint())
		}
		got[s.GetFromPoint()] = true
		plain, err := seal.Open(cer.exchange, shareAAD(cer.id, s.GetFromPoint(), me), s.GetSealed())
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "share from member %d: %v", s.GetFromPoint(), err)
		}
		sh, err := c.params.Codecs().ShamirShare.Unmarshal(plain)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "share from member %d: %v", s.GetFromPoint(), err)
		}
		mine = append(mine, sh)
	}
	if err := cer.member.SetThresholdShares(mine); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	cer.received, cer.receiveReq = true, roundDigest(req)
	return &fedpcav1.ReceiveSharesResponse{}, nil
}

// Finalize implements fedpcav1.CspServiceServer: the member writes its
// secrets and the committee key to disk and becomes ready.
func (c *CSP) Finalize(_ context.Context, req *fedpcav1.FinalizeRequest) (*fedpcav1.FinalizeResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != nil && c.state.CeremonyID == req.GetCeremonyId() && (c.cer == nil || c.cer.id != req.GetCeremonyId()) {
		if !bytes.Equal(req.GetCommitteePublicKey(), c.state.CommitteeKey) {
			return nil, status.Errorf(codes.FailedPrecondition, "ceremony %q was finalized with another committee key (%s…)", req.GetCeremonyId(), c.state.Fingerprint[:16])
		}
		return &fedpcav1.FinalizeResponse{CommitteeKeyFingerprint: c.state.Fingerprint}, nil // retry
	}
	cer, err := c.current(req.GetCeremonyId())
	if err != nil {
		return nil, err
	}
	if !cer.member.Ready() {
		return nil, status.Error(codes.FailedPrecondition, "threshold shares not received yet")
	}
	if _, err := c.params.Codecs().PublicKey.Unmarshal(req.GetCommitteePublicKey()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "committee_public_key: %v", err)
	}
	st := &secretFile{
		CeremonyID: cer.id, HEParams: c.params.ID(), Members: cer.members, Secret: cer.member.SecretState(),
		CommitteeKey: req.GetCommitteePublicKey(), Fingerprint: job.Fingerprint(req.GetCommitteePublicKey()),
		FinalizedAt: time.Now().UTC(),
	}
	b, err := json.Marshal(st)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if err := transport.WriteFileAtomic(c.secretPath(), b); err != nil {
		return nil, status.Errorf(codes.Internal, "write secret key file: %v", err)
	}
	c.state, c.member, c.cer = st, cer.member, nil
	c.log.Info("key ceremony finished", "ceremony", st.CeremonyID, "committee_key", st.Fingerprint[:16])
	return &fedpcav1.FinalizeResponse{CommitteeKeyFingerprint: st.Fingerprint}, nil
}
