package user

import (
	"context"
	"fmt"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/profile"
	"github.com/fedpca/fedpca/protocol/schema"
)

// ProfileRequest asks for a profile: the rounds that choose a schema's
// centers, scales and clip norm privately (see package profile).
type ProfileRequest struct {
	// Declared is the schema the owners serve, with public bounds min and
	// max on every feature.
	Declared *schema.Schema
	// Options are the profile's: the total budget, the profile's share of
	// it, the method, C's quantile, public scales (profile.Options).
	profile.Options
	// MainAnalysis and MainSplit describe the main job the profile leaves
	// budget for (default PCA and its default split): its epsilon is the
	// largest whose cost, with the rounds', stays within the total
	// (profile.MainEpsilon: the discrete corrections are counted as the
	// owners' ledgers count them).
	MainAnalysis string
	MainSplit    dp.Split
	// The jobs' noise plan, owners and deadline, as in Request.
	Plan         string
	Tolerate     int
	Owners       []string
	MinOwners    int
	Deadline     time.Time
	MaxOwnerRows int64
}

// ProfileResult is a profile (profile.Result): the schema chosen, each
// parameter with its noise, the budget left for the main job, and what
// each round released.
type ProfileResult = profile.Result

// Profile runs the profile's rounds, each an ordinary job, and returns the
// chosen schema; progress, if set, sees every status change of the jobs.
func (c *Client) Profile(ctx context.Context, r ProfileRequest, progress func(*fedpcav1.JobStatus)) (*ProfileResult, error) {
	if r.MainAnalysis == "" {
		r.MainAnalysis = job.PCA
	}
	request := func(sch *schema.Schema, analysis string, eps float64) Request {
		return Request{Schema: sch, Analysis: analysis, Epsilon: eps, Delta: r.Delta, Plan: r.Plan, Tolerate: r.Tolerate,
			Owners: r.Owners, MinOwners: r.MinOwners, Deadline: r.Deadline, MaxOwnerRows: r.MaxOwnerRows}
	}
	run := func(rd profile.Round) (*job.Result, error) {
		req := request(rd.Schema, rd.Analysis, rd.Epsilon)
		req.NormEdges, req.Buckets, req.Windows, req.ClampBox = rd.NormEdges, rd.Buckets, rd.Windows, rd.ClampBox
		spec, err := c.Spec(ctx, req)
		if err != nil {
			return nil, err
		}
		if _, err := c.Submit(ctx, spec, rd.Schema); err != nil {
			return nil, err
		}
		st, err := c.Wait(ctx, spec.ID(), progress)
		if err != nil {
			return nil, err
		}
		if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
			return nil, fmt.Errorf("job %s failed: %s", short(spec.ID()), st.GetReason())
		}
		return c.Fetch(ctx, spec, rd.Schema)
	}
	var main *job.Spec
	mainCost := func(sch *schema.Schema, eps float64) (dp.Cost, error) {
		if main == nil || main.SchemaHash != sch.HashHex() {
			req := request(sch, r.MainAnalysis, eps)
			req.Split = r.MainSplit
			var err error
			if main, err = c.Spec(ctx, req); err != nil {
				return dp.Cost{}, fmt.Errorf("profile, the main job: %w", err)
			}
		}
		main.Epsilon = eps
		cal, err := main.Calibration(sch)
		return cal.Cost, err
	}
	return profile.Run(r.Declared, r.Options, run, mainCost)
}
