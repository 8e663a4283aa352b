package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// hostileEnv is a cluster with one CSP, a user and owners driven by hand.
type hostileEnv struct {
	cl     *Cluster
	params he.Params
	sch    *schema.Schema
	ids    []string // the owners holding parts, in order
	parts  [][]byte
	u      *user.Client
	owners map[string]fedpcav1.ProxyServiceClient
	cpk    *rlwe.PublicKey
}

func newHostileEnv(t *testing.T, ctx context.Context) *hostileEnv {
	t.Helper()
	sch, owners := wdbcOwners(t, true)
	ids := []string{"owner/outsider"}
	for _, o := range owners {
		ids = append(ids, "owner/"+o.ID)
	}
	cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: 1, Users: []string{"alice", "mallory"}, Identities: ids, AllowNoNoise: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	e := &hostileEnv{cl: cl, params: cl.Params(), sch: sch, owners: map[string]fedpcav1.ProxyServiceClient{}}
	for _, o := range owners {
		e.ids = append(e.ids, o.ID)
		e.parts = append(e.parts, o.CSV)
	}
	for _, id := range ids {
		conn, _, err := cl.DialProxy(id)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		e.owners[strings.TrimPrefix(id, "owner/")] = fedpcav1.NewProxyServiceClient(conn)
	}
	if e.u, err = cl.User("alice"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.u.Close() })
	cmt, err := e.owners["outsider"].GetCommittee(ctx, &fedpcav1.GetCommitteeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if e.cpk, err = e.params.Codecs().PublicKey.Unmarshal(cmt.GetPublicKey()); err != nil {
		t.Fatal(err)
	}
	return e
}

// share computes the valid upload of owner i (e.ids[i], signed with its
// certificate key) for a job.
func (e *hostileEnv) share(t *testing.T, spec *job.Spec, i int) Upload {
	t.Helper()
	d, err := e.cl.Dialer("owner/" + e.ids[i])
	if err != nil {
		t.Fatal(err)
	}
	up, err := OwnerUpload(spec, e.sch, e.params, e.cpk, e.parts[i], e.ids[i], d.Creds)
	if err != nil {
		t.Fatal(err)
	}
	return up
}

// msgs are an upload's messages after the header: each ciphertext, then its
// proof.
func msgs(up Upload) []*fedpcav1.UploadRequest {
	var out []*fedpcav1.UploadRequest
	for i, b := range up.Blobs {
		out = append(out, ctMsg(b), &fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Proof{Proof: up.Proofs[i]}})
	}
	return out
}

func ctMsg(b []byte) *fedpcav1.UploadRequest {
	return &fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Ciphertext{Ciphertext: b}}
}

// upload runs an upload with a header and messages, as transport.Upload
// does (waiting to be admitted); without a header it sends the messages at
// once, as a broken client would.
func upload(ctx context.Context, c fedpcav1.ProxyServiceClient, hd *fedpcav1.UploadHeader, ms ...*fedpcav1.UploadRequest) (*fedpcav1.UploadResponse, error) {
	stream, err := c.Upload(ctx)
	if err != nil {
		return nil, err
	}
	if hd != nil {
		if err := stream.Send(&fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Header{Header: hd}}); err != nil {
			return stream.Recv()
		}
		first, err := stream.Recv()
		if err != nil || !first.GetAdmitted() {
			return first, err
		}
	}
	for _, m := range ms {
		if err := stream.Send(m); err != nil {
			break
		}
	}
	stream.CloseSend()
	return stream.Recv()
}

// header is an upload's header (unsigned unless sig is given).
func header(id string, blobs [][]byte, sig ...[]byte) *fedpcav1.UploadHeader {
	h := sha256.New()
	for _, b := range blobs {
		h.Write(b)
	}
	hd := &fedpcav1.UploadHeader{JobId: id, Ciphertexts: uint32(len(blobs)), Digest: h.Sum(nil)}
	if len(sig) > 0 {
		hd.Signature = sig[0]
	}
	return hd
}

func wantCode(t *testing.T, what string, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Errorf("%s: got %v (%v), want %v containing %q", what, status.Code(err), err, code, msg)
	}
}

