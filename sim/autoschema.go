package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/profile"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/user"
)

// DefaultWiden is how far DeclareBounds widens each observed range on
// each side, as a fraction of its width.
const DefaultWiden = 0.25

// DeclareBounds returns the schema the owners of an auto-schema simulation
// serve: each feature's observed range widened by widen of its width on
// each side and rounded outward to two significant digits of the width,
// standing in for the bounds a domain expert declares in public (an age in
// [0, 120]). It is the only thing the simulation takes from the rows for
// free, and it is looser than the rows; centers, scales and C come from
// the profile (profile.BoundsSchema maps the bounds onto [-1, 1]).
func DeclareBounds(data []byte, id, label string, widen float64) (*schema.Schema, error) {
	return DeclareBoundsSides(data, id, label, widen, widen)
}

// DeclareBoundsSides is DeclareBounds with each observed range widened by
// below of its width under it and above of it over it: bounds that are not
// centred on the data, as clinical ranges seldom are.
func DeclareBoundsSides(data []byte, id, label string, below, above float64) (*schema.Schema, error) {
	inferred, err := schema.Infer(bytes.NewReader(data), id, label)
	if err != nil {
		return nil, err
	}
	x, err := rawRows(data, inferred)
	if err != nil {
		return nil, err
	}
	n, d := x.Dims()
	s := *inferred
	s.Features = append([]schema.Feature(nil), inferred.Features...)
	for j := range d {
		lo, hi := math.Inf(1), math.Inf(-1)
		for i := range n {
			lo, hi = math.Min(lo, x.At(i, j)), math.Max(hi, x.At(i, j))
		}
		w := hi - lo
		if w == 0 {
			w = math.Max(math.Abs(lo), 1)
		}
		unit := math.Pow(10, math.Floor(math.Log10(w))-1)
		minV := math.Floor((lo-below*w)/unit) * unit
		maxV := math.Ceil((hi+above*w)/unit) * unit
		mn, err := fixedpoint.ParseDecimal(strconv.FormatFloat(minV, 'g', 12, 64))
		if err != nil {
			return nil, err
		}
		mx, err := fixedpoint.ParseDecimal(strconv.FormatFloat(maxV, 'g', 12, 64))
		if err != nil {
			return nil, err
		}
		s.Features[j].Min, s.Features[j].Max = &mn, &mx
	}
	return profile.BoundsSchema(&s)
}

// RawRows returns the rows' feature values as read (data units, no map),
// for measurements.
func RawRows(data []byte, sch *schema.Schema) (*mat.Dense, error) { return rawRows(data, sch) }

// rawRows returns the rows' feature values as read (data units, no map).
func rawRows(data []byte, sch *schema.Schema) (*mat.Dense, error) {
	rows, err := schema.NewCSVRows(bytes.NewReader(data), schema.CSVOptions{})
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for i, h := range rows.Columns() {
		col[h] = i
	}
	var vals []float64
	for {
		rec, err := rows.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		for _, f := range sch.Features {
			c, ok := col[f.Name]
			if !ok {
				return nil, fmt.Errorf("column %q missing", f.Name)
			}
			v, err := fixedpoint.ParseFloat(rec[c])
			if err != nil {
				return nil, fmt.Errorf("line %d, column %q: %w", rows.Line(), f.Name, err)
			}
			vals = append(vals, v)
		}
	}
	if len(vals) == 0 {
		return nil, errors.New("no rows")
	}
	return mat.NewDense(len(vals)/sch.D(), sch.D(), vals), nil
}

// AutoOptions describe an auto-schema run: a profile, then the main job
// under the schema it chose, within one total budget.
type AutoOptions struct {
	JobOptions
	// Share, Method and Quantile are the profile's (zero: defaults).
	Share, Quantile float64
	Method          string
	// KeepScales takes the simulation's schema's centers and scales as
	// public (profile.Options.KeepScales): the profile chooses only C.
	KeepScales bool
	// NoStandardize runs the main PCA in the profile's units, as user run
	// does without --standardize (by default the main job standardises by
	// its release's own diagonal when the scales are the profile's).
	NoStandardize bool
}

// profileOptions returns the profile's options at the total budget.
func (o AutoOptions) profileOptions(delta float64) profile.Options {
	return profile.Options{Epsilon: o.Epsilon, Delta: delta, Share: o.Share, Method: o.Method, Quantile: o.Quantile, KeepScales: o.KeepScales}
}

// AutoReport is what an auto-schema run measured.
type AutoReport struct {
	Profile *user.ProfileResult `json:"profile"`
	Schema  *schema.Schema      `json:"schema"`
	Main    *Report             `json:"main"`
	// Total is the privacy spent by the jobs (two or three), composed as every
	// owner's ledger does (rho adds) and as Gaussian DP (mu^2 adds).
	Total TotalPrivacy `json:"total_privacy"`
	// Utility is measured against the standardised, unclipped rows.
	Utility StandardUtility `json:"utility"`
}

// Jobs returns how many jobs the run composed: the profile's rounds and
// the main job.
func (r *AutoReport) Jobs() int { return len(r.Profile.Rounds) + 1 }

// TotalPrivacy is the composition of a run's jobs: their costs composed
// (profile.Total: the owners' ledgers' account), and its epsilon at Delta.
type TotalPrivacy struct {
	Rho     dp.Float `json:"rho"`
	Mu      dp.Float `json:"mu"`
	Epsilon dp.Float `json:"epsilon"`
	Delta   float64  `json:"delta"`
	Cost    dp.Cost  `json:"cost"`
}

