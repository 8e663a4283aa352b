package sim

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/user"
)

// finishExact waits for a job without noise, fetches its result with the
// user's key and checks that the release is exactly the sum of the parts.
func finishExact(ctx context.Context, t *testing.T, u *user.Client, spec *job.Spec, sch *schema.Schema, parts ...[]byte) (*fedpcav1.JobStatus, *job.Result) {
	t.Helper()
	st, err := u.Wait(ctx, spec.ID(), nil)
	if err != nil || st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		t.Fatalf("job %s…: %v %v", spec.ID()[:12], st, err)
	}
	res, err := u.Fetch(ctx, spec, sch)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := res.Release.Release()
	if err != nil {
		t.Fatal(err)
	}
	want, err := ExactSum(spec, sch, parts)
	if err != nil {
		t.Fatal(err)
	}
	for j, x := range rel.Pack() {
		if x != want[j] {
			t.Fatalf("job %s…: release entry %d is %d, the valid uploads sum to %d", spec.ID()[:12], j, x, want[j])
		}
	}
	return st, res
}

// TestReplayedAndReorderedUploads: an upload sent before its job exists is
// NotFound and leaves nothing behind; an old upload replayed to a later job
// (by its owner, or copied by another owner) is refused naming the job it
// was included in; budget reports for another dataset or with NaN are
// refused naming the field; a CreateJob replayed with another user key is
// refused. Each job then completes with the valid uploads: its release, as
// the user decrypts it with its own key, is exactly their sum.
func TestReplayedAndReorderedUploads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := newHostileEnv(t, ctx)
	owners := []string{"hospital-a", "hospital-b"}
	a, b := e.owners["hospital-a"], e.owners["hospital-b"]
	newSpec := func(nonce string) *job.Spec {
		s, err := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, NoNoise: true, Owners: owners,
			Deadline: time.Now().Add(3 * time.Minute), Nonce: nonce})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	spec1, spec2 := newSpec("replay-1"), newSpec("replay-2")
	id1, id2 := spec1.ID(), spec2.ID()

	// Reordered: the upload arrives before the job.
	up1a := e.share(t, spec1, 0)
	_, err := upload(ctx, a, up1a.Header, msgs(up1a)...)
	wantCode(t, "upload before the job exists", err, codes.NotFound, "no such job")
	if _, err := e.u.Submit(ctx, spec1, e.sch); err != nil {
		t.Fatal(err)
	}
	if r, err := upload(ctx, a, up1a.Header, msgs(up1a)...); err != nil || r.GetAlreadyIncluded() {
		t.Fatalf("the same upload once the job exists: %v %v", r, err)
	}
	if _, err := e.u.Submit(ctx, spec2, e.sch); err != nil {
		t.Fatal(err)
	}

	// Replayed: job 1's upload sent again to job 2, by its owner and by
	// another owner: its proofs are bound to job 1 and its owner.
	_, err = upload(ctx, a, header(id2, up1a.Blobs, up1a.Header.Signature), msgs(up1a)...)
	wantCode(t, "old upload replayed to a later job", err, codes.InvalidArgument, "ciphertext 0: not proven well formed")
	_, err = upload(ctx, b, header(id2, up1a.Blobs, up1a.Header.Signature), msgs(up1a)...)
	wantCode(t, "another owner's upload replayed", err, codes.InvalidArgument, "not proven well formed")

	// Budget reports (display only) must be for the job's dataset and sane.
	up2a := e.share(t, spec2, 0)
	hd := header(id2, up2a.Blobs, up2a.Header.Signature)
	hd.Budget = &fedpcav1.BudgetReport{Dataset: "mnist", RhoBudget: 1}
	_, err = upload(ctx, a, hd, msgs(up2a)...)
	wantCode(t, "budget report of another dataset", err, codes.InvalidArgument, `budget: report for dataset "mnist"`)
	hd.Budget = &fedpcav1.BudgetReport{Dataset: e.sch.ID, RhoBudget: math.NaN()}
	_, err = upload(ctx, a, hd, msgs(up2a)...)
	wantCode(t, "NaN budget", err, codes.InvalidArgument, "rho_budget = NaN")
	_, err = b.Decline(ctx, &fedpcav1.DeclineRequest{JobId: id2, Reason: fedpcav1.DeclineReason_DECLINE_REASON_POLICY, Budget: &fedpcav1.BudgetReport{Dataset: e.sch.ID, RhoSpent: -1}})
	wantCode(t, "decline with a negative budget", err, codes.InvalidArgument, "rho_spent = -1")

	// A replayed CreateJob of job 2 asking for another user key.
	alice := e.cl.Creds("user/alice")
	otherPK := e.params.Codecs().PublicKey.Marshal(he.GenerateKeyPair(e.params).Public)
	_, err = e.u.Proxy().CreateJob(ctx, &fedpcav1.CreateJobRequest{Spec: spec2.Canonical(), Signature: mustSign(t, spec2, alice),
		UserPublicKey: otherPK, Schema: e.sch.Canonical()})
	wantCode(t, "job replayed with another user key", err, codes.InvalidArgument, "user_public_key: its fingerprint is not the spec's user_key")

	st := jobStatus(t, ctx, a, id2)
	if st.GetOwnersUploaded() != 0 || st.GetOwnersDeclined() != 0 || st.GetState() != fedpcav1.JobState_JOB_STATE_OPEN {
		t.Fatalf("job 2 after the replays: %v", st)
	}
	// The valid uploads complete both jobs.
	hd = header(id2, up2a.Blobs, up2a.Header.Signature)
	hd.Budget = &fedpcav1.BudgetReport{Dataset: e.sch.ID, RhoBudget: 1}
	if _, err := upload(ctx, a, hd, msgs(up2a)...); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*job.Spec{spec1, spec2} {
		up := e.share(t, s, 1)
		if _, err := upload(ctx, b, up.Header, msgs(up)...); err != nil {
			t.Fatal(err)
		}
	}
	var results []*job.Result
	for _, s := range []*job.Spec{spec1, spec2} {
		_, res := finishExact(ctx, t, e.u, s, e.sch, e.parts[0], e.parts[1])
		results = append(results, res)
	}

	// Published results: only a valid document of the job itself.
	doc := func(r *job.Result) []byte {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	publish := func(b []byte) error {
		_, err := e.u.Proxy().PublishResult(ctx, &fedpcav1.PublishResultRequest{JobId: id1, Result: b})
		return err
	}
	wantCode(t, "publish another job's result", publish(doc(results[1])), codes.InvalidArgument, "not of this job "+id1[:16])
	broken := *results[0]
	broken.SchemaHash = "abc"
	wantCode(t, "publish a result with a broken schema hash", publish(doc(&broken)), codes.InvalidArgument, "schema_hash")
	wantCode(t, "publish a truncated result", publish(doc(results[0])[:100]), codes.InvalidArgument, "result")
	if err := publish(doc(results[0])); err != nil {
		t.Fatal(err)
	}
	pub, err := a.GetPublished(ctx, &fedpcav1.GetPublishedRequest{JobId: id1})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := job.ParseResult(pub.GetResult()); err != nil || res.JobID != id1 {
		t.Fatalf("published result: %v", err)
	}
	// After the job, its own upload re-sent is acknowledged again; a replay
	// into the other finished job is still refused as closed or replayed.
	if r, err := upload(ctx, a, up1a.Header, msgs(up1a)...); err != nil || !r.GetAlreadyIncluded() {
		t.Fatalf("re-sent upload after the job: %v %v", r, err)
	}
	_, err = upload(ctx, a, header(id2, up1a.Blobs, up1a.Header.Signature), msgs(up1a)...)
	if err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("replay into a finished job: %v", err)
	}
}