// TestHostileUploads: malformed, oversized, wrong-parameter and wrong-count
// ciphertexts, unknown jobs, duplicate and conflicting uploads and uploads
// after sealing each get the right code and a message naming the problem,
// and the job's state is unchanged: the final release is exactly the sum of
// the valid uploads.
func TestHostileUploads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newHostileEnv(t, ctx)
	names := []string{"hospital-a", "hospital-b", "hospital-c", "hospital-d", "hospital-e"}
	spec, err := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, NoNoise: true, Owners: names[:2], Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.u.Submit(ctx, spec, e.sch); err != nil {
		t.Fatal(err)
	}
	id := spec.ID()
	a, b := e.owners["hospital-a"], e.owners["hospital-b"]
	upA := e.share(t, spec, 0)
	good, sigA := upA.Blobs, upA.Header.Signature
	otherUp := e.share(t, spec, 0) // same rows, fresh encryption: another upload
	other := otherUp.Blobs
	upB := e.share(t, spec, 1)
	level0 := rlwe.NewCiphertext(e.params.Parameters, 1, 0)
	l0, _ := level0.MarshalBinary()
	unreduced := bytes.Clone(good[0])
	for i := 1000; i < 1008; i++ {
		unreduced[i] = 0xff // a coefficient (the header is 283 bytes): 2^64-1 is above every modulus
	}
	junk := bytes.Repeat([]byte{7}, 1000)
	huge := make([]byte, transport.MaxMessageBytes+1)
	crafted, craftedProof := craftedUpload(t, e.params, good[0], upA.Proofs[0])
	proof := func(b []byte) *fedpcav1.UploadRequest {
		return &fedpcav1.UploadRequest{Msg: &fedpcav1.UploadRequest_Proof{Proof: b}}
	}

	cases := []struct {
		what   string
		client fedpcav1.ProxyServiceClient
		hd     *fedpcav1.UploadHeader
		msgs   []*fedpcav1.UploadRequest
		code   codes.Code
		msg    string
	}{
		{"unknown job", a, header(strings.Repeat("0", 64), good, sigA), msgs(upA), codes.NotFound, "no such job"},
		{"owner not named", e.owners["hospital-c"], header(id, good, sigA), msgs(upA), codes.PermissionDenied, "is neither the user nor an owner of job"},
		{"no header", a, nil, msgs(upA), codes.InvalidArgument, "first message must be the upload header"},
		{"wrong count", a, &fedpcav1.UploadHeader{JobId: id, Ciphertexts: 3, Digest: header(id, good).Digest}, msgs(upA), codes.InvalidArgument, "3 announced"},
		{"bad digest length", a, &fedpcav1.UploadHeader{JobId: id, Ciphertexts: 1, Digest: []byte{1}}, msgs(upA), codes.InvalidArgument, "digest"},
		{"malformed ciphertext", a, header(id, [][]byte{junk}), []*fedpcav1.UploadRequest{ctMsg(junk)}, codes.InvalidArgument, "ciphertext 0: ciphertext: 1000 bytes"},
		{"wrong parameters (level 0)", a, header(id, [][]byte{l0}), []*fedpcav1.UploadRequest{ctMsg(l0)}, codes.InvalidArgument, "ciphertext 0"},
		{"unreduced coefficient", a, header(id, [][]byte{unreduced}), []*fedpcav1.UploadRequest{ctMsg(unreduced)}, codes.InvalidArgument, "not reduced modulo"},
		{"fewer ciphertexts", a, header(id, good, sigA), nil, codes.InvalidArgument, "stream ended after 0 of 1"},
		{"more ciphertexts", a, header(id, good, sigA), append(msgs(upA), ctMsg(good[0])), codes.InvalidArgument, "more than the 1 announced"},
		{"digest mismatch", a, header(id, other, sigA), msgs(upA), codes.InvalidArgument, "not the header's digest"},
		{"oversized message", a, header(id, good, sigA), []*fedpcav1.UploadRequest{ctMsg(huge)}, codes.ResourceExhausted, ""},
		// Proofs and signatures.
		{"no proof", a, header(id, good, sigA), []*fedpcav1.UploadRequest{ctMsg(good[0])}, codes.InvalidArgument, "expected the proof of ciphertext 0"},
		{"a ciphertext for a proof", a, header(id, good, sigA), []*fedpcav1.UploadRequest{ctMsg(good[0]), ctMsg(good[0])}, codes.InvalidArgument, "expected the proof of ciphertext 0"},
		{"malformed proof", a, header(id, good, sigA), []*fedpcav1.UploadRequest{ctMsg(good[0]), proof(junk)}, codes.InvalidArgument, "not proven well formed"},
		{"another ciphertext's proof", a, header(id, good, sigA), []*fedpcav1.UploadRequest{ctMsg(good[0]), proof(otherUp.Proofs[0])}, codes.InvalidArgument, "not proven well formed"},
		{"another owner's upload", a, header(id, upB.Blobs, upB.Header.Signature), msgs(upB), codes.InvalidArgument, "not proven well formed"},
		{"crafted ciphertext (c1 = 2^124 T^-1)", a, header(id, [][]byte{crafted}, sigA), []*fedpcav1.UploadRequest{ctMsg(crafted), proof(craftedProof)}, codes.InvalidArgument, "not proven well formed"},
		{"unsigned", a, header(id, good), msgs(upA), codes.InvalidArgument, "not signed by owner hospital-a"},
		{"signed by another owner", a, header(id, good, upB.Header.Signature), msgs(upA), codes.InvalidArgument, "not signed by owner hospital-a"},
		{"signature of another upload", a, header(id, good, otherUp.Header.Signature), msgs(upA), codes.InvalidArgument, "not signed by owner hospital-a"},
	}
	for _, tc := range cases {
		_, err := upload(ctx, tc.client, tc.hd, tc.msgs...)
		wantCode(t, tc.what, err, tc.code, tc.msg)
	}
	st := jobStatus(t, ctx, a, id)
	if len(st.GetUploadedOwners()) != 0 || st.GetState() != fedpcav1.JobState_JOB_STATE_OPEN {
		t.Fatalf("after hostile uploads the job is %s with %v uploaded", st.GetState(), st.GetUploadedOwners())
	}

	// A valid upload, its re-send, and a conflicting one.
	if r, err := upload(ctx, a, upA.Header, msgs(upA)...); err != nil || r.GetAlreadyIncluded() {
		t.Fatalf("valid upload: %v %v", r, err)
	}
	if r, err := upload(ctx, a, upA.Header, msgs(upA)...); err != nil || !r.GetAlreadyIncluded() {
		t.Fatalf("re-sent upload: %v %v", r, err)
	}
	_, err = upload(ctx, a, otherUp.Header, msgs(otherUp)...)
	wantCode(t, "conflicting upload", err, codes.AlreadyExists, "different upload from this owner is already included")

	// The included upload's proofs wait for the switch in a file named by
	// its digest (the refused conflicting one left none in its place).
	proofs := filepath.Join(e.cl.cfg.Dir, "state", "proxy", "proofs", id)
	if files, _ := os.ReadDir(proofs); len(files) != 1 || files[0].Name() != "hospital-a-"+hex.EncodeToString(upA.Header.Digest)+".pb" {
		t.Fatalf("stored proofs after one included upload: %v", files)
	}

	// The second owner completes the job; then uploads are refused.
	if _, err := upload(ctx, b, upB.Header, msgs(upB)...); err != nil {
		t.Fatal(err)
	}
	done, err := e.u.Wait(ctx, id, nil)
	if err != nil || done.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		t.Fatalf("job: %v %v", done, err)
	}
	if _, err := os.Stat(proofs); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the ended job's proofs are still stored: %v", err)
	}
	_, err = upload(ctx, e.owners["hospital-b"], header(id, other), msgs(otherUp)...)
	wantCode(t, "conflicting upload after sealing", err, codes.AlreadyExists, "already included")
	_, err = e.owners["hospital-b"].Decline(ctx, &fedpcav1.DeclineRequest{JobId: id, Reason: fedpcav1.DeclineReason_DECLINE_REASON_POLICY})
	wantCode(t, "decline after upload", err, codes.FailedPrecondition, "already uploaded")

	// The release is exactly the sum of the two valid uploads.
	finishExact(ctx, t, e.u, spec, e.sch, e.parts[:2]...)

	// A new job sealed at its deadline: a late upload is refused as closed.
	// (The uploads are proven before the job is created: proving takes
	// long under the race detector.)
	spec2, _ := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, NoNoise: true, Owners: names[:2], MinOwners: 1, Deadline: time.Now().Add(4 * time.Second)})
	g2, g3 := e.share(t, spec2, 0), e.share(t, spec2, 1)
	if _, err := e.u.Submit(ctx, spec2, e.sch); err != nil {
		t.Fatal(err)
	}
	if _, err := upload(ctx, a, g2.Header, msgs(g2)...); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(spec2.Deadline) + 100*time.Millisecond)
	_, err = upload(ctx, b, g3.Header, msgs(g3)...)
	wantCode(t, "upload after the deadline", err, codes.FailedPrecondition, "")
}

