package sim

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// solve sends a member a solve request (the header, the sum, the uploads)
// and returns its first answer: the member's job key when it took the
// request, or its refusal.
func solve(ctx context.Context, c fedpcav1.CspServiceClient, hd *fedpcav1.SolveHeader, cts [][]byte, ups ...switchUpload) (*fedpcav1.SolveResponse, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.Solve(ctx)
	if err != nil {
		return nil, err
	}
	msgs := []*fedpcav1.SolveRequest{{Msg: &fedpcav1.SolveRequest_Header{Header: hd}}}
	for _, b := range cts {
		msgs = append(msgs, &fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Ciphertext{Ciphertext: b}})
	}
	for _, up := range ups {
		msgs = append(msgs, &fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Upload{Upload: up.hd}})
		for _, pt := range up.parts {
			msgs = append(msgs, &fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Part{Part: pt}})
		}
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			_, err = stream.Recv()
			return nil, err
		}
	}
	if err := stream.CloseSend(); err != nil {
		return nil, err
	}
	return stream.Recv()
}

// TestHostileSolve: a member solves a components job only on the named
// owners' proven, signed uploads (a crafted sum, a subset, a doubled or a
// dropped upload are refused before it makes a key or a conversion share,
// so the conversion is never a decryption oracle), never solves a
// statistics job, and never key-switches a components job's sum to anyone.
func TestHostileSolve(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newHostileEnv(t, ctx)
	owners := []string{"hospital-a", "hospital-b"}
	mkSpec := func(release string) (*job.Spec, *fedpcav1.GetJobResponse) {
		spec, err := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, K: 3, Epsilon: 1, Owners: owners, Deadline: time.Now().Add(time.Minute), Release: release})
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
		return spec, info
	}
	spec, info := mkSpec(job.ReleaseComponents)
	kp, _ := user.LoadKeys(e.cl.cfg.Dir+"/state/user-alice", e.params)
	pd, _ := e.cl.Dialer("proxy/proxy")
	conn, _ := pd.Dial(e.cl.CSPAddr(0), transport.Identity{Role: transport.RoleCSP, ID: "csp-1"})
	defer conn.Close()
	member := fedpcav1.NewCspServiceClient(conn)
	upA, ctsA := e.forMembers(t, e.share(t, spec, 0), 0)
	upB, ctsB := e.forMembers(t, e.share(t, spec, 1), 1)
	sumCt := ctsA[0].CopyNew()
	e.params.AddInto(sumCt, ctsB[0])
	cts := [][]byte{e.params.Codecs().Ciphertext.Marshal(sumCt)}
	header := func(s *job.Spec, in *fedpcav1.GetJobResponse) *fedpcav1.KeySwitchHeader {
		return &fedpcav1.KeySwitchHeader{JobId: s.ID(), Spec: in.GetJob().GetSpec(), Signature: in.GetJob().GetSignature(),
			UserCertificate: in.GetJob().GetUserCertificate(), UserPublicKey: e.params.Codecs().PublicKey.Marshal(kp.Public),
			Schema: e.sch.Canonical(), Active: []uint32{1}, Owners: owners, Ciphertexts: 1, JobOwnerRefs: e.cl.OwnerRefs(owners...)}
	}
	good := func() *fedpcav1.SolveHeader { return &fedpcav1.SolveHeader{Job: header(spec, info), Party: 0} }
	both := []switchUpload{upA, upB}
	crafted := sumCt.CopyNew()
	CraftC1(e.params, crafted)
	doubled := sumCt.CopyNew()
	e.params.AddInto(doubled, ctsA[0])
	for _, tc := range []struct {
		what string
		cts  [][]byte
		ups  []switchUpload
		msg  string
	}{
		{"a crafted sum", [][]byte{e.params.Codecs().Ciphertext.Marshal(crafted)}, both, "not the sum of the 2 included owners' proven uploads"},
		{"the sum of a subset", [][]byte{e.params.Codecs().Ciphertext.Marshal(ctsA[0])}, both, "not the sum"},
		{"an upload counted twice", [][]byte{e.params.Codecs().Ciphertext.Marshal(doubled)}, both, "not the sum"},
		{"an upload dropped", cts, []switchUpload{upA}, "before owner hospital-b's upload"},
	} {
		r, err := solve(ctx, member, good(), tc.cts, tc.ups...)
		wantCode(t, tc.what, err, codes.InvalidArgument, tc.msg)
		if r != nil {
			t.Errorf("%s: the member answered %T", tc.what, r.GetMsg())
		}
	}
	seeded := good()
	seeded.Seed = make([]byte, 32)
	_, err := solve(ctx, member, seeded, cts, both...)
	wantCode(t, "a seed for party 0", err, codes.InvalidArgument, "party 0 gets corrections")
	// A components job's sum is never switched.
	_, err = keySwitch(ctx, member, header(spec, info), cts, both...)
	wantCode(t, "a key switch of a components job", err, codes.PermissionDenied, "releases only its components")
	// A statistics job is never solved.
	stats, sinfo := mkSpec("")
	_, err = solve(ctx, member, &fedpcav1.SolveHeader{Job: header(stats, sinfo)}, cts, both...)
	wantCode(t, "a solve of a statistics job", err, codes.InvalidArgument, "releases its statistics")
	// The request as the protocol makes it: the member's signed job key.
	r, err := solve(ctx, member, good(), cts, both...)
	if err != nil || r.GetKey() == nil || len(r.GetKey().GetKey()) != 32 {
		t.Fatalf("the proper request: %v, %v", r, err)
	}
}
