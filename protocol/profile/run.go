package profile

import (
	"fmt"
	"math"
	"strconv"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

// Options describe a profile.
type Options struct {
	// Epsilon and Delta are the total budget of the profile and the main
	// job that will use its schema; Share of it (of mu^2) goes to the
	// profile (0: DefaultShare, or DefaultNormsShare with KeepScales).
	Epsilon, Delta, Share float64
	// Method is Quantiles (default) or Moments.
	Method string
	// Quantile is the quantile of the row norms C is set at (0:
	// AutoQuantile).
	Quantile float64
	// KeepScales says the declared schema's centers and scales are public:
	// the profile is the norms round alone (no bounds needed) and chooses
	// only C.
	KeepScales bool
}

// Round is one job the profile asks for: an ordinary job of the analysis
// under the schema, at the epsilon, with the marginals' grids or the norms'
// edges.
type Round struct {
	Name      string
	Analysis  string
	Schema    *schema.Schema
	Epsilon   float64
	Buckets   int
	Windows   []job.Window
	ClampBox  bool
	NormEdges []fixedpoint.Decimal
}

// Runner runs a round through the protocol and returns its result (its
// release, the noise in it and its cost).
type Runner func(Round) (*job.Result, error)

// MainCost returns the cost of the main job under a schema at an epsilon
// (its calibration's, dp.Calibration.Cost).
type MainCost func(sch *schema.Schema, epsilon float64) (dp.Cost, error)

// Feature is what the profile says of one feature, in data units, with
// the standard errors the rounds' noise gives the estimates (by parametric
// bootstrap for the quantiles, from the noise level for the moments).
type Feature struct {
	Name     string  `json:"name"`
	Center   float64 `json:"center"`
	CenterSE float64 `json:"center_se"`
	Scale    float64 `json:"scale"`
	ScaleSE  float64 `json:"scale_se"`
	// Resolution is the width of the finest grid's buckets (quantiles) in
	// data units; Unresolved marks a feature whose spread the rounds could
	// not tell apart from their noise or their grid (its scale is an upper
	// estimate).
	Resolution float64 `json:"resolution,omitempty"`
	Unresolved bool    `json:"unresolved,omitempty"`
}

// Result is a profile: the schema chosen, each parameter with its noise,
// the budget left for the main job, and what each round released.
type Result struct {
	Schema   *schema.Schema `json:"-"`
	Method   string         `json:"method"`
	Share    float64        `json:"share"` // the profile's share of mu^2
	Budget   Budget         `json:"budget"`
	N        float64        `json:"noisy_n"`
	Features []Feature      `json:"features,omitempty"` // none with KeepScales
	// ClipNorm is C, at Quantile of the norms histogram over Edges.
	ClipNorm fixedpoint.Decimal   `json:"clip_norm"`
	Quantile float64              `json:"quantile"`
	Edges    []fixedpoint.Decimal `json:"norm_edges"`
	Warnings []string             `json:"warnings,omitempty"`
	// Advice is what the main job can be expected to capture, and whether
	// public scales would do better (none with KeepScales).
	Advice *Advice       `json:"advice,omitempty"`
	Rounds []*job.Result `json:"rounds"`
}

// ScaleNoiseWarning is the standard error of a scale, as a fraction of
// the scale, above which the profile warns.
const ScaleNoiseWarning = 0.25

// Run runs the profile's rounds with run and returns the schema they
// choose and the epsilon left for the main job (mainCost gives its cost).
func Run(declared *schema.Schema, o Options, run Runner, mainCost MainCost) (*Result, error) {
	if o.Delta == 0 {
		o.Delta = job.DefaultDelta
	}
	if o.Method == "" {
		o.Method = Quantiles
	}
	if o.Share == 0 {
		o.Share = DefaultShare
		if o.KeepScales {
			o.Share = DefaultNormsShare
		}
	}
	fractions, ok := RoundShares[o.Method]
	switch {
	case o.KeepScales:
		fractions = []float64{1}
	case !ok:
		return nil, fmt.Errorf("profile: method %q, want %s or %s", o.Method, Quantiles, Moments)
	}
	b, err := Split(o.Epsilon, o.Delta, o.Share, fractions)
	if err != nil {
		return nil, err
	}
	out := &Result{Method: o.Method, Share: o.Share, Budget: b, Edges: Edges(declared.D())}
	round := func(r Round) (*job.Result, error) {
		r.Epsilon = b.Rounds[len(out.Rounds)].Epsilon
		res, err := run(r)
		if err != nil {
			return nil, fmt.Errorf("profile, %s round: %w", r.Name, err)
		}
		if res.Privacy.Cost == nil {
			return nil, fmt.Errorf("profile, %s round: job %s reports no cost", r.Name, res.JobID)
		}
		out.Rounds = append(out.Rounds, res)
		return res, nil
	}
	mapped := declared
	if o.KeepScales {
		out.Method = ""
	} else {
		bounds, err := BoundsSchema(declared)
		if err != nil {
			return nil, err
		}
		if o.Method == Moments {
			err = out.moments(bounds, round)
		} else {
			err = out.quantiles(bounds, round)
		}
		if err != nil {
			return nil, err
		}
		if mapped, err = out.mapped(declared); err != nil {
			return nil, err
		}
	}
	normsSchema := *mapped
	normsSchema.ClipNorm = out.Edges[len(out.Edges)-1]
	norms, err := round(Round{Name: job.NormsJob, Analysis: job.NormsJob, Schema: &normsSchema, NormEdges: out.Edges})
	if err != nil {
		return nil, err
	}
	rel, err := norms.Release.Release()
	if err != nil {
		return nil, err
	}
	if o.KeepScales {
		out.N = NoisyCount(rel)
	}
	if out.Quantile = o.Quantile; out.Quantile == 0 {
		out.Quantile = AutoQuantile(NoisyCount(rel), b.Mu, declared.D())
	}
	if out.ClipNorm, err = ClipAt(out.Edges, rel, out.Quantile); err != nil {
		return nil, err
	}
	final := *mapped
	final.ClipNorm = out.ClipNorm
	if err := final.Validate(); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	out.Schema = &final
	// The main job's epsilon: what the rounds left, as the owners' ledgers
	// count it.
	var costs []dp.Cost
	for _, r := range out.Rounds {
		costs = append(costs, *r.Privacy.Cost)
	}
	spent := dp.Compose(costs...)
	if out.Budget.Main, err = MainEpsilon(o.Epsilon, o.Delta, spent, func(eps float64) (dp.Cost, error) { return mainCost(out.Schema, eps) }); err != nil {
		return nil, err
	}
	c, err := mainCost(out.Schema, out.Budget.Main)
	if err != nil {
		return nil, err
	}
	out.Budget.Spent = &spent
	_, out.Budget.Total = Total(o.Delta, spent, c)
	if !o.KeepScales {
		a := out.Advise(b.Mu, declared.D())
		out.Advice = &a
		if a.PublicScales {
			out.Warnings = append(out.Warnings, fmt.Sprintf("%d of %d spreads are unresolved (upper estimates): the scales are at the noise's level for this budget and row count; public reference scales would do better (see the advice below)", a.Unresolved, a.Features))
		}
	}
	return out, nil
}

// quantiles runs the marginals round and the windowed moments: a noisy
// histogram of each feature over a coarse grid on its declared bounds
// locates it (the buckets above the noise, Marginal.Span: the window; all of
// the bounds when none is above it, or with fewer than
// LocateThreshold rows per unit of the main job's noise), then the moments of
// the values winsorized at the window (a moments job under the schema that
// maps each window onto [-1, 1], with the values clamped into it) measure
// its mean and spread with noise of the window's width, not the bounds'.
func (out *Result) quantiles(bounds *schema.Schema, round func(Round) (*job.Result, error)) error {
	coarse, err := round(Round{Name: "locate", Analysis: job.MarginalsJob, Schema: bounds, Buckets: CoarseBuckets})
	if err != nil {
		return err
	}
	ms, n, err := readMarginals(coarse, nil)
	if err != nil {
		return err
	}
	sigma := float64(coarse.Privacy.SigmaTotal.N)
	// The windows are used with many rows per unit of the main job's noise
	// only (measured: below, the buckets above the noise are the modes
	// alone, and the windows cut real tails off, which underestimates the
	// spreads; the bounds are used whole, as the moments method does).
	locate := n*out.Budget.Mu/math.Sqrt(float64(len(ms))) >= LocateThreshold
	win := *bounds
	win.Features = append([]schema.Feature(nil), bounds.Features...)
	located := make([]bool, len(ms))
	for i, m := range ms {
		lo, hi, ok := m.Span(SeedSignificance(len(ms), len(m.Counts))*sigma, Significant*sigma)
		if !locate {
			lo, hi = -1, 1
		}
		located[i] = ok
		if win.Features[i].Center, win.Features[i].Scale, err = windowMap(bounds.Features[i], math.Max(-1, lo), math.Min(1, hi)); err != nil {
			return err
		}
	}
	if err := win.Validate(); err != nil {
		return fmt.Errorf("profile: the windows: %w", err)
	}
	if err := out.moments(&win, round); err != nil {
		return err
	}
	for i := range out.Features {
		out.Features[i].Unresolved = out.Features[i].Unresolved || !located[i]
		out.Features[i].Resolution = 0
	}
	return nil
}

// windowMap returns the center and scale (data units) that map the window
// [lo, hi] (in the bounds schema's units of feature f) onto [-1, 1], as
// decimals of 6 significant digits, the window rounded outward.
func windowMap(f schema.Feature, lo, hi float64) (center, scale fixedpoint.Decimal, err error) {
	c, _ := f.Center.Rat().Float64()
	h, _ := f.Scale.Rat().Float64()
	mid, half := c+h*(lo+hi)/2, h*(hi-lo)/2
	if center, err = decimal(mid, 6); err != nil {
		return
	}
	cm, _ := center.Rat().Float64()
	// Widen the half-width to cover the window around the rounded center.
	half = math.Max(half, math.Max(math.Abs(c+h*hi-cm), math.Abs(c+h*lo-cm)))
	scale, err = decimal(half*(1+1e-5), 6)
	return
}

// moments runs the moments round (the earlier estimator, FromMoments).
func (out *Result) moments(bounds *schema.Schema, round func(Round) (*job.Result, error)) error {
	res, err := round(Round{Name: job.MomentsJob, Analysis: job.MomentsJob, Schema: bounds, ClampBox: true})
	if err != nil {
		return err
	}
	rel, err := res.Release.Release()
	if err != nil {
		return err
	}
	e, err := FromMoments(bounds, rel, float64(res.Privacy.SigmaTotal.R), float64(res.Privacy.SigmaTotal.V))
	if err != nil {
		return err
	}
	out.N = e.N
	for i, f := range bounds.Features {
		sc, _ := f.Scale.Rat().Float64()
		mc, _ := f.Center.Rat().Float64()
		// The variance's noise VarNoise (of the half-range squared) gives
		// the std's by the delta method: VarNoise / (2 std).
		sd := e.Std[i] / sc
		out.Features = append(out.Features, toData(f, (e.Mean[i]-mc)/sc, e.MeanNoise, sd, e.VarNoise/(2*sd), 0, e.AtNoise[i]))
	}
	return nil
}

// toData converts an estimate in the bounds schema's units (the feature
// f's map) to data units.
func toData(f schema.Feature, c, cse, s, sse, res float64, unresolved bool) Feature {
	center, _ := f.Center.Rat().Float64()
	half, _ := f.Scale.Rat().Float64()
	return Feature{Name: f.Name, Center: center + half*c, CenterSE: half * cse, Scale: half * s, ScaleSE: half * sse,
		Resolution: half * res, Unresolved: unresolved}
}

// mapped returns the declared schema with the estimated centers and scales
// and warns about the uncertain ones.
func (out *Result) mapped(declared *schema.Schema) (*schema.Schema, error) {
	s := *declared
	s.Features = append([]schema.Feature(nil), declared.Features...)
	unresolved := 0
	for j, f := range out.Features {
		c, err := decimal(f.Center, 6)
		if err != nil {
			return nil, err
		}
		sc, err := decimal(f.Scale, 6)
		if err != nil {
			return nil, err
		}
		s.Features[j].Center, s.Features[j].Scale = c, sc
		if f.Unresolved {
			unresolved++
			continue
		}
		if f.ScaleSE > ScaleNoiseWarning*f.Scale {
			out.Warnings = append(out.Warnings, fmt.Sprintf("feature %q: scale %.4g has noise %.2g (%.0f%% of it): the main job's clipping and noise balance suffer; more rows, a larger --share or narrower bounds help",
				f.Name, f.Scale, f.ScaleSE, 100*f.ScaleSE/f.Scale))
		}
	}
	if unresolved > 0 {
		names := ""
		for _, f := range out.Features {
			if f.Unresolved {
				if names != "" {
					names += ", "
				}
				names += strconv.Quote(f.Name)
			}
		}
		out.Warnings = append(out.Warnings, fmt.Sprintf("%d of %d features' spreads (%s) could not be resolved: at this budget and row count their declared bounds are too wide for the noise, and their scales are upper estimates; declare narrower bounds or public scales if you have them",
			unresolved, len(out.Features), names))
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("profile: %w", err)
	}
	return &s, nil
}

// readMarginals reads a marginals round's histograms.
func readMarginals(res *job.Result, windows [][2]float64) ([]Marginal, float64, error) {
	rel, err := res.Release.Release()
	if err != nil {
		return nil, 0, err
	}
	return ReadMarginals(rel, windows)
}
