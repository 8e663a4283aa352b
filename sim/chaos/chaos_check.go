package chaos

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/fedpca/fedpca/sim"
)

// The invariants the chaos suite checks after every job.
const (
	InvEnds    = "every job ends: done, or failed with a stated reason"
	InvUser    = "the user's calls succeed: submit, watch, fetch the result"
	InvAcked   = "no acknowledged upload lost"
	InvOnce    = "no owner counted twice"
	InvExact   = "noise-off release = exact sum of the included owners' statistics"
	InvEigen   = "noise-off eigenvalues = central non-private result"
	InvNoise   = "noisy release within its stated noise level"
	InvSwitch  = "members switched the job once, for its included owners"
	InvBudget  = "no budget overspent"
	InvCharged = "budget charged exactly for included uploads; reservations released"
	InvSettled = "owners settle every ended job"
	InvRestart = "state consistent after restart (proxy, member, owner)"

	// The deviating proxy's (deviate.go).
	InvDevKey    = "deviating proxy: owners refuse a committee key not attested by every member; the job fails"
	InvDevSum    = "deviating proxy: a sum that is not the named owners' proven uploads (doubled, dropped, a subset, crafted, an earlier job's) or a crafted upload or a forged owner's statement (its name, another key) let through is refused by the members: the job fails naming it, no share is made"
	InvDevReplay = "deviating proxy: a replayed switch gets the same shares, an altered or second one is refused"
	InvDevStatus = "deviating proxy: a status lie yields no wrong release; the real result is fetched after"
	InvDevNoise  = "deviating proxy: under the owners and all plans the honest owners' noise stays in the release"
	InvDevShift  = "deviating proxy: a statistics result shifted by a matrix M of its choosing is the included owners' sum plus M, with the stated noise"
)

var invariantOrder = []string{InvEnds, InvUser, InvAcked, InvOnce, InvExact, InvEigen, InvNoise, InvSwitch, InvBudget, InvCharged, InvSettled, InvRestart,
	InvDevKey, InvDevSum, InvDevReplay, InvDevStatus, InvDevNoise, InvDevShift}

// Invariant is one invariant's tally.
type Invariant struct {
	Name       string `json:"name"`
	Checks     int    `json:"checks"`
	Violations int    `json:"violations"`
}

// Violation is one violated invariant, with what reproduces it.
type Violation struct {
	Invariant   string `json:"invariant"`
	Episode     int    `json:"episode"`
	EpisodeSeed uint64 `json:"episode_seed"`
	Job         string `json:"job,omitempty"`
	Detail      string `json:"detail"`
}

// Report is the outcome of a chaos run.
type Report struct {
	Seed           uint64           `json:"seed"`
	JobsPerEpisode int              `json:"jobs_per_episode"`
	Episodes       int              `json:"episodes"`
	Jobs           int              `json:"jobs"`
	Done           int              `json:"done"`
	Failed         int              `json:"failed"`
	NotCreated     int              `json:"not_created"`
	FailReasons    map[string]int   `json:"fail_reasons"`
	Faults         map[string]int64 `json:"faults"`
	Invariants     []*Invariant     `json:"invariants"`
	Violations     []Violation      `json:"violations"`
	Wall           float64          `json:"wall_seconds"`

	mu sync.Mutex
}

func newChaosReport(seed uint64, jpe int) *Report {
	r := &Report{Seed: seed, JobsPerEpisode: jpe, FailReasons: map[string]int{}, Faults: map[string]int64{}}
	for _, n := range invariantOrder {
		r.Invariants = append(r.Invariants, &Invariant{Name: n})
	}
	return r
}

// OK reports whether no invariant was violated.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// add records checks of an invariant and its violations.
func (r *Report) add(name string, checks int, violations []string, ep *episode, jobID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, inv := range r.Invariants {
		if inv.Name == name {
			inv.Checks += max(checks, len(violations))
			inv.Violations += len(violations)
		}
	}
	for _, v := range violations {
		r.Violations = append(r.Violations, Violation{Invariant: name, Episode: ep.plan.Index, EpisodeSeed: ep.plan.Seed, Job: jobID, Detail: v})
	}
}

// verify records one check: ok, or a violation described by the format.
func (r *Report) verify(name string, ok bool, ep *episode, jobID, format string, args ...any) {
	var v []string
	if !ok {
		v = []string{fmt.Sprintf(format, args...)}
	}
	r.add(name, 1, v, ep, jobID)
}

func (r *Report) job(jr *jobRun) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Jobs++
	switch st := jr.status; {
	case st == nil:
		r.NotCreated++
	case st.GetState() == fedpcav1.JobState_JOB_STATE_DONE:
		r.Done++
	case st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED:
		r.Failed++
		r.FailReasons[st.GetReason()]++
	}
}

