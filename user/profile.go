package user

import (
	"context"
	"fmt"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/profile"
	"github.com/fedpca/fedpca/protocol/schema"
)

// ProfileRequest asks for a profile: the two rounds that choose a schema's
// centers, scales and clip norm privately (see package profile).
type ProfileRequest struct {
	// Declared is the schema the owners serve, with public bounds min and
	// max on every feature.
	Declared *schema.Schema
	// Epsilon and Delta are the total budget of the profile and the main
	// job that will use its schema; Share of it (of mu^2) goes to the
	// profile, MomentsShare of that to the first round; C is set at
	// Quantile of the row norms. Zero values take the profile defaults (for
	// Quantile: profile.AutoQuantile, from the noisy row count).
	Epsilon, Delta                float64
	Share, MomentsShare, Quantile float64
	// KeepScales says the declared schema's centers and scales are public:
	// the profile is the norms round alone (no bounds needed), spending the
	// whole Share, and chooses only C.
	KeepScales bool
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

// ProfileResult is a profile: the schema chosen, the budget left for the
// main job, and what each round released.
type ProfileResult struct {
	Schema   *schema.Schema       `json:"-"`
	Budget   profile.Budget       `json:"budget"`
	Share    float64              `json:"share"`              // the profile's share of mu^2
	Estimate *profile.Estimate    `json:"estimate,omitempty"` // nil with KeepScales
	Edges    []fixedpoint.Decimal `json:"norm_edges"`
	Quantile float64              `json:"quantile"` // the one C was set at
	Moments  *job.Result          `json:"moments,omitempty"`
	Norms    *job.Result          `json:"norms"`
}

func (r *ProfileRequest) defaults() {
	if r.Delta == 0 {
		r.Delta = job.DefaultDelta
	}
	switch {
	case r.Share != 0:
	case r.KeepScales:
		r.Share = profile.DefaultNormsShare
	default:
		r.Share = profile.DefaultShare
	}
	if r.KeepScales {
		r.MomentsShare = 0
	} else if r.MomentsShare == 0 {
		r.MomentsShare = profile.DefaultMomentsShare
	}
	if r.MainAnalysis == "" {
		r.MainAnalysis = job.PCA
	}
}

// Profile runs the two rounds and returns the chosen schema; progress, if
// set, sees every status change of both jobs.
func (c *Client) Profile(ctx context.Context, r ProfileRequest, progress func(*fedpcav1.JobStatus)) (*ProfileResult, error) {
	r.defaults()
	b, err := profile.Split(r.Epsilon, r.Delta, r.Share, r.MomentsShare)
	if err != nil {
		return nil, err
	}
	out := &ProfileResult{Budget: b, Share: r.Share, Quantile: r.Quantile}
	run := func(name string, sch *schema.Schema, eps float64, edges []fixedpoint.Decimal) (*job.Result, error) {
		spec, err := c.Spec(ctx, Request{Schema: sch, Analysis: name, Epsilon: eps, Delta: r.Delta, Plan: r.Plan, Tolerate: r.Tolerate,
			Owners: r.Owners, MinOwners: r.MinOwners, Deadline: r.Deadline, MaxOwnerRows: r.MaxOwnerRows, NormEdges: edges})
		if err != nil {
			return nil, fmt.Errorf("profile, %s round: %w", name, err)
		}
		if _, err := c.Submit(ctx, spec, sch); err != nil {
			return nil, fmt.Errorf("profile, %s round: %w", name, err)
		}
		st, err := c.Wait(ctx, spec.ID(), progress)
		if err != nil {
			return nil, fmt.Errorf("profile, %s round: %w", name, err)
		}
		if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
			return nil, fmt.Errorf("profile, %s round: job %s failed: %s", name, short(spec.ID()), st.GetReason())
		}
		return c.Fetch(ctx, spec, sch)
	}
	out.Edges = profile.Edges(r.Declared.D())
	// withScales returns the schema the norms round and the main job run
	// under: the declared one, or the moments' estimates, with clip norm c.
	withScales := func(c fixedpoint.Decimal) (*schema.Schema, error) {
		if out.Estimate == nil {
			s := *r.Declared
			s.ClipNorm = c
			return &s, s.Validate()
		}
		return out.Estimate.Schema(r.Declared, c)
	}
	if !r.KeepScales {
		bounds, err := profile.BoundsSchema(r.Declared)
		if err != nil {
			return nil, err
		}
		if out.Moments, err = run(job.MomentsJob, bounds, b.Moments, nil); err != nil {
			return nil, err
		}
		rel, err := out.Moments.Release.Release()
		if err != nil {
			return nil, err
		}
		sigma := out.Moments.Privacy.SigmaTotal
		if out.Estimate, err = profile.FromMoments(bounds, rel, float64(sigma.R), float64(sigma.V)); err != nil {
			return nil, err
		}
	}
	normsSchema, err := withScales(out.Edges[len(out.Edges)-1])
	if err != nil {
		return nil, err
	}
	if out.Norms, err = run(job.NormsJob, normsSchema, b.Norms, out.Edges); err != nil {
		return nil, err
	}
	rel, err := out.Norms.Release.Release()
	if err != nil {
		return nil, err
	}
	if out.Quantile == 0 {
		out.Quantile = profile.AutoQuantile(profile.NoisyCount(rel), b.Mu, r.Declared.D())
	}
	clip, err := profile.ClipAt(out.Edges, rel, out.Quantile)
	if err != nil {
		return nil, err
	}
	if out.Schema, err = withScales(clip); err != nil {
		return nil, err
	}
	// The main job's epsilon: what the rounds left, as the owners' ledgers
	// count it.
	var costs []dp.Cost
	for _, res := range []*job.Result{out.Moments, out.Norms} {
		if res != nil {
			if res.Privacy.Cost == nil {
				return nil, fmt.Errorf("profile: job %s reports no cost", short(res.JobID))
			}
			costs = append(costs, *res.Privacy.Cost)
		}
	}
	spent := dp.Compose(costs...)
	main, err := c.Spec(ctx, Request{Schema: out.Schema, Analysis: r.MainAnalysis, Split: r.MainSplit, Epsilon: b.Main, Delta: r.Delta, Plan: r.Plan, Tolerate: r.Tolerate,
		Owners: r.Owners, MinOwners: r.MinOwners, Deadline: r.Deadline, MaxOwnerRows: r.MaxOwnerRows})
	if err != nil {
		return nil, fmt.Errorf("profile, the main job: %w", err)
	}
	out.Budget.Main, err = profile.MainEpsilon(r.Epsilon, r.Delta, spent, func(eps float64) (dp.Cost, error) {
		main.Epsilon = eps
		cal, err := main.Calibration(out.Schema)
		return cal.Cost, err
	})
	if err != nil {
		return nil, err
	}
	main.Epsilon = out.Budget.Main
	cal, err := main.Calibration(out.Schema)
	if err != nil {
		return nil, err
	}
	out.Budget.Spent = &spent
	_, out.Budget.Total = profile.Total(r.Delta, spent, cal.Cost)
	return out, nil
}
