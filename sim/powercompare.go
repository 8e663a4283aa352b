package sim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/power"
)

// PowerComparison is a power-method job on a simulation's rows, through
// the daemons, and, when asked, the statistics release (the d x d scatter)
// on the same rows, each against the central PCA of those rows.
type PowerComparison struct {
	Power         *PowerReport   `json:"power"`
	PowerAccuracy *PowerAccuracy `json:"power_accuracy"`
	// Result is the power job's result document, as the user writes it.
	Result *job.Result `json:"-"`
	// Release is the statistics release's report and ReleaseAccuracy its
	// components against the same central PCA (nil when not compared).
	Release         *Report        `json:"release,omitempty"`
	ReleaseAccuracy *PowerAccuracy `json:"release_accuracy,omitempty"`
	// StartAccuracy is that of the public start's own top k components,
	// which use no private data (nil without PowerOptions.Start).
	StartAccuracy *PowerAccuracy `json:"start_accuracy,omitempty"`
}

// powerRows returns the owners' rows as they map them, each row's
// population (its class, or Simulation.Populations; nil without either) and
// their number.
func (s *Simulator) powerRows() (rows [][][]int64, pops [][]int, n int, err error) {
	if s.sourceRows != nil {
		for _, r := range s.sourceRows {
			n += len(r)
		}
		return s.sourceRows, s.sim.Populations, n, nil
	}
	sch := s.sch
	useClasses := len(sch.Classes) > 0
	rows = make([][][]int64, len(s.parts))
	pops = make([][]int, len(s.parts))
	for i, part := range s.parts {
		rd, err := sch.NewReader(bytes.NewReader(part), useClasses)
		if err != nil {
			return nil, nil, 0, err
		}
		for row, err := range rd.All() {
			if err != nil {
				return nil, nil, 0, fmt.Errorf("owner %d: %w", i, err)
			}
			rows[i] = append(rows[i], append([]int64(nil), row.Values...))
			pops[i] = append(pops[i], max(row.Class, 0))
			n++
		}
	}
	if !useClasses {
		pops = nil
	}
	return rows, pops, n, nil
}

// PowerOptions shape a power-method job run by the simulator.
type PowerOptions struct {
	// Rounds is T, Oversample the columns beyond k.
	Rounds, Oversample int
	// Down are the committee members (0 for csp-1) crashed before the job,
	// as kill -9 would: the committee switches every round without them.
	Down []int
	// Compare runs the statistics release of the same job options too.
	Compare bool
	// CentralIters caps the central baseline's iterations (0: 200).
	CentralIters int
	// Start, a public d x p matrix (a reference panel's top components),
	// starts the job instead of its seed (user.Request.PowerStart; the
	// components are then the Ritz vectors in the last matrix's span), and
	// the comparison measures the start's own top k too.
	Start *mat.Dense
}