func (r *Report) episode() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Episodes++
}

func (r *Report) addFaults(m map[string]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, v := range m {
		r.Faults[k] += v
	}
}

// WriteText prints the report: jobs, faults by kind, the invariants with
// their checks and violations, and how to reproduce each violation.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "chaos: seed %d, %d jobs in %d episodes of %d, %.0f s\n", r.Seed, r.Jobs, r.Episodes, r.JobsPerEpisode, r.Wall)
	fmt.Fprintf(w, "jobs: %d done, %d failed with a stated reason, %d not created\n", r.Done, r.Failed, r.NotCreated)
	reasons := make([]string, 0, len(r.FailReasons))
	for k := range r.FailReasons {
		reasons = append(reasons, k)
	}
	sort.Strings(reasons)
	for _, k := range reasons {
		fmt.Fprintf(w, "  %3d x %s\n", r.FailReasons[k], k)
	}
	kinds := make([]string, 0, len(r.Faults))
	var total int64
	for k, v := range r.Faults {
		kinds = append(kinds, k)
		total += v
	}
	sort.Strings(kinds)
	fmt.Fprintf(w, "\nfaults injected (%d):\n", total)
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-28s %6d\n", k, r.Faults[k])
	}
	fmt.Fprintf(w, "\n  %-70s %7s %10s\n", "invariant", "checks", "violations")
	for _, inv := range r.Invariants {
		fmt.Fprintf(w, "  %-70s %7d %10d\n", inv.Name, inv.Checks, inv.Violations)
	}
	if r.OK() {
		fmt.Fprintf(w, "\nresult: PASS, 0 violations\n")
		return
	}
	fmt.Fprintf(w, "\nresult: FAIL, %d violations:\n", len(r.Violations))
	for _, v := range r.Violations {
		job := ""
		if v.Job != "" {
			job = " job " + v.Job[:min(12, len(v.Job))] + "…"
		}
		fmt.Fprintf(w, "  episode %d%s: %s: %s\n    reproduce: fedpca simulate chaos --seed %d --jobs-per-episode %d --episode %d\n",
			v.Episode, job, v.Invariant, v.Detail, r.Seed, r.JobsPerEpisode, v.Episode)
	}
}

// check verifies the invariants of a step's jobs once they ended and the
// owners settled.
func (ep *episode) check(runs []*jobRun) {
	r := ep.rep
	ep.mu.Lock()
	restart, rchecks := ep.restart, ep.rchecks
	ep.restart, ep.rchecks = nil, 0
	ep.mu.Unlock()
	if rchecks > 0 || len(restart) > 0 {
		r.add(InvRestart, rchecks, restart, ep, "")
	}
	for _, jr := range runs {
		ep.checkJob(jr)
	}
	ep.checkBudgets(runs)
	r.add(InvSettled, len(ep.owners)*len(runs), ep.unsettled(runs), ep, "")
}

func (ep *episode) checkJob(jr *jobRun) {
	r, id, st := ep.rep, jr.id(), jr.status
	lie := jr.deviant && (ep.plan.Deviation == DevLieDone || ep.plan.Deviation == DevLieFail)
	if lie {
		ep.checkLie(jr)
	} else if !jr.deviant {
		// (A deviation may make the user's call fail, with a stated
		// reason: checkDeviant.)
		r.verify(InvUser, jr.userErr == nil, ep, id, "%v", jr.userErr)
	}
	if id == "" {
		return
	}
	if st == nil {
		r.verify(InvEnds, false, ep, id, "the proxy does not know the job")
		return
	}
	r.verify(InvEnds, ended(st.GetState()), ep, id, "still %s after %s: %s", st.GetState(), chaosJobBound, st.GetReason())
	if st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED {
		r.verify(InvEnds, strings.TrimSpace(st.GetReason()) != "", ep, id, "failed without a reason")
	}
	done := st.GetState() == fedpcav1.JobState_JOB_STATE_DONE
	if done && !jr.deviant {
		r.verify(InvUser, jr.result != nil, ep, id, "the job is done but the user has no result")
	}
	uploaded := st.GetUploadedOwners()

	// Every upload acknowledged to its owner (on the wire, or in the
	// owner's own record) is included.
	acked := ep.ackedOwners(id)
	for _, o := range ep.owners {
		recs, err := ep.cl.Owner(o).JobRecords()
		if err != nil {
			r.verify(InvAcked, false, ep, id, "%s: %v", o, err)
			continue
		}
		for _, rec := range recs {
			if rec.Job == id && slices.Contains([]owner.Part{owner.PartUploaded, owner.PartCompleted, owner.PartRefunded}, rec.State) && !slices.Contains(acked, o) {
				acked = append(acked, o)
			}
		}
	}
	for _, o := range acked {
		r.verify(InvAcked, slices.Contains(uploaded, o), ep, id, "%s's upload was acknowledged but the job (%s) does not include it (included: %v)",
			o, st.GetState(), uploaded)
	}

	// No owner counted twice.
	set := slices.Compact(slices.Sorted(slices.Values(uploaded)))
	r.verify(InvOnce, len(set) == len(uploaded) && int(st.GetOwnersUploaded()) == len(uploaded), ep, id,
		"included owners %v (count %d)", uploaded, st.GetOwnersUploaded())
	if jr.result != nil {
		got := slices.Sorted(slices.Values(jr.result.Owners))
		r.verify(InvOnce, jr.result.NumOwners == len(uploaded) && slices.Equal(got, set), ep, id,
			"the result counts %d owners %v; the proxy included %v", jr.result.NumOwners, got, set)
	}

	// Each member that switched the job did so for the included owners, and
	// was one of the job's active members.
	for i := range ep.plan.CSPs {
		recs, err := ep.cl.CSP(i).Audit()
		if err != nil {
			r.verify(InvSwitch, false, ep, id, "%s audit: %v", sim.CSPID(i), err)
			continue
		}
		for _, rec := range recs {
			if rec.JobID == id {
				r.verify(InvSwitch, rec.Owners == len(uploaded) && slices.Contains(st.GetCspMembers(), sim.CSPID(i)), ep, id,
					"%s switched it for %d owners (active %v); the job included %d, its members are %v", sim.CSPID(i), rec.Owners, rec.Active, len(uploaded), st.GetCspMembers())
			}
		}
	}
	if jr.deviant && !lie {
		ep.checkDeviant(jr, set)
		return
	}
	if jr.result != nil {
		ep.checkRelease(jr, set)
	}
}

