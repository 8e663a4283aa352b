package chaos

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"io"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/transport"
)

// Deviations of the deviating-proxy mode: in an episode that has one, the
// honest proxy is wrapped in a test double (gRPC interceptors on its server
// and on its connections to the members) that deviates in one job.
const (
	DevSwapKey       = "swap_key"       // owners are shown a committee key of the proxy's own
	DevDouble        = "double_upload"  // an owner's upload added to the sum twice
	DevDrop          = "drop_upload"    // an owner's upload taken out of the sum, the owner still named
	DevSubset        = "subset_switch"  // one owner's upload switched as the sum, every owner named
	DevCraftedSum    = "crafted_sum"    // the audit's crafted ciphertext (c1 = 2^190 T^-1) sent as the sum
	DevCraftedUpload = "crafted_upload" // one owner's crafted upload, signed by it, let through to the members
	DevForgedOwner   = "forged_owner"   // one owner's statement signed in its name by a certificate of another key, which the CA's holder issued
	DevResubmit      = "resubmit"       // an earlier job's sum sent to the members under a new job
	DevReplay        = "replay_switch"  // key-switch requests replayed: the same, altered, an old job's
	DevLieDone       = "lie_done"       // the user's watch told the job is done, every owner counted
	DevLieFail       = "lie_failed"     // the user's watch told the job failed
	// DevShiftC0: the result of a statistics job shifted by a matrix of
	// the proxy's choosing. The members do not check a statistics job's
	// c0 (it carries the proxy's noise and mask), so a proxy may add any
	// plaintext M to the blinded sum's c0, or remove another mask than the
	// one it added: to the members either is an honest job with another
	// uniform mask, and the user decrypts f(S + N + M). The double adds 2M
	// to the switched result the user fetches (it encrypts twice the
	// sum), which is the same release; the check is that it keeps the
	// honest parties' noise (PROTOCOL.md 5.2: post-processing of S + N by
	// an M chosen without the data). An exact components job binds c0 and
	// refuses such a sum (sim.TestHostileSolve).
	DevShiftC0 = "shift_c0"
)

// AllDeviations lists the deviations, in the order of the test schedule.
var AllDeviations = []string{DevSwapKey, DevDouble, DevDrop, DevSubset, DevCraftedSum, DevCraftedUpload, DevForgedOwner, DevResubmit, DevReplay, DevLieDone, DevLieFail, DevShiftC0}

// refused reports whether the members must refuse the deviation's key
// switch (the sum is not the named owners' proven uploads), and the phrase
// their refusal carries.
func refused(kind string) (bool, string) {
	switch kind {
	case DevDouble, DevDrop, DevSubset, DevCraftedSum, DevResubmit:
		return true, "is not the sum of the"
	case DevCraftedUpload:
		return true, "not proven well formed"
	case DevForgedOwner:
		return true, "presents key"
	}
	return false, ""
}

// deviant is the deviating proxy's test double for one episode. Until job
// is set it is honest; it deviates in that job only.
type deviant struct {
	kind   string
	params *he.Params
	// signer is an owner's certificate key: the owner that colludes with
	// the proxy in crafted_upload signs its crafted upload.
	signer func(owner string) crypto.Signer
	// forge is what the proxy's operator, holding the deployment's CA,
	// issues in forged_owner: a certificate in an owner's name for a key of
	// its own.
	forge func(owner string) (*transport.Credentials, error)

	mu       sync.Mutex
	job      string                // the job it deviates in
	ended    bool                  // that job ended: no more key swaps
	evilKey  []byte                // swap_key: the proxy's own key
	served   int                   // swapped keys or lies served
	uploads  map[string]*recorded  // the deviating job's uploads, by owner, as sent
	sums     map[string]*switchReq // job -> the request the members got
	target   string                // double/drop/subset/crafted_upload/forged_owner: the owner
	from     string                // resubmit: the job whose sum was sent
	applied  int                   // ciphertexts altered
	shares   int                   // shares the members sent in the deviating job
	replays  []string              // replay: what went wrong
	rchecks  int                   // replay: comparisons made
	replayed map[string]bool       // replay: members replayed to
	shift    []int64               // shift_c0: M, in the release's packed order
	seq      int
}

