package chaos

import (
	"context"
	"slices"
	"strings"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/sim"
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
		// Every owner that answered refused the key; the job may fail as
		// soon as the refusals leave too few owners, before the others
		// answer.
		r.verify(InvDevKey, o.served > 0 && st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED && st.GetReason() != "" && len(st.GetUploadedOwners()) == 0 &&
			jr.result == nil && declined > 0 && declined == len(st.GetDeclinedOwners()), ep, id,
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
	case DevShiftC0:
		// The members cannot tell M from a mask (they do not check a
		// statistics job's c0): the job completes, and its release is
		// the sum plus M with the honest parties' noise.
		r.verify(InvUser, jr.userErr == nil, ep, id, "%v", jr.userErr)
		if jr.result == nil {
			return
		}
		exact, err := ep.exactSum(jr.spec, included)
		if err != nil || len(o.shift) != len(exact) {
			r.verify(InvDevShift, false, ep, id, "exact sum of %d values (%v), a shift of %d", len(exact), err, len(o.shift))
			return
		}
		shifted := slices.Clone(exact)
		for k, m := range o.shift {
			shifted[k] += m
		}
		var noise *job.Result
		if !jr.spec.NoNoise {
			noise = jr.result
		}
		ok, why := ep.matches(jr.result.Release, shifted, jr.spec, noise)
		r.verify(InvDevShift, o.applied > 0 && ok, ep, id, "%d ciphertexts of the result shifted; against the sum plus M: %s", o.applied, why)
		ep.checkFloor(jr, shifted, included)
	case DevDouble, DevDrop, DevSubset, DevCraftedSum, DevCraftedUpload, DevForgedOwner, DevResubmit:
		if o.applied == 0 {
			// Nothing to alter (no upload to double or drop, no earlier sum
			// of the job's shape to resubmit): the proxy was honest.
			if jr.result != nil {
				ep.checkRelease(jr, included)
			}
			return
		}
		_, phrase := refused(o.kind)
		var switched []string
		for i := range ep.plan.CSPs {
			recs, _ := ep.cl.CSP(i).Audit()
			for _, rec := range recs {
				if rec.JobID == id {
					switched = append(switched, sim.CSPID(i))
				}
			}
		}
		r.verify(InvDevSum, st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED && strings.Contains(st.GetReason(), "refused the key switch") &&
			strings.Contains(st.GetReason(), phrase) && jr.result == nil && o.shares == 0 && len(switched) == 0, ep, id,
			"%s (target %q, %d ciphertexts altered): job %s (%s); result %v; %d shares sent; switched by %v; want the job failed, a member's refusal saying %q, no share",
			o.kind, o.target, o.applied, st.GetState(), st.GetReason(), jr.result != nil, o.shares, switched, phrase)
	}
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
