package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"

	"github.com/fedpca/fedpca/protocol/job"
)

// WriteText writes a report for a human: the setup, the result, the privacy
// accounting with its collusion table, the utility against the non-private
// result and the time of each phase.
func (r *Report) WriteText(w io.Writer, components bool) {
	s := r.Setup
	fmt.Fprintf(w, "%s on %s: %d rows x %d features, %d classes, %d owners (%s split), committee %d-of-%d, %s transport\n",
		strings.ToUpper(s.Analysis), s.Dataset, s.Rows, s.D, s.Classes, s.Owners, s.Split, s.Threshold, s.CSPs, s.Transport)
	res := r.Result
	if t := res.Output; t != nil {
		fmt.Fprintf(w, "\n  components only: the user learns the top %d components, their eigenvalues and n (%.1f), nothing else\n", len(t.Eigenvalues), res.NoisyN)
		if c := res.Privacy.Computed; c != "" {
			fmt.Fprintf(w, "  computed %s\n", c)
		}
		fmt.Fprintf(w, "  %-26s %s\n", job.EigenvaluesName(res.Analysis)+":", floats(t.Eigenvalues, "%.4g"))
		if res.Analysis == job.PCA {
			fmt.Fprintln(w, "  (no explained-variance ratio: the total variance is not released)")
		}
		if components {
			_, k := t.Dims()
			r.writeComponents(w, k, func(i, j int) float64 { return t.W[i][j] })
		}
	}
	if c := res.Components; c != nil {
		fmt.Fprintf(w, "\n  eigenvalues:               %s\n", floats(c.Eigenvalues, "%.4g"))
		if c.ExplainedVarianceRatio != nil {
			cum := 0.0
			var cums []float64
			for _, v := range c.ExplainedVarianceRatio {
				cum += v
				cums = append(cums, cum)
			}
			fmt.Fprintf(w, "  explained variance ratio:  %s (%s)\n", floats(c.ExplainedVarianceRatio, "%.3f"), job.VarianceOf(res))
			fmt.Fprintf(w, "  cumulative:                %s\n", floats(cums, "%.3f"))
		}
		if c.Analysis != job.PCA {
			fmt.Fprintf(w, "  regulariser rho:           %.4g\n", c.Rho)
		}
		if components {
			_, k := c.Dims()
			r.writeComponents(w, k, c.W.At)
		}
	}
	fmt.Fprintln(w)
	pr := res.Privacy
	if pr.NoNoise && res.Output != nil {
		fmt.Fprintln(w, "  privacy: exact components, no DP noise (owners that allow exact components): nothing else left the committee, but the components are not differentially private")
	} else if pr.NoNoise {
		fmt.Fprintln(w, "  privacy: none (noise off: for tests and simulations only)")
	} else {
		fmt.Fprintf(w, "  privacy: (epsilon %.4g, delta %.3g)-DP (exact Gaussian profile, mu %.4g; %.4g-zCDP), noise plan %q tolerating %d colluders, split R/v/n %.3g/%.3g/%.3g\n",
			float64(pr.Epsilon), pr.Delta, float64(pr.Mu), float64(pr.Rho), pr.Plan, pr.Tolerate, pr.Split.R, pr.Split.V, pr.Split.N)
		if pr.Neighbours != "" {
			fmt.Fprintf(w, "  neighbours: %s (the cap's replacements cost a factor %.3g on mu^2)\n", pr.Neighbours, pr.SensitivityFactor)
		}
		fmt.Fprintf(w, "  noise std (data units, all shares): R %.4g, v %.4g, n %.4g; %d noise shares; discrete-noise correction +%.2g in epsilon, sum-of-shares tau (R) %s\n",
			float64(pr.SigmaTotal.R), float64(pr.SigmaTotal.V), float64(pr.SigmaTotal.N), len(pr.Shares), float64(pr.EpsilonCorrection), tau(float64(pr.Log10Tau.R)))
		if q := res.Quality; q != nil {
			fmt.Fprintf(w, "  noise in the result: noisy n %.1f ± %.3g, mean ± %.3g per entry, scatter entries ± %.3g (spectral norm ~%.3g)",
				res.NoisyN, q.NoisyNStd, q.MeanStd, q.EntryStd, q.NoiseSpectralNorm)
			if q.CovarianceNoiseNorm > 0 {
				fmt.Fprintf(w, ", on the covariance spectral norm ~%.3g", q.CovarianceNoiseNorm)
			}
			if q.EigenvalueStd > 0 {
				fmt.Fprintf(w, ", eigenvalues ± %.3g", q.EigenvalueStd)
			}
			fmt.Fprintln(w)
			for _, warn := range q.Warnings {
				fmt.Fprintf(w, "  warning: %s\n", warn)
			}
			for _, n := range q.Notes {
				fmt.Fprintf(w, "  note: %s\n", n)
			}
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    user colluding with\tparties\tepsilon\trho")
		for _, c := range pr.Collusion {
			fmt.Fprintf(tw, "    %s\t%d\t%s\t%s\n", c.With, c.Parties, num(float64(c.Epsilon)), num(float64(c.Rho)))
		}
		tw.Flush()
	}
	if u := r.Utility; u != nil {
		fmt.Fprintln(w, "\n  utility against the non-private result on the same rows:")
		if len(u.PrincipalAnglesDeg) > 0 {
			fmt.Fprintf(w, "    principal angles (deg):       %s\n", floats(u.PrincipalAnglesDeg, "%.3g"))
		}
		if u.CapturedVarianceRatio != nil {
			fmt.Fprintf(w, "    captured variance q/q0:       %.4f\n", *u.CapturedVarianceRatio)
		}
		if len(u.EigenvalueRelErrors) > 0 {
			fmt.Fprintf(w, "    eigenvalue relative errors:   %s\n", floats(u.EigenvalueRelErrors, "%.3g"))
		}
		if u.Accuracy != nil {
			fmt.Fprintf(w, "    accuracy (%s): private %.3f, non-private %.3f, all features %.3f\n", u.Classifier, *u.Accuracy, *u.AccuracyCentral, *u.AccuracyAll)
		}
	}
	t := r.Timings
	switchName := "key switch (committee, unblinding)"
	if res.Output != nil {
		switchName = "committee solve (conversion, eigensolver, sealed outputs)"
	}
	fmt.Fprintln(w, "\n  time (seconds):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range []struct {
		name string
		v    float64
	}{
		{"owner share (median per owner; read, noise, encrypt)", t.OwnerShare},
		{"proxy aggregate (validate and fold uploads)", t.Aggregate},
		{"upload window (job created -> sealed)", t.UploadWindow},
		{"seal (proxy noise, masks)", t.Seal},
		{switchName, t.KeySwitch},
		{"user fetch", t.Fetch},
		{"user decrypt + analysis", t.UserAnalysis},
		{"total (submitted -> result)", t.Total},
		{"central non-private, same rows", t.Central},
	} {
		fmt.Fprintf(tw, "    %s\t%.4f\n", row.name, row.v)
	}
	tw.Flush()
	fmt.Fprintln(w, "\n  bytes (payload, sent / received):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, role := range []string{"owner", "proxy", "csp", "user"} {
		b := r.Bytes[role]
		fmt.Fprintf(tw, "    %s\t%s\t/ %s\n", role, size(b.Sent), size(b.Received))
	}
	tw.Flush()
}

// writeComponents prints the k components at(i, j) (columns), a row per
// feature.
func (r *Report) writeComponents(w io.Writer, k int, at func(i, j int) float64) {
	fmt.Fprintln(w, "\n  components (columns; rows are features):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "    feature\t")
	for j := range k {
		fmt.Fprintf(tw, "%d\t", j+1)
	}
	fmt.Fprintln(tw)
	for i, f := range r.Result.Features {
		fmt.Fprintf(tw, "    %s\t", f)
		for j := range k {
			fmt.Fprintf(tw, "%+.3f\t", at(i, j))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

func floats(v []float64, f string) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf(f, x)
	}
	return strings.Join(parts, "  ")
}

func num(x float64) string {
	if math.IsInf(x, 1) {
		return "inf (no noise left)"
	}
	return fmt.Sprintf("%.4g", x)
}

func size(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}

// tau shows the distributed discrete Gaussian correction term from its
// log10: a plain number when it is representable, else an upper bound.
func tau(log10 float64) string {
	if log10 < -300 {
		return "< 1e-300 (negligible)"
	}
	return fmt.Sprintf("%.3g", math.Pow(10, log10))
}