// StandardUtility measures PCA components against the standardised,
// unclipped rows: the pooled true mean and std are used here only, to
// measure, never by the system.
type StandardUtility struct {
	// CapturedVarianceRatio is q/q0: the variance of the standardised rows
	// captured by the components (mapped to standardised units), over the
	// best possible, the sum of the top-k eigenvalues.
	CapturedVarianceRatio float64 `json:"captured_variance_ratio"`
	// CorrelationRatio is the same for the top-k components of the
	// release's own correlation matrix (the release standardised by its own
	// noisy diagonal: post-processing, free), which do not depend on the
	// schema's scales.
	CorrelationRatio float64 `json:"correlation_captured_variance_ratio"`
	K                int     `json:"k"`
	// ClippedFraction is the fraction of the rows the job's schema clips.
	ClippedFraction float64 `json:"clipped_fraction"`
}

// RunAuto runs the profile and the main job on the simulation, whose
// schema must declare bounds (DeclareBounds), unless o.KeepScales.
func (s *Simulator) RunAuto(ctx context.Context, o AutoOptions) (*AutoReport, error) {
	if o.Analysis == "" {
		o.Analysis = job.PCA
	}
	delta := o.Delta
	if delta == 0 {
		delta = job.DefaultDelta
	}
	prof, err := s.user.Profile(ctx, user.ProfileRequest{Declared: s.sch, Options: o.profileOptions(delta), Plan: o.Plan, Tolerate: o.Tolerate,
		MainAnalysis: o.Analysis, MainSplit: o.Split,
		Owners: s.owners, MinOwners: o.MinOwners, Deadline: time.Now().Add(time.Hour), MaxOwnerRows: s.ownerRows}, o.Progress)
	if err != nil {
		return nil, err
	}
	main := o.JobOptions
	main.Schema, main.Epsilon, main.Delta = prof.Schema, prof.Budget.Main, delta
	// The profile's scales are noisy: the main PCA standardises by the
	// release's own diagonal (free), so they matter only for the clipping
	// and the balance of the noise. Public scales are taken as they are.
	main.Standardize = o.Analysis == job.PCA && !o.KeepScales && !o.NoStandardize
	rep, err := s.Run(ctx, main)
	if err != nil {
		return nil, err
	}
	return autoReport(s.sim.Data, prof, rep, delta)
}

// autoReport composes a run's jobs and measures its main result.
func autoReport(data []byte, prof *user.ProfileResult, rep *Report, delta float64) (*AutoReport, error) {
	out := &AutoReport{Profile: prof, Schema: prof.Schema, Main: rep}
	var costs []dp.Cost
	for _, res := range append(slices.Clone(prof.Rounds), rep.Result) {
		if res.Privacy.Cost == nil {
			return nil, fmt.Errorf("job %s reports no cost", res.JobID)
		}
		costs = append(costs, *res.Privacy.Cost)
	}
	total, eps := profile.Total(delta, costs...)
	out.Total = TotalPrivacy{Rho: total.Rho, Mu: dp.Float(total.Mu()), Epsilon: dp.Float(eps), Delta: delta, Cost: total}
	var err error
	if out.Utility, err = standardUtility(data, rep.Result, prof.Schema); err != nil {
		return nil, err
	}
	return out, nil
}

// Standardized returns the covariance of the rows standardised with their
// pooled mean and population std (a constant feature divided by 1), and
// the stds: what the utility is measured against, never used by the
// system.
func Standardized(x *mat.Dense) (*mat.SymDense, []float64) {
	n, d := x.Dims()
	std := make([]float64, d)
	z := mat.NewDense(n, d, nil)
	for j := range d {
		col := mat.Col(nil, j, x)
		mean, sd := stat.PopMeanStdDev(col, nil)
		if sd == 0 {
			sd = 1
		}
		std[j] = sd
		for i, v := range col {
			z.Set(i, j, (v-mean)/sd)
		}
	}
	cov := mat.NewSymDense(d, nil)
	cov.SymOuterK(1/float64(n), z.T())
	return cov, std
}

// StandardUtility measures a PCA result made under sch against the
// simulation's rows standardised with their pooled mean and population
// std, unclipped.
func (s *Simulator) StandardUtility(res *job.Result, sch *schema.Schema) (StandardUtility, error) {
	return standardUtility(s.sim.Data, res, sch)
}

func standardUtility(data []byte, res *job.Result, sch *schema.Schema) (StandardUtility, error) {
	var u StandardUtility
	if res.Components == nil {
		return u, fmt.Errorf("utility: the result has no components (analysis %s)", res.Analysis)
	}
	x, err := rawRows(data, sch)
	if err != nil {
		return u, err
	}
	_, d := x.Dims()
	cov, std := Standardized(x)
	// A component w in sch's units is the direction (w_j std_j / scale_j)
	// in standardised units.
	_, k := res.Components.W.Dims()
	w := mat.NewDense(d, k, nil)
	for j, f := range sch.Features {
		sc, _ := f.Scale.Rat().Float64()
		for i := range k {
			w.Set(j, i, res.Components.W.At(j, i)*std[j]/sc)
		}
	}
	q := captured(cov, orthonormal(w))
	if q == nil {
		return u, fmt.Errorf("utility: eigendecomposition failed")
	}
	u.CapturedVarianceRatio, u.K = *q, min(k, 5)
	// The rows sch clips, read through its own row map.
	rd, err := sch.NewReader(bytes.NewReader(data), false)
	if err != nil {
		return u, err
	}
	for _, err := range rd.All() {
		if err != nil {
			return u, err
		}
	}
	rows, clipped := rd.Rows()
	u.ClippedFraction = float64(clipped) / float64(rows)
	return u, nil
}