// craftedUpload returns the audit's attack ciphertext, (c0, c1 = 2^124 T^-1)
// in place of a valid one's, with the valid one's proof (an owner cannot
// prove the crafted c1: it has no short preimage).
func craftedUpload(t *testing.T, p he.Params, valid, proof []byte) ([]byte, []byte) {
	t.Helper()
	ct, err := p.Codecs().Ciphertext.Unmarshal(valid)
	if err != nil {
		t.Fatal(err)
	}
	CraftC1(p, ct)
	return p.Codecs().Ciphertext.Marshal(ct), proof
}

func jobStatus(t *testing.T, ctx context.Context, c fedpcav1.ProxyServiceClient, id string) *fedpcav1.JobStatus {
	t.Helper()
	r, err := c.GetJob(ctx, &fedpcav1.GetJobRequest{JobId: id})
	if err != nil {
		t.Fatal(err)
	}
	return r.GetJob().GetStatus()
}

// TestHostileJobs: bad signatures and inconsistent job requests are refused
// with the right code and a message naming the problem.
func TestHostileJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newHostileEnv(t, ctx)
	spec, err := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, Epsilon: 1, Owners: []string{"hospital-a"}, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	alice := e.cl.Creds("user/alice")
	mallory := e.cl.Creds("user/mallory")
	sig, _ := spec.Sign(alice.Signer())
	badSig, _ := spec.Sign(mallory.Signer())
	kp, _ := user.LoadKeys(e.cl.cfg.Dir+"/state/user-alice", e.params)
	pk := e.params.Codecs().PublicKey.Marshal(kp.Public)
	otherPK := e.params.Codecs().PublicKey.Marshal(he.GenerateKeyPair(e.params).Public)
	ud, _ := e.cl.Dialer("user/alice")
	conn, _ := ud.Dial(e.cl.ProxyAddr(), transport.Identity{Role: transport.RoleProxy})
	defer conn.Close()
	alicePX := fedpcav1.NewProxyServiceClient(conn)
	md, _ := e.cl.Dialer("user/mallory")
	mconn, _ := md.Dial(e.cl.ProxyAddr(), transport.Identity{Role: transport.RoleProxy})
	defer mconn.Close()
	malloryPX := fedpcav1.NewProxyServiceClient(mconn)
	canon := spec.Canonical()
	other := *spec
	other.SchemaHash = strings.Repeat("0", 64)

	for _, tc := range []struct {
		what string
		c    fedpcav1.ProxyServiceClient
		req  *fedpcav1.CreateJobRequest
		code codes.Code
		msg  string
	}{
		{"signature by another user's key", alicePX, &fedpcav1.CreateJobRequest{Spec: canon, Signature: badSig, UserPublicKey: pk, Schema: e.sch.Canonical()}, codes.PermissionDenied, "signature does not verify"},
		{"no signature", alicePX, &fedpcav1.CreateJobRequest{Spec: canon, UserPublicKey: pk, Schema: e.sch.Canonical()}, codes.PermissionDenied, "signature"},
		{"spec of another user", malloryPX, &fedpcav1.CreateJobRequest{Spec: canon, Signature: sig, UserPublicKey: pk, Schema: e.sch.Canonical()}, codes.PermissionDenied, "names user spiffe://fedpca/user/alice"},
		{"non-canonical spec", alicePX, &fedpcav1.CreateJobRequest{Spec: append(bytes.Clone(canon), ' '), Signature: sig, UserPublicKey: pk, Schema: e.sch.Canonical()}, codes.InvalidArgument, "spec"},
		{"another user key", alicePX, &fedpcav1.CreateJobRequest{Spec: canon, Signature: sig, UserPublicKey: otherPK, Schema: e.sch.Canonical()}, codes.InvalidArgument, "user_public_key"},
		{"malformed user key", alicePX, &fedpcav1.CreateJobRequest{Spec: canon, Signature: sig, UserPublicKey: []byte("key"), Schema: e.sch.Canonical()}, codes.InvalidArgument, "user_public_key"},
		{"schema of another dataset", alicePX, &fedpcav1.CreateJobRequest{Spec: other.Canonical(), Signature: mustSign(t, &other, alice), UserPublicKey: pk, Schema: e.sch.Canonical()}, codes.InvalidArgument, "schema_hash"},
	} {
		_, err := tc.c.CreateJob(ctx, tc.req)
		wantCode(t, tc.what, err, tc.code, tc.msg)
	}
	// Reads by outsiders.
	if _, err := alicePX.CreateJob(ctx, &fedpcav1.CreateJobRequest{Spec: canon, Signature: sig, UserPublicKey: pk, Schema: e.sch.Canonical(), OwnerRefs: e.cl.OwnerRefs("hospital-a")}); err != nil {
		t.Fatal(err)
	}
	_, err = malloryPX.GetJob(ctx, &fedpcav1.GetJobRequest{JobId: spec.ID()})
	wantCode(t, "another user reads the job", err, codes.PermissionDenied, "neither the user nor an owner")
	_, err = e.owners["outsider"].GetJob(ctx, &fedpcav1.GetJobRequest{JobId: spec.ID()})
	wantCode(t, "an owner not in the job reads it", err, codes.PermissionDenied, "neither the user nor an owner")
	fr, err := malloryPX.FetchResult(ctx, &fedpcav1.FetchResultRequest{JobId: spec.ID()})
	if err == nil {
		_, err = fr.Recv()
	}
	wantCode(t, "another user fetches the result", err, codes.PermissionDenied, "only the job's user")
	fr, err = alicePX.FetchResult(ctx, &fedpcav1.FetchResultRequest{JobId: spec.ID()})
	if err == nil {
		_, err = fr.Recv()
	}
	wantCode(t, "result before the job is done", err, codes.FailedPrecondition, "no result yet")
}

