package sim

import (
	"context"
	"sync"
	"testing"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/user"
)

// TestBudgetExhausted: an owner whose budget pays for two jobs faces five
// concurrent jobs: it takes part in exactly two, declines the others saying
// why, and the jobs (which need one owner) say who declined and why. Its
// ledger never overspends.
func TestBudgetExhausted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sch, owners := wdbcOwners(t, false)
	owners = owners[:2]
	rhoJob, err := dp.BudgetRho(1, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	// hospital-a's budget holds 2.5 jobs of epsilon 1.
	owners[0].Epsilon, owners[0].Delta = dp.BudgetEpsilon(2.5*rhoJob, 1e-6), 1e-6
	cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: 1, Owners: owners, Users: []string{"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	u, err := cl.User("alice")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	const jobs = 5
	var wg sync.WaitGroup
	ids := make([]string, jobs)
	for i := range jobs {
		spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 2, Epsilon: 1, Owners: []string{owners[0].ID, owners[1].ID},
			MinOwners: 1, Deadline: time.Now().Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = spec.ID()
		if _, err := u.Submit(ctx, spec, sch); err != nil {
			t.Fatal(err)
		}
	}
	statuses := make([]*fedpcav1.JobStatus, jobs)
	for i := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := u.Wait(ctx, ids[i], nil)
			if err != nil {
				t.Error(err)
				return
			}
			statuses[i] = st
		}()
	}
	wg.Wait()
	took, declined := 0, 0
	for _, st := range statuses {
		if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
			t.Fatalf("job %s: %s", st.GetState(), st.GetReason())
		}
		for _, o := range st.GetUploadedOwners() {
			if o == owners[0].ID {
				took++
			}
		}
		for _, d := range st.GetDeclinedOwners() {
			if d.GetOwner() != owners[0].ID || d.GetReason() != fedpcav1.DeclineReason_DECLINE_REASON_BUDGET {
				t.Errorf("declined: %s: %s", d.GetOwner(), d.GetReason())
			}
			declined++
		}
	}
	if took != 2 || declined != 3 {
		t.Fatalf("%s took part in %d jobs and declined %d; want 2 and 3", owners[0].ID, took, declined)
	}
	bal, err := cl.Owner(owners[0].ID).Balance("wdbc")
	if err != nil {
		t.Fatal(err)
	}
	if !bal.SpentCost.Within(bal.Epsilon, bal.Delta) || bal.Reserved != 0 || bal.Spent < 2*rhoJob*(1-1e-6) {
		t.Fatalf("ledger %+v (job rho %g)", bal, rhoJob)
	}
	t.Logf("declined reason: %s", statuses[0].GetDeclinedOwners())
}