// switchReq is a key-switch request as a member received it (every message
// after the header: the sum's ciphertexts, the owners' uploads), and its
// shares.
type switchReq struct {
	seq    int // order of the first switch
	header *fedpcav1.KeySwitchHeader
	cts    [][]byte
	msgs   []*fedpcav1.KeySwitchRequest
	shares map[string][][]byte // member (target) -> shares
}

// recorded is an upload as its owner sent it.
type recorded struct {
	cts, proofs [][]byte
}

func newDeviant(kind string) *deviant {
	return &deviant{kind: kind, uploads: map[string]*recorded{}, sums: map[string]*switchReq{}, replayed: map[string]bool{}}
}

// serverOptions are the double's interceptors on the proxy's server.
func (d *deviant) serverOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(d.unary), grpc.ChainStreamInterceptor(d.stream)}
}

// dialOptions are its interceptors on the proxy's calls to the members.
func (d *deviant) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainStreamInterceptor(d.switchStream)}
}

func (d *deviant) setJob(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.job = id
}

func (d *deviant) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ended = true
}

func (d *deviant) deviating(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.job != "" && d.job == id
}

// unary swaps the committee key shown to owners while the job runs, and
// lies in the job's status to the user.
func (d *deviant) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if err != nil {
		return resp, err
	}
	switch {
	case d.kind == DevSwapKey && info.FullMethod == fedpcav1.ProxyService_GetCommittee_FullMethodName:
		return d.swapKey(ctx, resp.(*fedpcav1.GetCommitteeResponse)), nil
	case (d.kind == DevLieDone || d.kind == DevLieFail) && info.FullMethod == fedpcav1.ProxyService_GetJob_FullMethodName:
		r := resp.(*fedpcav1.GetJobResponse)
		if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(observerKey)) > 0 || !d.deviating(r.GetJob().GetStatus().GetJobId()) {
			return resp, nil
		}
		lie := proto.Clone(r).(*fedpcav1.GetJobResponse)
		lie.Job.Status = d.lie(r.GetJob().GetStatus())
		return lie, nil
	}
	return resp, nil
}

// swapKey shows an owner the proxy's own key while the job runs.
func (d *deviant) swapKey(ctx context.Context, resp *fedpcav1.GetCommitteeResponse) *fedpcav1.GetCommitteeResponse {
	who, werr := transport.CallerIdentity(ctx)
	d.mu.Lock()
	defer d.mu.Unlock()
	if werr != nil || who.Role != transport.RoleOwner || d.job == "" || d.ended || d.params == nil {
		return resp
	}
	if d.evilKey == nil {
		d.evilKey = d.params.Codecs().PublicKey.Marshal(he.GenerateKeyPair(*d.params).Public)
	}
	swapped := proto.Clone(resp).(*fedpcav1.GetCommitteeResponse)
	swapped.PublicKey, swapped.PublicKeyFingerprint = d.evilKey, job.Fingerprint(d.evilKey)
	d.served++
	return swapped
}

// stream records the deviating job's uploads (the ciphertexts as their
// owners sent them, for the sums it alters on the way to the members) and
// lies in the user's watch of the job.
func (d *deviant) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	switch {
	case info.FullMethod == fedpcav1.ProxyService_Upload_FullMethodName:
		who, err := transport.CallerIdentity(ss.Context())
		if err != nil {
			return handler(srv, ss)
		}
		us := &uploadStream{ServerStream: ss, d: d, owner: who.ID}
		err = handler(srv, us)
		if err == nil && us.deviating && len(us.up.cts) > 0 {
			d.mu.Lock()
			d.uploads[us.owner] = &us.up
			d.mu.Unlock()
		}
		return err
	case info.FullMethod == fedpcav1.ProxyService_WatchJob_FullMethodName && (d.kind == DevLieDone || d.kind == DevLieFail):
		return handler(srv, &lyingStream{ServerStream: ss, d: d})
	case info.FullMethod == fedpcav1.ProxyService_FetchResult_FullMethodName && d.kind == DevShiftC0:
		return handler(srv, &shiftingStream{ServerStream: ss, d: d})
	}
	return handler(srv, ss)
}

// uploadStream is an owner's upload as the proxy's handler reads it: the
// double keeps a copy of the deviating job's ciphertexts.
type uploadStream struct {
	grpc.ServerStream
	d         *deviant
	owner     string
	deviating bool
	up        recorded
}

