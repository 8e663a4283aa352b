package owner

import (
	"context"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
)

// TestRoundAdmission: an owner takes part in a power job's round only once
// its round 0 upload is in (the parent's entry committed: waits while it is
// reserved, declines when there is none or it was released), and only
// after the last round it took part in, which the transaction storing a
// round's upload notes; a round changes the ledger not at all, and a round
// that fails before its switch refunds nothing (round 0 was released).
func TestRoundAdmission(t *testing.T) {
	o := testOwner(t)
	parent := strings.Repeat("ab", 32)
	round := func(r int) job.RoundSpec {
		return job.RoundSpec{Parent: parent, Round: r, QHash: strings.Repeat("cd", 32)}
	}
	admit := func(r int) (int, *refusal, error) { return o.roundAdmission("ds", round(r)) }

	if _, ref, _ := admit(1); ref == nil || ref.code != job.DeclineUnavailable || !strings.Contains(ref.detail, "not in round 0") {
		t.Fatalf("no round 0 entry: %+v, want declined unavailable", ref)
	}
	cost := dp.Cost{Rho: 0.02}
	if _, err := o.ledger.Reserve("ds", parent, cost, 1, 1e-6, ""); err != nil {
		t.Fatal(err)
	}
	if _, ref, err := admit(1); ref != nil || err == nil || !strings.Contains(err.Error(), "not settled yet") {
		t.Fatalf("round 0 reserved: %+v %v, want to wait", ref, err)
	}
	if err := o.ledger.Commit("ds", parent); err != nil {
		t.Fatal(err)
	}
	if after, ref, err := admit(1); ref != nil || err != nil || after != 0 {
		t.Fatalf("round 0 committed: after %d, %+v %v", after, ref, err)
	}
	// Round 2 taken part in (round 1 missed): round 1 and 2 are then refused.
	if err := o.db.Update(func(tx *bolt.Tx) error {
		ref, err := o.takeRoundTx(tx, "ds", round(2))
		if ref != nil {
			t.Errorf("round 2: %+v", ref)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, r := range []int{1, 2} {
		if _, ref, _ := admit(r); ref == nil || ref.code != job.DeclineInvalidJob || !strings.Contains(ref.detail, "took part in round 2 already") {
			t.Errorf("round %d after round 2: %+v", r, ref)
		}
	}
	if after, ref, err := admit(3); ref != nil || err != nil || after != 2 {
		t.Errorf("round 3 after round 2: after %d, %+v %v", after, ref, err)
	}
	// A round's upload settles without the ledger; its failure before the
	// switch refunds nothing.
	id := round(3).ID()
	note := jobNote{State: PartUploading, Dataset: "ds", Parent: parent, Round: 3}
	o.setNote(id, note)
	o.settleUploaded(id, note)
	o.handle(context.Background(), &fedpcav1.JobStatus{JobId: id, Dataset: "ds", State: fedpcav1.JobState_JOB_STATE_FAILED, Reason: "cancelled"})
	entries, _ := o.Ledger("ds")
	recs, _ := o.JobRecords()
	if len(entries) != 1 || entries[0].Job != parent || entries[0].State != Committed {
		t.Errorf("ledger %+v, want the parent's entry alone, committed", entries)
	}
	for _, r := range recs {
		if r.Job == id && r.State != PartCompleted {
			t.Errorf("the failed round's record is %s, want completed", r.State)
		}
	}
	if o.ledger.Release("ds", parent) == nil {
		t.Error("the committed parent entry was released")
	}
}