func mustSign(t *testing.T, s *job.Spec, c *transport.Credentials) []byte {
	sig, err := s.Sign(c.Signer())
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

// keySwitch sends a KeySwitch request straight to a member, as the proxy
// does (the header, the sum's ciphertexts, each included owner's upload),
// and returns the shares.
func keySwitch(ctx context.Context, c fedpcav1.CspServiceClient, hd *fedpcav1.KeySwitchHeader, cts [][]byte, ups ...switchUpload) ([][]byte, error) {
	stream, err := c.KeySwitch(ctx)
	if err != nil {
		return nil, err
	}
	send := func(m *fedpcav1.KeySwitchRequest) error {
		if err := stream.Send(m); err != nil {
			_, err = stream.Recv()
			return err
		}
		return nil
	}
	if err := send(&fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Header{Header: hd}}); err != nil {
		return nil, err
	}
	for _, b := range cts {
		if err := send(&fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Ciphertext{Ciphertext: b}}); err != nil {
			return nil, err
		}
	}
	for _, up := range ups {
		if err := send(&fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Upload{Upload: up.hd}}); err != nil {
			return nil, err
		}
		for _, pt := range up.parts {
			if err := send(&fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Part{Part: pt}}); err != nil {
				return nil, err
			}
		}
	}
	stream.CloseSend()
	var out [][]byte
	for range cts {
		r, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		out = append(out, r.GetShare())
	}
	return out, nil
}