func (s *uploadStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err != nil {
		return err
	}
	r, ok := m.(*fedpcav1.UploadRequest)
	if !ok {
		return nil
	}
	switch {
	case r.GetHeader() != nil:
		s.deviating = s.d.deviating(r.GetHeader().GetJobId())
	case r.GetCiphertext() != nil && s.deviating:
		s.up.cts = append(s.up.cts, bytes.Clone(r.GetCiphertext()))
	case r.GetProof() != nil && s.deviating:
		s.up.proofs = append(s.up.proofs, bytes.Clone(r.GetProof()))
	}
	return nil
}

// lyingStream tells the user's watch a false state of the job.
type lyingStream struct {
	grpc.ServerStream
	d *deviant
}

func (s *lyingStream) SendMsg(m any) error {
	r, ok := m.(*fedpcav1.WatchJobResponse)
	if !ok || !s.d.deviating(r.GetJob().GetJobId()) {
		return s.ServerStream.SendMsg(m)
	}
	return s.ServerStream.SendMsg(&fedpcav1.WatchJobResponse{Job: s.d.lie(r.GetJob())})
}

// shiftingStream is the user's fetch of the deviating job's result, each
// ciphertext shifted (shift_c0).
type shiftingStream struct {
	grpc.ServerStream
	d     *deviant
	job   string
	index int // of the next ciphertext
}

func (s *shiftingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if r, ok := m.(*fedpcav1.FetchResultRequest); ok && err == nil {
		s.job = r.GetJobId()
	}
	return err
}

func (s *shiftingStream) SendMsg(m any) error {
	r, ok := m.(*fedpcav1.FetchResultResponse)
	if !ok || r.GetCiphertext() == nil || !s.d.deviating(s.job) {
		return s.ServerStream.SendMsg(m)
	}
	ct := s.d.shiftResult(s.index, r.GetCiphertext())
	s.index++
	return s.ServerStream.SendMsg(&fedpcav1.FetchResultResponse{Msg: &fedpcav1.FetchResultResponse_Ciphertext{Ciphertext: ct}})
}

// setShift sets shift_c0's M: the proxy adds 2^(2 bits + 10), at most
// 2^52, to every diagonal entry of the scatter (at 22 bits, 256 squared
// units of the data: far above the noise and within the plaintext's
// range, and the scatter stays positive definite, so the user's analysis
// runs as on any release).
func (d *deviant) setShift(l stats.Layout, bits uint) {
	m := make([]int64, l.Len())
	if l.Kind == stats.Full {
		for i := range l.D {
			m[l.R(i, i)] = 1 << min(2*bits+10, 52)
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.shift = m
}

// shiftResult adds 2M to the i-th ciphertext of the switched result (as
// the user fetches it: it encrypts twice the sum, which the user halves).
func (d *deviant) shiftResult(i int, b []byte) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.params == nil || i >= d.params.Chunks(len(d.shift)) {
		return b
	}
	ct, err := d.params.Codecs().Ciphertext.Unmarshal(b)
	if err != nil {
		return b
	}
	m := slices.Clone(d.params.Chunk(d.shift, i))
	for k := range m {
		m[k] *= 2
	}
	if err := he.NewPlain(*d.params).AddInt64(ct, m); err != nil {
		return b
	}
	d.applied++
	return d.params.Codecs().Ciphertext.Marshal(ct)
}

// observerKey marks the harness's own status calls (gRPC metadata): the
// double lies to the user, not to the harness that checks what it did.
const observerKey = "x-chaos-observer"

// lie is the false state the double tells of its job while it runs (once
// the job has ended it tells the truth: a proxy that lies for ever denies
// service, which no protocol prevents).
func (d *deviant) lie(st *fedpcav1.JobStatus) *fedpcav1.JobStatus {
	if ended(st.GetState()) {
		return st
	}
	st = proto.Clone(st).(*fedpcav1.JobStatus)
	if d.kind == DevLieDone {
		st.State = fedpcav1.JobState_JOB_STATE_DONE
		st.UploadedOwners = nil
		for _, o := range st.GetExpectedOwnerRefs() {
			st.UploadedOwners = append(st.UploadedOwners, o.GetId())
		}
		st.OwnersUploaded = st.GetOwnersExpected()
	} else {
		st.State, st.Reason = fedpcav1.JobState_JOB_STATE_FAILED, "the committee is unreachable"
	}
	d.mu.Lock()
	d.served++
	d.mu.Unlock()
	return st
}

// switchStream alters or replays the proxy's key-switch requests to the
// members.
func (d *deviant) switchStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != fedpcav1.CspService_KeySwitch_FullMethodName {
		return cs, err
	}
	return &switchClient{ClientStream: cs, d: d, member: cc.Target(), replay: func(ctx context.Context) (grpc.ClientStream, error) {
		return streamer(ctx, desc, cc, method, opts...)
	}}, nil
}

