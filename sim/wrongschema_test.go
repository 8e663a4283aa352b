package sim

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/fedpca/fedpca/user"
)

// TestOwnerSharesForAnotherSchema: an owner that serves the job's dataset
// under another schema (declared bounds on one feature: another reading)
// declines the job saying so, and spends no budget; an owner that uploads
// statistics packed for another schema (130 features: two ciphertexts where
// the job needs one) is refused naming the count. The job completes with the
// two valid uploads and its release is exactly their sum.
//
// Statistics of another schema with the same number of ciphertexts cannot be
// told apart from valid ones by anyone but the user (they are encrypted);
// PROTOCOL.md puts owners who upload wrong values out of scope.
func TestOwnerSharesForAnotherSchema(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, true)
	owners = owners[:3]
	other := *sch
	other.Features = slices.Clone(sch.Features)
	// Another center alone is another map of the same reading, which owners
	// accept (the profile job's schemas; schema.SameReading): declared
	// bounds change how the rows read.
	other.Features[0].Center = fixedpoint.MustDecimal("123.5")
	lo := fixedpoint.MustDecimal("-1000")
	other.Features[0].Min = &lo
	owners[2].Schema = &other
	cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: 1, Owners: owners, Users: []string{"alice"},
		Identities: []string{"owner/hospital-d"}, AllowNoNoise: true, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	u, err := cl.User("alice")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	names := []string{"hospital-a", "hospital-b", "hospital-c", "hospital-d"}
	spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, NoNoise: true, Owners: names, MinOwners: 2,
		Deadline: time.Now().Add(3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Submit(ctx, spec, sch); err != nil {
		t.Fatal(err)
	}

	// hospital-d uploads statistics packed for a schema of 130 features.
	d, _ := proxyAs(t, cl, "owner/hospital-d")
	p := cl.Params()
	cpk := committeeKey(ctx, t, d, p)
	wide, _ := stats.NewLayout(130, 1)
	enc, _ := he.NewEncryptor(p, cpk)
	cts, err := enc.EncryptVector(make([]int64, wide.Len()))
	if err != nil {
		t.Fatal(err)
	}
	var blobs [][]byte
	for _, ct := range cts {
		blobs = append(blobs, p.Codecs().Ciphertext.Marshal(ct))
	}
	var ms []*fedpcav1.UploadRequest
	for _, b := range blobs {
		ms = append(ms, ctMsg(b))
	}
	_, err = upload(ctx, d, header(spec.ID(), blobs), ms...)
	wantCode(t, "statistics of a 130-feature schema", err, codes.InvalidArgument, "ciphertexts: 2 announced, job "+spec.ID()[:12]+"… needs 1")
	if _, err := d.Decline(ctx, &fedpcav1.DeclineRequest{JobId: spec.ID(), Reason: fedpcav1.DeclineReason_DECLINE_REASON_POLICY}); err != nil {
		t.Fatal(err)
	}

	st, _ := finishExact(ctx, t, u, spec, sch, owners[0].CSV, owners[1].CSV)
	if got := strings.Join(st.GetUploadedOwners(), ","); got != "hospital-a,hospital-b" {
		t.Errorf("uploaded owners %s", got)
	}
	var reason fedpcav1.DeclineReason
	var detail *fedpcav1.DeclineDetail
	for _, dc := range st.GetDeclinedOwners() {
		if dc.GetOwner() == "hospital-c" {
			reason, detail = dc.GetReason(), dc.GetDetail()
		}
	}
	if reason != fedpcav1.DeclineReason_DECLINE_REASON_SCHEMA_MISMATCH {
		t.Errorf("hospital-c declined with %s, want schema mismatch", reason)
	}
	// The user learns which field differs (issue 43): the bounds of
	// mean_radius, feature 0 of the job's schema.
	if detail.GetSchemaField() != "min" || detail.Feature == nil || sch.Features[detail.GetFeature()].Name != "mean_radius" {
		t.Errorf("hospital-c said %v, want the min of mean_radius", detail)
	}
	// The detail stays in hospital-c's own record.
	recs, err := cl.Owner("hospital-c").JobRecords()
	if err != nil || len(recs) != 1 {
		t.Fatalf("hospital-c's records: %v %v", recs, err)
	}
	if want := "the job's schema for dataset wdbc does not read the rows as this owner's does: feature \"mean_radius\": bounds"; recs[0].Code != "schema_mismatch" || !strings.Contains(recs[0].Reason, want) {
		t.Errorf("hospital-c's record %+v, want schema_mismatch and %q", recs[0], want)
	}
	bal, err := cl.Owner("hospital-c").Balance("wdbc")
	if err != nil || bal.Spent != 0 || bal.Reserved != 0 {
		t.Errorf("hospital-c's ledger after declining: %+v %v", bal, err)
	}
}