// exactSum is the integer sum of the named owners' statistics for a job,
// computed from their rows.
func (ep *episode) exactSum(spec *job.Spec, owners []string) ([]int64, error) {
	var rows [][]byte
	for _, o := range owners {
		i := slices.Index(ep.owners, o)
		if i < 0 {
			return nil, fmt.Errorf("unknown owner %s", o)
		}
		rows = append(rows, ep.parts[i])
	}
	return sim.ExactSum(spec, ep.sch, rows)
}

// checkRelease compares the release with the exact sum of the included
// owners' statistics: equal without noise (and so are the eigenvalues,
// against reference.json when every owner is included), within the stated
// noise level with it.
func (ep *episode) checkRelease(jr *jobRun, owners []string) {
	r, id, res, spec := ep.rep, jr.id(), jr.result, jr.spec
	exact, err := ep.exactSum(spec, owners)
	if err != nil {
		r.verify(InvExact, false, ep, id, "exact sum: %v", err)
		return
	}
	if spec.NoNoise {
		ok, why := ep.matches(res.Release, exact, spec, nil)
		r.verify(InvExact, ok, ep, id, "%s of %v", why, owners)
		if ok || !strings.HasPrefix(why, "release of") {
			ep.checkEigen(jr, owners, exact)
		}
		return
	}
	ok, why := ep.matches(res.Release, exact, spec, res)
	r.verify(InvNoise, ok, ep, id, "%s (plan %s, owners %v)", why, spec.NoisePlan, owners)
}

// matches compares a release with an exact sum: equal when noise is nil;
// otherwise the noise's mean square, in units of noise's stated level, must
// be about 1 (chi-square over the release; [0.1, 10] leaves a negligible
// chance of a false alarm at these sizes and catches missing noise or a
// mask left in).
func (ep *episode) matches(rel *job.ReleaseDoc, exact []int64, spec *job.Spec, noise *job.Result) (bool, string) {
	got := slices.Concat(rel.R, rel.V, rel.N)
	if len(got) != len(exact) {
		return false, fmt.Sprintf("release of %d values, the exact sum has %d", len(got), len(exact))
	}
	if noise == nil {
		diff := 0
		for k := range got {
			if got[k] != exact[k] {
				diff++
			}
		}
		return diff == 0, fmt.Sprintf("%d of %d values differ from the exact sum", diff, len(got))
	}
	ms, err := ep.noiseMS(rel, exact, spec, noise)
	if err != nil {
		return false, err.Error()
	}
	return ms > 0.1 && ms < 10, fmt.Sprintf("noise mean square %.3g times the stated level", ms)
}

