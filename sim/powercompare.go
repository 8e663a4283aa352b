package sim

import (
	"bytes"

	"context"
	"fmt"
	"gonum.org/v1/gonum/mat"
	"io"
)

// PowerComparison is a power-method job on a simulation's rows and, when
// asked, the statistics release (the d x d scatter, through the daemons) on
// the same rows, each against the central PCA of those rows.
type PowerComparison struct {
	Power         *PowerReport   `json:"power"`
	PowerAccuracy *PowerAccuracy `json:"power_accuracy"`
	// RitzAccuracy is the Rayleigh-Ritz components' (power.FinishRitz).
	RitzAccuracy *PowerAccuracy `json:"ritz_accuracy"`
	// Release is the statistics release's report and ReleaseAccuracy its
	// components against the same central PCA (nil when not compared).
	Release         *Report        `json:"release,omitempty"`
	ReleaseAccuracy *PowerAccuracy `json:"release_accuracy,omitempty"`
}

// RunPower runs a power-method job (k = o.K, p = k + oversample, T =
// rounds, o's budget) on the simulation's owners' rows, mapped by the
// simulation's schema exactly as the owners map them, through the
// protocol's steps in this process (PowerJob: a 2-of-3 committee with
// member 2 down); with release, the statistics release of the same job
// options through the daemons too. Separation uses the rows' classes.
func (s *Simulator) RunPower(ctx context.Context, o JobOptions, rounds, oversample int, release bool) (*PowerComparison, error) {
	sch := s.sch
	useClasses := len(sch.Classes) > 0
	rows := make([][][]int64, len(s.parts))
	pops := make([][]int, len(s.parts))
	for i, part := range s.parts {
		rd, err := sch.NewReader(bytes.NewReader(part), useClasses)
		if err != nil {
			return nil, err
		}
		for row, err := range rd.All() {
			if err != nil {
				return nil, fmt.Errorf("owner %d: %w", i, err)
			}
			rows[i] = append(rows[i], append([]int64(nil), row.Values...))
			pops[i] = append(pops[i], max(row.Class, 0))
		}
	}
	if !useClasses {
		pops = nil
	}
	pj := PowerJob{Rows: rows, D: sch.D(), Bits: sch.Bits, Bound: sch.Bound(), K: o.K, Oversample: oversample, Rounds: rounds,
		Epsilon: o.Epsilon, Delta: o.Delta, NoNoise: o.NoNoise, Plan: o.Plan, Tolerate: o.Tolerate,
		CSPs: 3, Threshold: 2, Down: []int{2}, Seed: fmt.Sprintf("simulate-%d", s.sim.Seed), Schema: sch}
	if pj.Delta == 0 {
		pj.Delta = 1e-6
	}
	out := &PowerComparison{}
	var err error
	if out.Power, err = pj.Run(); err != nil {
		return nil, fmt.Errorf("power-method job: %w", err)
	}
	ws := []*mat.Dense{out.Power.SVD.W, out.Power.Ritz.W}
	if release {
		if out.Release, err = s.Run(ctx, o); err != nil {
			return nil, fmt.Errorf("statistics release: %w", err)
		}
		ws = append(ws, out.Release.Result.Components.W)
	}
	accs, err := EvaluatePower(rows, pj.D, pj.Bits, ws, pj.K, pops, pj.Seed, 0)
	if err != nil {
		return nil, err
	}
	out.PowerAccuracy, out.RitzAccuracy = accs[0], accs[1]
	if release {
		out.ReleaseAccuracy = accs[2]
	}
	return out, nil
}

// WriteText prints the comparison.
func (c *PowerComparison) WriteText(w io.Writer) {
	j := c.Power
	fmt.Fprintf(w, "power-method job: d = %d, n = %d, %d owners, k = %d, p = %d, T = %d; committee %s\n", j.D, j.N, j.Owners, j.K, j.P, j.Rounds, j.Committee)
	if !j.NoiseOff {
		fmt.Fprintf(w, "  the whole job is (%.4g, %.3g)-DP, charged once; sigma per entry %.4g C^2\n", j.CostEpsilon, j.Delta, j.SigmaY)
	}
	var bytes int64
	for _, r := range j.RoundStats {
		bytes += r.Bytes
	}
	fmt.Fprintf(w, "  %.2f s end to end, %.2f MB per owner in all (%.2f MB per round after round 0), peak memory %.2f GB\n",
		j.Seconds, float64(bytes)/1e6, float64(j.RoundStats[len(j.RoundStats)-1].Bytes)/1e6, float64(j.PeakRSS)/1e9)
	acc := func(name string, a *PowerAccuracy) {
		fmt.Fprintf(w, "  %s: captured variance %.4f of the central top %d's, largest principal angle %.3g deg", name, a.CapturedRatio, j.K, a.Angles[0])
		if a.Separation > 0 {
			fmt.Fprintf(w, ", classes by nearest centroid on the top 2: %.4f (central %.4f)", a.Separation, a.CentralSeparation)
		}
		fmt.Fprintln(w)
	}
	acc("power method (svd)", c.PowerAccuracy)
	acc("power method (ritz, from the same release)", c.RitzAccuracy)
	if c.Release != nil {
		t := c.Release.Timings
		fmt.Fprintf(w, "statistics release (d x d, through the daemons): %.2f s submit to result, %.2f MB sent per owner\n",
			t.Total, float64(c.Release.Bytes["owner"].Sent)/float64(j.Owners)/1e6)
		acc("statistics release", c.ReleaseAccuracy)
	}
}