// switchUpload is an owner's upload as the proxy sends it to a member.
type switchUpload struct {
	hd    *fedpcav1.OwnerUpload
	parts []*fedpcav1.UploadPart
}

// forMembers turns owner i's upload into what a member receives of it, with
// its decoded ciphertexts (for the sum).
func (e *hostileEnv) forMembers(t *testing.T, up Upload, i int) (switchUpload, []*rlwe.Ciphertext) {
	t.Helper()
	d, _ := e.cl.Dialer("owner/" + e.ids[i])
	su := switchUpload{hd: &fedpcav1.OwnerUpload{Owner: e.ids[i], Certificate: d.Creds.Leaf.Raw, Signature: up.Header.Signature}}
	var cts []*rlwe.Ciphertext
	for k, b := range up.Blobs {
		ct, err := e.params.Codecs().Ciphertext.Unmarshal(b)
		if err != nil {
			t.Fatal(err)
		}
		c0 := job.C0Digest(e.params, ct)
		su.parts = append(su.parts, &fedpcav1.UploadPart{C0Digest: c0[:], C1: e.params.AppendPoly(nil, ct.Value[1]), Proof: up.Proofs[k]})
		cts = append(cts, ct)
	}
	return su, cts
}

// TestHostileOwnerList: the proxy takes a job only with the owner list its
// spec commits to (not with an owner added, removed or replaced, nor out of
// order); it gives each named owner, with the ticket and without the list,
// a proof of its own ID that verifies against the signed root, and no
// ticket to an owner the list does not name.
func TestHostileOwnerList(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newHostileEnv(t, ctx)
	names := []string{"hospital-a", "hospital-b"}
	spec, err := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, NoNoise: true, Owners: names, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	sig, err := spec.Sign(e.cl.Creds("user/alice").Signer())
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := user.LoadKeys(e.cl.cfg.Dir+"/state/user-alice", e.params)
	create := func(owners []string) error {
		_, err := e.u.Proxy().CreateJob(ctx, &fedpcav1.CreateJobRequest{Spec: spec.Canonical(), Signature: sig,
			UserPublicKey: e.params.Codecs().PublicKey.Marshal(kp.Public), Schema: e.sch.Canonical(), OwnerRefs: e.cl.OwnerRefs(owners...)})
		return err
	}
	for _, c := range []struct {
		what   string
		owners []string
		msg    string
	}{
		{"an owner added", []string{"hospital-a", "hospital-b", "hospital-z"}, "3 owners, the spec commits to 2"},
		{"an owner removed", []string{"hospital-a"}, "1 owners, the spec commits to 2"},
		{"an owner replaced", []string{"hospital-a", "hospital-z"}, "not the spec's owners_root"},
		{"out of order", []string{"hospital-b", "hospital-a"}, "sorted"},
		{"no list", nil, "0 owners"},
	} {
		wantCode(t, c.what, create(c.owners), codes.InvalidArgument, c.msg)
	}
	// The list with an owner's key replaced (a certificate the proxy's CA
	// could issue in its name) is not the list the user signed.
	rekeyed := e.cl.OwnerRefs(names...)
	rekeyed[1].Key = job.Fingerprint([]byte("a key of the proxy's"))
	_, err = e.u.Proxy().CreateJob(ctx, &fedpcav1.CreateJobRequest{Spec: spec.Canonical(), Signature: sig,
		UserPublicKey: e.params.Codecs().PublicKey.Marshal(kp.Public), Schema: e.sch.Canonical(), OwnerRefs: rekeyed})
	wantCode(t, "an owner's key replaced", err, codes.InvalidArgument, "not the spec's owners_root")
	if err := create(names); err != nil {
		t.Fatal(err)
	}
	for _, o := range names {
		r, err := e.owners[o].GetJob(ctx, &fedpcav1.GetJobRequest{JobId: spec.ID(), Ticket: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := job.ParseSpec(r.GetJob().GetSpec())
		if err != nil || got.ID() != spec.ID() {
			t.Fatalf("%s's ticket: %v", o, err)
		}
		p := r.GetOwnerProof()
		keyed := func(id string) job.Owner { return transport.Owners(e.cl.OwnerRefs(id))[0] }
		if err := got.CheckMember(keyed(o), job.OwnerProof{Index: int(p.GetIndex()), Path: p.GetPath()}); err != nil {
			t.Fatalf("%s's proof: %v", o, err)
		}
		if other := names[1-int(p.GetIndex())]; got.CheckMember(keyed(other), job.OwnerProof{Index: int(p.GetIndex()), Path: p.GetPath()}) == nil {
			t.Fatalf("%s's proof verifies for %s", o, other)
		}
		if len(r.GetJob().GetStatus().GetExpectedOwnerRefs()) != 0 || bytes.Contains(r.GetJob().GetSpec(), []byte(names[1-int(p.GetIndex())])) {
			t.Fatalf("%s's ticket names the other owner", o)
		}
	}
	_, err = e.owners["outsider"].GetJob(ctx, &fedpcav1.GetJobRequest{JobId: spec.ID(), Ticket: true})
	wantCode(t, "a ticket for an owner the list does not name", err, codes.PermissionDenied, "neither the user nor an owner")
	// An owner's full status and listing count the owners without naming
	// them; the user's name them.
	full, err := e.owners["hospital-a"].GetJob(ctx, &fedpcav1.GetJobRequest{JobId: spec.ID()})
	if err != nil {
		t.Fatal(err)
	}
	list, err := e.owners["hospital-a"].ListJobs(ctx, &fedpcav1.ListJobsRequest{})
	if err != nil || len(list.GetJobs()) != 1 {
		t.Fatalf("an owner's listing: %v", err)
	}
	for _, st := range []*fedpcav1.JobStatus{full.GetJob().GetStatus(), list.GetJobs()[0].GetStatus()} {
		if len(st.GetExpectedOwnerRefs()) != 0 || st.GetOwnersExpected() != 2 {
			t.Fatalf("an owner's status names %v, counts %d", st.GetExpectedOwnerRefs(), st.GetOwnersExpected())
		}
	}
	mine, err := e.u.Proxy().GetJob(ctx, &fedpcav1.GetJobRequest{JobId: spec.ID()})
	if err != nil || strings.Join(job.OwnerIDs(transport.Owners(mine.GetJob().GetStatus().GetExpectedOwnerRefs())), ",") != strings.Join(names, ",") {
		t.Fatalf("the user's status: %v, %v", mine.GetJob().GetStatus().GetExpectedOwnerRefs(), err)
	}
}

// TestHostileKeySwitch: a member switches only specs signed by their user,
// only to the key the spec names, and at most once per job (a replay gets the
// same shares, another request is refused).
func TestHostileKeySwitch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newHostileEnv(t, ctx)
	spec, err := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, Epsilon: 1, Owners: []string{"hospital-a", "hospital-b"}, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.u.Submit(ctx, spec, e.sch); err != nil {
		t.Fatal(err)
	}
	info, err := e.owners["hospital-a"].GetJob(ctx, &fedpcav1.GetJobRequest{JobId: spec.ID()})
	if err != nil {
		t.Fatal(err)
	}
	kp, _ := user.LoadKeys(e.cl.cfg.Dir+"/state/user-alice", e.params)
	pd, _ := e.cl.Dialer("proxy/proxy")
	conn, _ := pd.Dial(e.cl.CSPAddr(0), transport.Identity{Role: transport.RoleCSP, ID: "csp-1"})
	defer conn.Close()
	member := fedpcav1.NewCspServiceClient(conn)
	// The two owners' proven, signed uploads, and their sum as the proxy
	// makes it (its noise and mask would touch c0 only).
	upA, ctsA := e.forMembers(t, e.share(t, spec, 0), 0)
	upB, ctsB := e.forMembers(t, e.share(t, spec, 1), 1)
	sumCt := ctsA[0].CopyNew()
	e.params.AddInto(sumCt, ctsB[0])
	cts := [][]byte{e.params.Codecs().Ciphertext.Marshal(sumCt)}
	good := func() *fedpcav1.KeySwitchHeader {
		return &fedpcav1.KeySwitchHeader{JobId: spec.ID(), Spec: info.GetJob().GetSpec(), Signature: info.GetJob().GetSignature(),
			UserCertificate: info.GetJob().GetUserCertificate(), UserPublicKey: e.params.Codecs().PublicKey.Marshal(kp.Public),
			Schema: e.sch.Canonical(), Active: []uint32{1}, Owners: []string{"hospital-a", "hospital-b"}, Ciphertexts: 1,
			JobOwnerRefs: e.cl.OwnerRefs("hospital-a", "hospital-b")}
	}
	both := []switchUpload{upA, upB}

	// A deviating proxy (or a malicious owner it lets through): the member
	// makes no share unless the sum is exactly the named owners' proven,
	// signed uploads.
	crafted := sumCt.CopyNew()
	CraftC1(e.params, crafted)
	// hospital-a, malicious, uploads the crafted ciphertext with a proof
	// (of another c1: it has none for this one) and signs it.
	craftedUp, _ := e.forMembers(t, e.share(t, spec, 0), 0)
	craftedUp.parts[0].C1 = e.params.AppendPoly(nil, crafted.Value[1])
	var cd [32]byte
	copy(cd[:], craftedUp.parts[0].C0Digest)
	craftedSig, err := seal.Sign(e.cl.Creds("owner/hospital-a").Signer(), job.UploadContext,
		job.UploadStatement(spec.ID(), "hospital-a", []job.PartDigests{(job.Part{C0Digest: cd, C1: craftedUp.parts[0].C1, Proof: craftedUp.parts[0].Proof}).Digests()}))
	if err != nil {
		t.Fatal(err)
	}
	craftedUp.hd = &fedpcav1.OwnerUpload{Owner: "hospital-a", Certificate: craftedUp.hd.Certificate, Signature: craftedSig}
	craftedSum := ctsB[0].CopyNew()
	craftedSum.Value[1].Copy(crafted.Value[1])
	e.params.RingQ().AtLevel(e.params.Level()).Add(craftedSum.Value[1], ctsB[0].Value[1], craftedSum.Value[1])
	doubled := sumCt.CopyNew()
	e.params.AddInto(doubled, ctsA[0])
	onlyA := []switchUpload{upA}
	unsigned := upA
	unsigned.hd = &fedpcav1.OwnerUpload{Owner: "hospital-a", Certificate: upA.hd.Certificate}
	bSigned := upA
	bSigned.hd = &fedpcav1.OwnerUpload{Owner: "hospital-a", Certificate: upB.hd.Certificate, Signature: upB.hd.Signature}
	// Whoever holds the deployment's CA issues owner/hospital-a a
	// certificate of its own key and signs hospital-a's statement with it
	// (here of hospital-a's own upload; a proven encryption of zero of its
	// own would do as well).
	forger, err := e.cl.ForgeCredentials("proxy/proxy", transport.Identity{Role: transport.RoleOwner, ID: "hospital-a"})
	if err != nil {
		t.Fatal(err)
	}
	var digestsA []job.PartDigests
	for _, pt := range upA.parts {
		var c0 [32]byte
		copy(c0[:], pt.GetC0Digest())
		digestsA = append(digestsA, (job.Part{C0Digest: c0, C1: pt.GetC1(), Proof: pt.GetProof()}).Digests())
	}
	forgedSig, err := seal.Sign(forger.Signer(), job.UploadContext, job.UploadStatement(spec.ID(), "hospital-a", digestsA))
	if err != nil {
		t.Fatal(err)
	}
	forgedA := upA
	forgedA.hd = &fedpcav1.OwnerUpload{Owner: "hospital-a", Certificate: forger.Leaf.Raw, Signature: forgedSig}
	spec2, _ := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, Epsilon: 1, Owners: []string{"hospital-a", "hospital-b"}, Deadline: time.Now().Add(time.Minute), Nonce: "other"})
	foreign, _ := e.forMembers(t, e.share(t, spec2, 0), 0) // hospital-a's upload to another job
	subsetHd := good()
	subsetHd.Owners = []string{"hospital-a"}
	for _, tc := range []struct {
		what string
		hd   *fedpcav1.KeySwitchHeader
		cts  [][]byte
		ups  []switchUpload
		msg  string
	}{
		{"a crafted sum (c1 = 2^190 T^-1)", good(), [][]byte{e.params.Codecs().Ciphertext.Marshal(crafted)}, both, "not the sum of the 2 included owners' proven uploads"},
		{"the sum of a subset, every owner named", good(), [][]byte{e.params.Codecs().Ciphertext.Marshal(ctsA[0])}, both, "not the sum of the 2 included owners' proven uploads"},
		{"an upload counted twice", good(), [][]byte{e.params.Codecs().Ciphertext.Marshal(doubled)}, both, "not the sum"},
		{"an upload dropped, its owner still named", good(), cts, onlyA, "the stream ended before owner hospital-b's upload"},
		{"a named owner's upload missing, the other sent twice", good(), cts, []switchUpload{upA, upA}, "expected owner hospital-b's upload"},
		{"an owner's crafted upload let through", good(), [][]byte{e.params.Codecs().Ciphertext.Marshal(craftedSum)}, []switchUpload{craftedUp, upB}, "owner hospital-a's upload: ciphertext 0: not proven well formed"},
		{"an upload to another job", good(), cts, []switchUpload{foreign, upB}, "owner hospital-a's upload"}, // its proof and signature are another job's
		{"an unsigned upload", good(), cts, []switchUpload{unsigned, upB}, "owner hospital-a's upload is not signed by the key the job names it by"},
		{"an upload signed by another owner", good(), cts, []switchUpload{bSigned, upB}, "not signed by the key the job names it by"},
		{"an upload signed by a forged owner certificate (the right name, another key)", good(), cts, []switchUpload{forgedA, upB}, "presents key " + forger.Key},
		{"the uploads out of order", good(), cts, []switchUpload{upB, upA}, "expected owner hospital-a's upload"},
		{"a subset named", subsetHd, cts, onlyA, "owners: 1 included, the spec needs 2"},
	} {
		shares, err := keySwitch(ctx, member, tc.hd, tc.cts, tc.ups...)
		wantCode(t, tc.what, err, codes.InvalidArgument, tc.msg)
		if len(shares) != 0 {
			t.Errorf("%s: the member sent %d shares", tc.what, len(shares))
		}
	}
	if st, err := member.GetStatus(ctx, &fedpcav1.GetStatusRequest{}); err != nil || st.GetSwitches() != 0 {
		t.Fatalf("after the refused requests the member made %d switches (%v)", st.GetSwitches(), err)
	}

	mallory := e.cl.Creds("user/mallory")
	forged := good()
	forged.Signature, _ = spec.Sign(mallory.Signer())
	forged.UserCertificate = mallory.Leaf.Raw
	_, err = keySwitch(ctx, member, forged, cts, both...)
	wantCode(t, "spec signed by another user", err, codes.PermissionDenied, "names user spiffe://fedpca/user/alice but is signed by spiffe://fedpca/user/mallory")
	tampered := good()
	tampered.Signature = bytes.Clone(tampered.Signature)
	tampered.Signature[len(tampered.Signature)-1] ^= 1
	_, err = keySwitch(ctx, member, tampered, cts, both...)
	wantCode(t, "tampered signature", err, codes.PermissionDenied, "signature")
	toMallory := good()
	toMallory.UserPublicKey = e.params.Codecs().PublicKey.Marshal(he.GenerateKeyPair(e.params).Public)
	_, err = keySwitch(ctx, member, toMallory, cts, both...)
	wantCode(t, "switch to another key", err, codes.PermissionDenied, "switches only to the signed key")
	strangers := good()
	strangers.Owners = []string{"hospital-a", "hospital-z"}
	_, err = keySwitch(ctx, member, strangers, cts, both...)
	wantCode(t, "owners not in the spec", err, codes.InvalidArgument, "hospital-z")
	extra := good()
	extra.JobOwnerRefs, extra.Owners = e.cl.OwnerRefs("hospital-a", "hospital-b", "hospital-z"), []string{"hospital-a", "hospital-z"}
	_, err = keySwitch(ctx, member, extra, cts, both...)
	wantCode(t, "an owner list with an extra owner", err, codes.InvalidArgument, "3 owners, the spec commits to 2")
	swapped := good()
	swapped.JobOwnerRefs, swapped.Owners = e.cl.OwnerRefs("hospital-a", "hospital-z"), []string{"hospital-a", "hospital-z"}
	_, err = keySwitch(ctx, member, swapped, cts, both...)
	wantCode(t, "an owner list that is not the spec's", err, codes.InvalidArgument, "is not the spec's owners_root")

	first, err := keySwitch(ctx, member, good(), cts, both...)
	if err != nil {
		t.Fatal(err)
	}
	again, err := keySwitch(ctx, member, good(), cts, both...)
	if err != nil || !bytes.Equal(first[0], again[0]) {
		t.Fatalf("replay: %v, same shares: %v", err, err == nil && bytes.Equal(first[0], again[0]))
	}
	fewer := good()
	fewer.Owners = []string{"hospital-b", "hospital-a"}
	_, err = keySwitch(ctx, member, fewer, cts, upB, upA)
	wantCode(t, "second, different request", err, codes.FailedPrecondition, "already switched")
	// Owners and users may not call a member at all.
	od, _ := e.cl.Dialer("owner/hospital-a")
	oconn, _ := od.Dial(e.cl.CSPAddr(0), transport.Identity{Role: transport.RoleCSP})
	defer oconn.Close()
	_, err = keySwitch(ctx, fedpcav1.NewCspServiceClient(oconn), good(), cts, both...)
	wantCode(t, "owner calls a member", err, codes.PermissionDenied, "owner/hospital-a may not call")
}