// noiseMS is the mean square of the release's difference from the exact
// sum, each value in units of its block's stated noise (SigmaTotal).
func (ep *episode) noiseMS(rel *job.ReleaseDoc, exact []int64, spec *job.Spec, noise *job.Result) (float64, error) {
	got := slices.Concat(rel.R, rel.V, rel.N)
	if len(got) != len(exact) || len(got) == 0 {
		return 0, fmt.Errorf("release of %d values, the exact sum has %d", len(got), len(exact))
	}
	l, err := spec.Layout(ep.sch)
	if err != nil {
		return 0, err
	}
	scale := math.Ldexp(1, int(ep.sch.Bits))
	sigma := func(k int) float64 {
		switch {
		case k < l.RLen():
			return float64(noise.Privacy.SigmaTotal.R) * scale * scale
		case k < l.RLen()+l.VLen():
			return float64(noise.Privacy.SigmaTotal.V) * scale
		}
		return float64(noise.Privacy.SigmaTotal.N) * scale
	}
	var ms float64
	for k := range got {
		z := float64(got[k]-exact[k]) / sigma(k)
		ms += z * z
	}
	return ms / float64(len(got)), nil
}

// checkEigen compares a noise-off result's eigenvalues with reference.json
// (every owner included) or with the central analysis of the included
// owners' rows.
func (ep *episode) checkEigen(jr *jobRun, owners []string, exact []int64) {
	r, id, res, spec := ep.rep, jr.id(), jr.result, jr.spec
	if res.Components == nil {
		r.verify(InvEigen, false, ep, id, "no components in the result")
		return
	}
	pick := func(c *job.Result) []float64 {
		if spec.Analysis == job.PCA {
			return c.Components.AllEigenvalues
		}
		return c.Components.Eigenvalues
	}
	got, what, tol := pick(res), "reference.json", 1e-6
	var want []float64
	if len(owners) == len(ep.owners) {
		ref, err := datasets.LoadReference(ep.plan.Dataset)
		if err != nil {
			r.verify(InvEigen, false, ep, id, "%v", err)
			return
		}
		want = ref.PCAEigenvalues
		if spec.Analysis != job.PCA {
			// The generalised problem amplifies the 2^-22 quantisation
			// (glass, with classes of a few rows: 1.3e-6).
			want, tol = ref.DCAEigenvalues, 1e-5
		}
	} else {
		l, err := spec.Layout(ep.sch)
		if err != nil {
			r.verify(InvEigen, false, ep, id, "%v", err)
			return
		}
		rel, err := stats.Unpack(l, ep.sch.Bits, exact)
		if err != nil {
			r.verify(InvEigen, false, ep, id, "%v", err)
			return
		}
		central, err := job.AnalyzeRelease(job.HeaderOf(spec, ep.sch, ""), spec.Analysis, spec.K, rel, nil, job.Privacy{NoNoise: true})
		if err != nil {
			r.verify(InvEigen, false, ep, id, "central analysis of %v: %v", owners, err)
			return
		}
		want, what, tol = pick(central), fmt.Sprintf("the central analysis of %v", owners), 1e-9
	}
	worst := 0.0
	if len(got) != len(want) {
		worst = math.Inf(1)
	} else {
		for i := range want {
			worst = max(worst, math.Abs(got[i]-want[i])/math.Max(math.Abs(want[i]), 1e-3*math.Abs(want[0])))
		}
	}
	r.verify(InvEigen, worst <= tol, ep, id, "%s eigenvalues %v differ from %s %v (relative %.2g)", spec.Analysis, got, what, want, worst)
}

// checkBudgets checks every owner's ledger: never overspent, and charged
// for exactly the jobs that included its upload (refunded if such a job
// failed before any key switch), with no reservation left.
func (ep *episode) checkBudgets(runs []*jobRun) {
	r, ds := ep.rep, ep.sch.ID
	for _, o := range ep.owners {
		ow := ep.cl.Owner(o)
		bal, err := ow.Balance(ds)
		r.verify(InvBudget, err == nil && bal.SpentCost.Plus(bal.ReservedCost).Within(bal.Epsilon, bal.Delta), ep, "",
			"%s: spent and reserved certify epsilon %.6g, above the budget of %.6g (%v)", o, bal.EpsilonSpentAndReserved(), bal.Epsilon, err)
		entries, err := ow.Ledger(ds)
		if err != nil {
			r.verify(InvCharged, false, ep, "", "%s ledger: %v", o, err)
			continue
		}
		for _, jr := range runs {
			st := jr.status
			if st == nil || !ended(st.GetState()) {
				continue
			}
			got := "no entry"
			if i := slices.IndexFunc(entries, func(e owner.LedgerEntry) bool { return e.Job == jr.id() }); i >= 0 {
				got = entries[i].State
			}
			included := slices.Contains(st.GetUploadedOwners(), o)
			want := []string{"no entry", owner.Released}
			switch {
			case included && st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED && !st.GetSwitched():
				want = []string{owner.Refunded}
			case included:
				want = []string{owner.Committed}
			}
			r.verify(InvCharged, slices.Contains(want, got), ep, jr.id(), "%s's ledger entry is %q, want %q (included %v, job %s, switched %v)",
				o, got, want, included, st.GetState(), st.GetSwitched())
		}
	}
}