// RunPower runs a power-method job (k = o.K, p = k + Oversample, T =
// Rounds, o's budget) through the daemons: the user creates the parent
// job and opens each round (user.Client.RunPower), the owners compute each
// round's statistic from their sources, the proxy seals and the committee
// (without the members in Down) switches each round. The report holds the
// per-round timings the proxy measured and the bytes the owners sent; the
// components are evaluated against the central PCA of the owners' rows
// mapped by the schema (separation by the rows' classes).
func (s *Simulator) RunPower(ctx context.Context, o JobOptions, po PowerOptions) (*PowerComparison, error) {
	sch := s.sch
	rows, pops, n, err := s.powerRows()
	if err != nil {
		return nil, err
	}
	for _, i := range po.Down {
		if err := s.cl.CrashCSP(i); err != nil {
			return nil, fmt.Errorf("crash csp/%s: %w", CSPID(i), err)
		}
	}
	req := userRequest(s, o)
	seed := fmt.Sprintf("simulate-%d", s.sim.Seed)
	req.Power = &job.PowerSpec{Oversample: po.Oversample, Rounds: po.Rounds, Seed: seed, RoundSeconds: 3600}
	req.PowerStart = po.Start
	spec, err := s.user.Spec(ctx, req)
	if err != nil {
		return nil, err
	}
	pr, err := spec.PowerParams(sch)
	if err != nil {
		return nil, err
	}
	cal, err := spec.PowerCalibration(sch)
	if err != nil {
		return nil, err
	}
	before := s.traffic()
	resetPeakRSS()
	start := time.Now()
	rep := &PowerReport{D: pr.D, N: n, Owners: len(s.owners), K: pr.K, P: pr.P, Rounds: pr.Rounds, Bits: pr.Bits, QBits: pr.QBits, Bound: pr.Bound,
		Epsilon: spec.Epsilon, Delta: spec.Delta, NoNoise: spec.NoNoise, Plan: spec.NoisePlan,
		Committee: fmt.Sprintf("%d of %d, down %v", spec.CommitteeThreshold, spec.CommitteeN, downNames(po.Down)),
		Cost:      cal.Cost, Factor: cal.Factor, NoiseOff: cal.NoiseOff(), Parent: spec.ID(), Finish: "svd"}
	if !cal.NoiseOff() {
		c2 := math.Ldexp(float64(pr.Bound), -int(pr.Bits))
		rep.SigmaY, rep.SigmaV = cal.SigmaY()/(c2*c2), cal.SigmaV()/c2
		rep.CostEpsilon = cal.Cost.Epsilon(spec.Delta)
	}
	last := map[int]*fedpcav1.JobStatus{}
	res, err := s.user.RunPower(ctx, spec, sch, po.Start, func(round int, st *fedpcav1.JobStatus) {
		last[round] = st
		if o.Progress != nil {
			o.Progress(st)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("power-method job: %w", err)
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.PeakRSS = peakRSS()
	after := s.traffic()
	sent := float64(after["owner"].Sent-before["owner"].Sent) / float64(len(s.owners))
	for r := 0; r <= pr.Rounds; r++ {
		values := pr.Len()
		if r == 0 {
			values = pr.Round0Len()
		}
		rs := PowerRound{Round: r, Ciphertexts: s.cl.Params().Chunks(values)}
		if st := last[r]; st != nil {
			t := st.GetTimings()
			rs.Proxy, rs.Members = t.GetSealSeconds(), t.GetKeySwitchSeconds()
			rs.Total = t.GetUploadWindowSeconds() + t.GetSealSeconds() + t.GetKeySwitchSeconds()
		}
		rep.RoundStats = append(rep.RoundStats, rs)
	}
	// The bytes the owners sent, shared out over the rounds by their
	// ciphertexts.
	var cts int
	for _, r := range rep.RoundStats {
		cts += r.Ciphertexts
	}
	for i := range rep.RoundStats {
		rep.RoundStats[i].Bytes = int64(sent * float64(rep.RoundStats[i].Ciphertexts) / float64(cts))
	}
	t := res.Output
	w := mat.NewDense(pr.D, pr.K, nil)
	for i, row := range t.W {
		w.SetRow(i, row)
	}
	rep.Result = power.Components{W: w, Values: t.Eigenvalues}
	rep.Values, rep.Shrink, rep.Finish = t.Eigenvalues, res.Power.Shrink, res.Power.Finish
	if rep.Finish == "ritz" {
		rep.Ritz = rep.Result
	} else {
		rep.SVD = rep.Result
	}
	out := &PowerComparison{Power: rep, Result: res}
	ws := []*mat.Dense{w}
	if po.Start != nil {
		ws = append(ws, mat.DenseCopyOf(po.Start.Slice(0, pr.D, 0, pr.K)))
	}
	if po.Compare {
		if out.Release, err = s.Run(ctx, o); err != nil {
			return nil, fmt.Errorf("statistics release: %w", err)
		}
		ws = append(ws, out.Release.Result.Components.W)
	}
	accs, err := EvaluatePower(rows, pr.D, pr.Bits, ws, pr.K, pops, seed, po.CentralIters)
	if err != nil {
		return nil, err
	}
	out.PowerAccuracy, accs = accs[0], accs[1:]
	if po.Start != nil {
		out.StartAccuracy, accs = accs[0], accs[1:]
	}
	if po.Compare {
		out.ReleaseAccuracy = accs[0]
	}
	return out, nil
}

// WriteText prints the comparison.
func (c *PowerComparison) WriteText(w io.Writer) {
	j := c.Power
	fmt.Fprintf(w, "power-method job through the daemons: d = %d, n = %d, %d owners, k = %d, p = %d, T = %d, h = %d bits; committee %s\n",
		j.D, j.N, j.Owners, j.K, j.P, j.Rounds, j.QBits, j.Committee)
	if !j.NoiseOff {
		fmt.Fprintf(w, "  the whole job is (%.4g, %.3g)-DP, charged once by every owner's ledger; sigma per entry %.4g C^2\n", j.CostEpsilon, j.Delta, j.SigmaY)
	}
	var bytes int64
	for _, r := range j.RoundStats {
		bytes += r.Bytes
	}
	fmt.Fprintf(w, "  %.2f s end to end, %.2f MB sent per owner in all (%.2f MB in a round after round 0)\n",
		j.Seconds, float64(bytes)/1e6, float64(j.RoundStats[len(j.RoundStats)-1].Bytes)/1e6)
	fmt.Fprintf(w, "  round  cts/owner  upload window s  seal s  key switch s\n")
	for _, r := range j.RoundStats {
		fmt.Fprintf(w, "  %5d  %9d  %15.2f  %6.2f  %12.2f\n", r.Round, r.Ciphertexts, r.Total-r.Proxy-r.Members, r.Proxy, r.Members)
	}
	acc := func(name string, a *PowerAccuracy) {
		fmt.Fprintf(w, "  %s: captured variance %.4f of the central top %d's, largest principal angle %.3g deg", name, a.CapturedRatio, j.K, a.Angles[0])
		if a.Separation > 0 {
			fmt.Fprintf(w, ", classes by nearest centroid on the top 2: %.4f (central %.4f)", a.Separation, a.CentralSeparation)
		}
		fmt.Fprintln(w)
	}
	acc("power method ("+j.Finish+")", c.PowerAccuracy)
	if c.StartAccuracy != nil {
		acc("the public start's own top k (no private data)", c.StartAccuracy)
	}
	if c.Release != nil {
		t := c.Release.Timings
		fmt.Fprintf(w, "statistics release (d x d, through the daemons): %.2f s submit to result, %.2f MB sent per owner\n",
			t.Total, float64(c.Release.Bytes["owner"].Sent)/float64(j.Owners)/1e6)
		acc("statistics release", c.ReleaseAccuracy)
	}
}

// downNames names the members crashed.
func downNames(down []int) []string {
	names := []string{}
	for _, i := range down {
		names = append(names, "csp/"+CSPID(i))
	}
	return names
}
