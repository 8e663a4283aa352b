package sim

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/user"
)

// TestDeclineDetailValidated (issue 43): the proxy stores and relays a
// decline's detail only when it fits the code and the job (a known policy
// limit with policy, its value a positive number; a schema field of the
// closed list with schema_mismatch, of one of the job's features), and
// refuses anything else with InvalidArgument naming it: an owner cannot
// pass a count or a value of its rows through it. A detail that fits
// reaches the user with the declines once the job is sealed.
func TestDeclineDetailValidated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newHostileEnv(t, ctx)
	names := []string{"hospital-a", "hospital-b"}
	spec, err := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, NoNoise: true, Owners: names, MinOwners: 1, Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.u.Submit(ctx, spec, e.sch); err != nil {
		t.Fatal(err)
	}
	id, b := spec.ID(), e.owners["hospital-b"]
	feature := func(i int32) *int32 { return &i }
	policy, mismatch := fedpcav1.DeclineReason_DECLINE_REASON_POLICY, fedpcav1.DeclineReason_DECLINE_REASON_SCHEMA_MISMATCH
	d := e.sch.D()
	for _, tc := range []struct {
		what   string
		reason fedpcav1.DeclineReason
		detail *fedpcav1.DeclineDetail
		msg    string
	}{
		{"a row count as a limit value", mismatch, &fedpcav1.DeclineDetail{LimitValue: 212}, "without a limit"},
		{"an unknown limit", policy, &fedpcav1.DeclineDetail{Limit: 9, LimitValue: 1}, "not one of the known limits"},
		{"a limit with another code", fedpcav1.DeclineReason_DECLINE_REASON_BUDGET, &fedpcav1.DeclineDetail{Limit: fedpcav1.PolicyLimit_POLICY_LIMIT_MAX_EPSILON, LimitValue: 1}, "a policy limit with code budget"},
		{"a valued limit without its value", policy, &fedpcav1.DeclineDetail{Limit: fedpcav1.PolicyLimit_POLICY_LIMIT_MAX_EPSILON}, "max_epsilon = 0 is not a positive number"},
		{"a value on a limit without one", policy, &fedpcav1.DeclineDetail{Limit: fedpcav1.PolicyLimit_POLICY_LIMIT_NO_NOISE, LimitValue: 569}, "no_noise takes no value"},
		{"free text as a field", mismatch, &fedpcav1.DeclineDetail{SchemaField: "row 17 has radius 28.1"}, "is not one of"},
		{"a feature beyond the schema", mismatch, &fedpcav1.DeclineDetail{SchemaField: "min", Feature: feature(int32(d))}, "of a schema of"},
		{"a feature field without a feature", mismatch, &fedpcav1.DeclineDetail{SchemaField: "min"}, "field min with feature -1"},
		{"a field with another code", policy, &fedpcav1.DeclineDetail{SchemaField: "trim"}, "a schema field with code policy"},
	} {
		_, err := b.Decline(ctx, &fedpcav1.DeclineRequest{JobId: id, Reason: tc.reason, Detail: tc.detail})
		wantCode(t, tc.what, err, codes.InvalidArgument, tc.msg)
	}
	// A detail that fits is stored and, once the job is sealed, relayed.
	if _, err := b.Decline(ctx, &fedpcav1.DeclineRequest{JobId: id, Reason: mismatch, Detail: &fedpcav1.DeclineDetail{SchemaField: "max", Feature: feature(3)}}); err != nil {
		t.Fatal(err)
	}
	up := e.share(t, spec, 0)
	if _, err := upload(ctx, e.owners["hospital-a"], up.Header, msgs(up)...); err != nil {
		t.Fatal(err)
	}
	st, err := e.u.Wait(ctx, id, nil)
	if err != nil || st.GetState() != fedpcav1.JobState_JOB_STATE_DONE || len(st.GetDeclinedOwners()) != 1 {
		t.Fatalf("job: %v %v", st, err)
	}
	got := st.GetDeclinedOwners()[0].GetDetail()
	if got.GetSchemaField() != "max" || got.Feature == nil || got.GetFeature() != 3 || got.GetLimit() != 0 || got.GetLimitValue() != 0 {
		t.Errorf("the user received the detail %v, want max of feature 3", got)
	}
}
