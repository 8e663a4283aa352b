package sim

import (
	"context"
	"testing"
	"time"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
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
	mkSpec := func(release string, exact bool) (*job.Spec, *fedpcav1.GetJobResponse) {
		eps := 1.0
		if exact {
			eps = 0
		}
		spec, err := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, K: 3, Epsilon: eps, NoNoise: exact, Owners: owners, Deadline: time.Now().Add(time.Minute), Release: release})
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
	spec, info := mkSpec(job.ReleaseComponents, false)
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
	stats, sinfo := mkSpec("", false)
	_, err = solve(ctx, member, &fedpcav1.SolveHeader{Job: header(stats, sinfo)}, cts, both...)
	wantCode(t, "a solve of a statistics job", err, codes.InvalidArgument, "releases its statistics")
	// A DP job's members do not take c0 (its c0 carries the proxy's noise).
	_, err = solve(ctx, member, good(), cts, withC0(e, upA, ctsA), withC0(e, upB, ctsB))
	wantCode(t, "c0 for a DP job", err, codes.InvalidArgument, "c0 sent for a job whose members do not check it")
	// The request as the protocol makes it: the member's signed job key.
	r, err := solve(ctx, member, good(), cts, both...)
	if err != nil || r.GetKey() == nil || len(r.GetKey().GetKey()) != 32 {
		t.Fatalf("the proper request: %v, %v", r, err)
	}

	// An exact components job binds c0 too: its sum must be exactly the
	// owners' uploads, so that a c0 shifted by a known matrix (by a proxy
	// colluding with the user) cannot make its top k tell more.
	exact, einfo := mkSpec(job.ReleaseComponents, true)
	eA, ectsA := e.forMembers(t, e.share(t, exact, 0), 0)
	eB, ectsB := e.forMembers(t, e.share(t, exact, 1), 1)
	esum := ectsA[0].CopyNew()
	e.params.AddInto(esum, ectsB[0])
	shifted := esum.CopyNew()
	shift := make([]int64, e.params.Slots())
	shift[0] = 1 << 20 // a large first entry: the top component leans on it
	if err := he.NewPlain(e.params).AddInt64(shifted, shift); err != nil {
		t.Fatal(err)
	}
	exactHd := func() *fedpcav1.SolveHeader { return &fedpcav1.SolveHeader{Job: header(exact, einfo)} }
	marshal := func(ct *rlwe.Ciphertext) [][]byte { return [][]byte{e.params.Codecs().Ciphertext.Marshal(ct)} }
	forged := withC0(e, eB, ectsB)
	forged.parts = []*fedpcav1.UploadPart{proto.Clone(forged.parts[0]).(*fedpcav1.UploadPart)}
	forged.parts[0].C0 = e.params.AppendPoly(nil, shifted.Value[0])
	for _, tc := range []struct {
		what string
		sum  *rlwe.Ciphertext
		ups  []switchUpload
		msg  string
	}{
		{"an exact job's sum with c0 shifted", shifted, []switchUpload{withC0(e, eA, ectsA), withC0(e, eB, ectsB)}, "its c0 differs from the sum of their signed c0"},
		{"an exact job's uploads without c0", esum, []switchUpload{eA, eB}, "no c0"},
		{"an exact job's upload with a c0 not its owner's", shifted, []switchUpload{withC0(e, eA, ectsA), forged}, "not the one the owner signed"},
	} {
		r, err := solve(ctx, member, exactHd(), marshal(tc.sum), tc.ups...)
		wantCode(t, tc.what, err, codes.InvalidArgument, tc.msg)
		if r != nil {
			t.Errorf("%s: the member answered %T", tc.what, r.GetMsg())
		}
	}
	r, err = solve(ctx, member, exactHd(), marshal(esum), withC0(e, eA, ectsA), withC0(e, eB, ectsB))
	if err != nil || r.GetKey() == nil {
		t.Fatalf("the proper exact request: %v, %v", r, err)
	}
}

// withC0 returns an upload's parts for members that check c0.
func withC0(e *hostileEnv, up switchUpload, cts []*rlwe.Ciphertext) switchUpload {
	out := switchUpload{hd: up.hd}
	for k, pt := range up.parts {
		c := proto.Clone(pt).(*fedpcav1.UploadPart)
		c.C0 = e.params.AppendPoly(nil, cts[k].Value[0])
		out.parts = append(out.parts, c)
	}
	return out
}