type switchClient struct {
	grpc.ClientStream
	d      *deviant
	member string
	replay func(context.Context) (grpc.ClientStream, error)
	req    switchReq
	shares [][]byte
	owner  string // the owner whose upload is being sent
	part   int    // its next part
}

func (s *switchClient) SendMsg(m any) error {
	r, ok := m.(*fedpcav1.KeySwitchRequest)
	if !ok {
		return s.ClientStream.SendMsg(m)
	}
	if h := r.GetHeader(); h != nil {
		s.req.header = h
		return s.ClientStream.SendMsg(m)
	}
	switch {
	case r.GetCiphertext() != nil:
		i := len(s.req.cts)
		ct := s.d.alter(s.req.header, i, r.GetCiphertext())
		s.req.cts = append(s.req.cts, bytes.Clone(ct))
		r = &fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Ciphertext{Ciphertext: ct}}
	case r.GetUpload() != nil:
		s.owner, s.part = r.GetUpload().GetOwner(), 0
		r = s.d.alterUpload(s.req.header, r)
	case r.GetPart() != nil:
		r = s.d.alterPart(s.req.header, s.owner, s.part, r)
		s.part++
	}
	r = proto.Clone(r).(*fedpcav1.KeySwitchRequest) // the proxy reuses its messages
	s.req.msgs = append(s.req.msgs, r)
	return s.ClientStream.SendMsg(r)
}

func (s *switchClient) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if err == nil {
		if r, ok := m.(*fedpcav1.KeySwitchResponse); ok {
			s.shares = append(s.shares, bytes.Clone(r.GetShare()))
		}
		return nil
	}
	if errors.Is(err, io.EOF) && s.req.header != nil {
		s.d.switched(s.Context(), s)
	}
	return err
}

// alter is the ciphertext the double sends a member in place of the sum's
// i-th.
func (d *deviant) alter(h *fedpcav1.KeySwitchHeader, i int, ct []byte) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if h == nil || d.job == "" || h.GetJobId() != d.job || d.params == nil {
		return ct
	}
	codec := d.params.Codecs().Ciphertext
	rq := d.params.RingQ().AtLevel(d.params.Level())
	switch d.kind {
	case DevResubmit:
		// The latest earlier job whose sum has the same shape.
		if d.from == "" {
			analysis := specAnalysis(h)
			best := -1
			for id, r := range d.sums {
				if id != d.job && len(r.cts) == int(h.GetCiphertexts()) && specAnalysis(r.header) == analysis && r.seq > best {
					d.from, best = id, r.seq
				}
			}
		}
		if r := d.sums[d.from]; r != nil && i < len(r.cts) {
			d.applied++
			return r.cts[i]
		}
	case DevCraftedSum:
		sum, err := codec.Unmarshal(ct)
		if err != nil {
			return ct
		}
		sim.CraftC1(*d.params, sum)
		d.applied++
		return codec.Marshal(sum)
	case DevDouble, DevDrop, DevSubset, DevCraftedUpload, DevForgedOwner:
		// The target: the first included owner whose upload the double saw.
		if d.target == "" {
			for _, o := range h.GetOwners() {
				if up := d.uploads[o]; up != nil && len(up.cts) == int(h.GetCiphertexts()) {
					d.target = o
					break
				}
			}
		}
		up := d.uploads[d.target]
		if up == nil || i >= len(up.cts) || d.kind == DevForgedOwner {
			return ct // forged_owner: the sum is the owners' own; only a statement changes
		}
		sum, err1 := codec.Unmarshal(ct)
		own, err2 := codec.Unmarshal(up.cts[i])
		if err1 != nil || err2 != nil {
			return ct
		}
		switch d.kind {
		case DevDouble:
			d.params.AddInto(sum, own)
		case DevDrop:
			rq.Sub(sum.Value[0], own.Value[0], sum.Value[0])
			rq.Sub(sum.Value[1], own.Value[1], sum.Value[1])
		case DevSubset:
			sum = own
		case DevCraftedUpload:
			// The sum as if the target had uploaded its crafted
			// ciphertext: the members' sum check passes, their proof
			// check is what must catch it.
			crafted := own.CopyNew()
			sim.CraftC1(*d.params, crafted)
			rq.Sub(sum.Value[1], own.Value[1], sum.Value[1])
			rq.Add(sum.Value[1], crafted.Value[1], sum.Value[1])
		}
		d.applied++
		return codec.Marshal(sum)
	}
	return ct
}

