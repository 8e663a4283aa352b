package chaos

import (
	"context"
	"slices"
	"strings"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
)

// checkLie: the user's watch was lied to. Whatever the user made of it, no
// wrong release: a result it fetched is checked as any (the exact sum or
// the stated noise, the included owners), and once the job really is done
// the user fetches its real result.
func (ep *episode) checkLie(jr *jobRun) {
	r, id, st, o := ep.rep, jr.id(), jr.status, ep.dev.outcome()
	if id == "" {
		r.verify(InvDevStatus, false, ep, id, "the job was not created: %v", jr.userErr)
		return
	}
	r.verify(InvDevStatus, o.served > 0, ep, id, "no lie was told")
	if st.GetState() == fedpcav1.JobState_JOB_STATE_DONE && jr.result == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		res, err := ep.user.Fetch(ctx, jr.spec, ep.sch)
		r.verify(InvDevStatus, err == nil, ep, id, "after the lie (user: %v), the done job's result: %v", jr.userErr, err)
		jr.result = res
	}
}

// checkDeviant checks the job the proxy deviated in (other than by lying):
// what the honest parties detected, or that the release is exactly what the
// deviation made of the sum, with the noise of the honest parties.
func (ep *episode) checkDeviant(jr *jobRun, included []string) {
	r, id, st, o := ep.rep, jr.id(), jr.status, ep.dev.outcome()
	done := st.GetState() == fedpcav1.JobState_JOB_STATE_DONE
	switch o.kind {
	case DevSwapKey:
		declined := 0
		for _, d := range st.GetDeclinedOwners() {
			if d.GetReason() == fedpcav1.DeclineReason_DECLINE_REASON_COMMITTEE_KEY {
				declined++
			}
		}
		r.verify(InvDevKey, o.served > 0 && st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED && st.GetReason() != "" && len(st.GetUploadedOwners()) == 0 &&
			jr.result == nil && declined == len(ep.owners), ep, id,
			"swapped keys served %d; job %s (%s), uploaded %v, %d of %d owners declined committee_key", o.served, st.GetState(), st.GetReason(),
			st.GetUploadedOwners(), declined, len(ep.owners))
	case DevReplay:
		r.verify(InvUser, jr.userErr == nil, ep, id, "%v", jr.userErr)
		if st.GetSwitched() || done {
			r.verify(InvDevReplay, o.replayChecks > 0, ep, id, "the job was switched but nothing was replayed")
		}
		if o.replayChecks > 0 {
			r.add(InvDevReplay, o.replayChecks, o.replays, ep, id)
		}
		if jr.result != nil {
			ep.checkRelease(jr, included)
			if exact, err := ep.exactSum(jr.spec, included); err == nil {
				ep.checkFloor(jr, exact, included)
			}
		}
	case DevDouble, DevDrop:
		if !done || jr.result == nil {
			r.verify(InvDevSum, !done || jr.userErr != nil, ep, id, "the job is done, the user has no result and no error")
			return
		}
		if o.applied == 0 {
			// Every owner's upload but one carried the target's: with
			// two or more (the job runs alone, without faults) the double
			// must have deviated.
			r.verify(InvDevSum, len(included) < 2, ep, id, "%d owners uploaded but no upload carried another's (target %q)", len(included), o.target)
			ep.checkRelease(jr, included)
			return
		}
		if !slices.Contains(included, o.target) || !slices.Contains(included, o.carrier) {
			r.verify(InvDevSum, false, ep, id, "the altered sum names %v, not the target %s and the carrier %s", included, o.target, o.carrier)
			return
		}
		exact, err1 := ep.exactSum(jr.spec, included)
		own, err2 := ep.exactSum(jr.spec, []string{o.target})
		if err1 != nil || err2 != nil {
			r.verify(InvDevSum, false, ep, id, "exact sums: %v %v", err1, err2)
			return
		}
		sign, honest := int64(1), included
		if o.kind == DevDrop {
			sign, honest = -1, slices.DeleteFunc(slices.Clone(included), func(x string) bool { return x == o.target })
		}
		for k := range exact {
			exact[k] += sign * own[k]
		}
		ep.verifyAltered(jr, exact, o)
		ep.checkFloor(jr, exact, honest)
	case DevResubmit:
		if done && jr.result == nil {
			// The user's analysis of the old sum may fail (a noisy sum
			// under a noise-off spec): then with a stated reason.
			r.verify(InvDevSum, jr.userErr != nil && jr.userErr.Error() != "", ep, id, "the job is done, the user has no result and no error")
			return
		}
		if !done {
			return
		}
		ep.mu.Lock()
		old := ep.runs[o.from]
		ep.mu.Unlock()
		if o.applied == 0 || old == nil || old.status == nil {
			// No earlier sum of the job's analysis to resubmit: the
			// proxy was honest.
			ep.checkRelease(jr, included)
			return
		}
		// The old sum the members switched was blinded with the old job's
		// masks; the proxy unblinds the result with the new job's, fresh
		// and uniform, so the release is uniform too: it must not show the
		// earlier job's sum (whose exact value the harness knows).
		exact, err := ep.exactSum(old.spec, old.status.GetUploadedOwners())
		if err != nil {
			r.verify(InvDevSum, false, ep, id, "exact sum: %v", err)
			return
		}
		var noise = old.result
		if old.spec.NoNoise {
			noise = nil
		} else if noise == nil {
			return // the earlier job's noise level is unknown
		}
		shown, _ := ep.matches(jr.result.Release, exact, jr.spec, noise)
		r.verify(InvDevSum, !shown, ep, id, "the resubmitted sum of job %s… (owners %v) was released under job %s…: the new job's masks did not cover it",
			o.from[:12], old.status.GetUploadedOwners(), id[:12])
	}
}

// verifyAltered: the release is the altered exact sum, without noise
// exactly, with noise at least at the honest parties' level.
func (ep *episode) verifyAltered(jr *jobRun, exact []int64, o outcome) {
	noise := jr.result
	if jr.spec.NoNoise {
		noise = nil
	}
	ok, why := ep.matches(jr.result.Release, exact, jr.spec, noise)
	ep.rep.verify(InvDevSum, ok, ep, jr.id(), "%s (%s of %s into %s, plan %s)", why, o.kind, o.target, o.carrier, jr.spec.NoisePlan)
}

// checkFloor: under the owners and all plans, the noise in the release
// around the sum the proxy made is at least what the honest owners still in
// it added (PROTOCOL.md 10: their noise is a floor no server can remove).
// The mean square of the noise, in units of the stated variance, is an
// average over every released value (hundreds), so half the floor is far
// outside its spread.
func (ep *episode) checkFloor(jr *jobRun, exact []int64, honest []string) {
	spec, res := jr.spec, jr.result
	if spec.NoNoise || (spec.NoisePlan != dp.PlanOwners && spec.NoisePlan != dp.PlanAll) {
		return
	}
	var floor, total float64
	for _, sh := range res.Privacy.Shares {
		total += sh.Value
		if o, ok := strings.CutPrefix(sh.Party, "owner/"); ok && slices.Contains(honest, o) {
			floor += sh.Value
		}
	}
	ms, err := ep.noiseMS(res.Release, exact, spec, res)
	ok := err == nil && total > 0 && ms >= 0.5*floor/total
	ep.rep.verify(InvDevNoise, ok, ep, jr.id(), "noise mean square %.3g of the stated level; the %d honest owners' shares alone are %.3g of it (%v)",
		ms, len(honest), floor/max(total, 1e-300), err)
}