// alterUpload is, in crafted_upload, the target's upload statement signed
// again by the target (which colludes) for its crafted ciphertexts; in
// forged_owner, the target's statement of its own ciphertexts signed by a
// certificate in its name of another key.
func (d *deviant) alterUpload(h *fedpcav1.KeySwitchHeader, r *fedpcav1.KeySwitchRequest) *fedpcav1.KeySwitchRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	up := r.GetUpload()
	if d.kind == DevForgedOwner {
		return d.forgeUpload(h, r)
	}
	if d.kind != DevCraftedUpload || h == nil || h.GetJobId() != d.job || up.GetOwner() != d.target || d.signer == nil {
		return r
	}
	var digests []job.PartDigests
	for i := range d.uploads[d.target].cts {
		part, ok := d.craftedPart(i)
		if !ok {
			return r
		}
		digests = append(digests, part.Digests())
	}
	sig, err := seal.Sign(d.signer(d.target), job.UploadContext, job.UploadStatement(d.job, d.target, digests))
	if err != nil {
		return r
	}
	return &fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Upload{Upload: &fedpcav1.OwnerUpload{Owner: up.GetOwner(), Certificate: up.GetCertificate(), Signature: sig}}}
}

// forgeUpload is forged_owner's statement (see alterUpload). d.mu must be
// held.
func (d *deviant) forgeUpload(h *fedpcav1.KeySwitchHeader, r *fedpcav1.KeySwitchRequest) *fedpcav1.KeySwitchRequest {
	up := r.GetUpload()
	rec := d.uploads[d.target]
	if h == nil || h.GetJobId() != d.job || up.GetOwner() != d.target || d.forge == nil || rec == nil {
		return r
	}
	var digests []job.PartDigests
	for i, b := range rec.cts {
		ct, err := d.params.Codecs().Ciphertext.Unmarshal(b)
		if err != nil || i >= len(rec.proofs) {
			return r
		}
		digests = append(digests, job.Part{C0Digest: job.C0Digest(*d.params, ct), C1: d.params.AppendPoly(nil, ct.Value[1]), Proof: rec.proofs[i]}.Digests())
	}
	forged, err := d.forge(d.target)
	if err != nil {
		return r
	}
	sig, err := seal.Sign(forged.Signer(), job.UploadContext, job.UploadStatement(d.job, d.target, digests))
	if err != nil {
		return r
	}
	d.applied++
	return &fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Upload{Upload: &fedpcav1.OwnerUpload{Owner: up.GetOwner(), Certificate: forged.Leaf.Raw, Signature: sig}}}
}

// alterPart is, in crafted_upload, the target's i-th part with its c1
// crafted (and the proof of the honest one: the target has none for it).
func (d *deviant) alterPart(h *fedpcav1.KeySwitchHeader, owner string, i int, r *fedpcav1.KeySwitchRequest) *fedpcav1.KeySwitchRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.kind != DevCraftedUpload || h == nil || h.GetJobId() != d.job || owner != d.target {
		return r
	}
	part, ok := d.craftedPart(i)
	if !ok {
		return r
	}
	return &fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Part{Part: &fedpcav1.UploadPart{C0Digest: part.C0Digest[:], C1: part.C1, Proof: part.Proof}}}
}

// craftedPart is the target's i-th ciphertext with c1 crafted, as a part,
// with the proof of the honest one (the target has none for the crafted
// c1). d.mu must be held.
func (d *deviant) craftedPart(i int) (job.Part, bool) {
	up := d.uploads[d.target]
	if up == nil || i >= len(up.cts) || i >= len(up.proofs) {
		return job.Part{}, false
	}
	ct, err := d.params.Codecs().Ciphertext.Unmarshal(up.cts[i])
	if err != nil {
		return job.Part{}, false
	}
	sim.CraftC1(*d.params, ct)
	return job.Part{C0Digest: job.C0Digest(*d.params, ct), C1: d.params.AppendPoly(nil, ct.Value[1]), Proof: up.proofs[i]}, true
}

// switched records a member's completed switch and, for the replay
// deviation, replays requests to it: the same one (the same shares must
// come back), one naming fewer owners (refused), and an earlier job's (its
// shares of then, or refused).
func (d *deviant) switched(ctx context.Context, s *switchClient) {
	id := s.req.header.GetJobId()
	d.mu.Lock()
	r := d.sums[id]
	if r == nil {
		d.seq++
		r = &switchReq{seq: d.seq, header: s.req.header, cts: s.req.cts, msgs: s.req.msgs, shares: map[string][][]byte{}}
		d.sums[id] = r
	}
	r.shares[s.member] = s.shares
	if id == d.job {
		d.shares += len(s.shares)
	}
	replay := d.kind == DevReplay && id == d.job && !d.replayed[s.member]
	d.replayed[s.member] = d.replayed[s.member] || replay
	var old *switchReq
	for oid, o := range d.sums {
		if oid != id && o.shares[s.member] != nil && (old == nil || o.seq > old.seq) {
			old = o
		}
	}
	d.mu.Unlock()
	if !replay {
		return
	}
	var bad []string
	checks := 0
	same, err := s.resend(ctx, s.req.header, s.req.msgs)
	checks++
	if err != nil || !slices.EqualFunc(same, s.shares, bytes.Equal) {
		bad = append(bad, s.member+": the same request replayed did not get the same shares back: "+errString(err))
	}
	if len(s.req.header.GetOwners()) > 1 {
		fewer := proto.Clone(s.req.header).(*fedpcav1.KeySwitchHeader)
		fewer.Owners = fewer.Owners[1:]
		_, err := s.resend(ctx, fewer, s.req.msgs)
		checks++
		if err == nil {
			bad = append(bad, s.member+": a second request for the job naming fewer owners was switched")
		}
	}
	if old != nil {
		got, err := s.resend(ctx, old.header, old.msgs)
		checks++
		if err == nil && !slices.EqualFunc(got, old.shares[s.member], bytes.Equal) {
			bad = append(bad, s.member+": an old job's request replayed got new shares")
		}
	}
	d.mu.Lock()
	d.replays, d.rchecks = append(d.replays, bad...), d.rchecks+checks
	d.mu.Unlock()
}

// resend sends a key-switch request on a new stream (the header, then the
// messages: the sum's ciphertexts and the owners' uploads) and returns the
// shares.
func (s *switchClient) resend(ctx context.Context, h *fedpcav1.KeySwitchHeader, msgs []*fedpcav1.KeySwitchRequest) ([][]byte, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	cs, err := s.replay(ctx)
	if err != nil {
		return nil, err
	}
	if err := cs.SendMsg(&fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Header{Header: h}}); err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if err := cs.SendMsg(m); err != nil {
			break
		}
	}
	if err := cs.CloseSend(); err != nil {
		return nil, err
	}
	var out [][]byte
	for {
		var r fedpcav1.KeySwitchResponse
		if err := cs.RecvMsg(&r); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		out = append(out, r.GetShare())
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

func specAnalysis(h *fedpcav1.KeySwitchHeader) string {
	s, err := job.ParseSpec(h.GetSpec())
	if err != nil {
		return ""
	}
	return s.Analysis
}

// outcome is what the double did in its job.
type outcome struct {
	kind         string
	served       int
	target, from string
	applied      int
	shares       int
	replays      []string
	replayChecks int
	shift        []int64
}

func (d *deviant) outcome() outcome {
	d.mu.Lock()
	defer d.mu.Unlock()
	return outcome{kind: d.kind, served: d.served, target: d.target, from: d.from, applied: d.applied, shares: d.shares, replays: d.replays, replayChecks: d.rchecks, shift: d.shift}
}
