package job

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

// capSpec is a one-owner job of the analysis with a row cap of capRows.
func capSpec(t *testing.T, sch *schema.Schema, analysis string, capRows int64) *Spec {
	t.Helper()
	s := &Spec{Version: Version, Dataset: sch.ID, SchemaHash: sch.HashHex(), Analysis: analysis,
		Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanCentral, Split: dp.DefaultSplitFor(analysis), MinOwners: 1,
		CommitteeN: 1, CommitteeThreshold: 1}
	switch analysis {
	case NormsJob:
		s.NormEdges = []fixedpoint.Decimal{fixedpoint.MustDecimal("0.3"), fixedpoint.MustDecimal("0.7")}
	case MarginalsJob:
		// Windows narrower than the values: the end buckets hold the tails.
		s.Buckets = 4
		for range sch.D() {
			s.Windows = append(s.Windows, Window{Lo: fixedpoint.MustDecimal("-0.5"), Hi: fixedpoint.MustDecimal("0.6")})
		}
	}
	if err := s.SetOwners(keyed("owner-000")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOwnerRows(capRows); err != nil {
		t.Fatal(err)
	}
	return s
}

// release reads CSV lines (after the header) as the owner does and returns
// the packed statistics.
func release(t *testing.T, s *Spec, sch *schema.Schema, header string, lines []string) []int64 {
	t.Helper()
	acc, _, err := ReadStatistics(s, sch, strings.NewReader(header+"\n"+strings.Join(lines, "\n")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	return acc.Pack()
}

// TestNeighboursAtTheCap: for PCA, DCA, LDA and the rounds of the profile
// (the moments, the per-feature histograms and the norms histogram), neighbouring sources at the owner's
// row cap (a row added before the cap, which pushes the last kept row out;
// at the cap, where it is kept; after the cap, where it is dropped), read as
// an owner reads them, change the release by no more than the sensitivity
// the job was calibrated with (sum over blocks of the change squared over
// the block's central variance, at most mu^2 of the calibration). The
// epsilon recomputed from the largest change measured, with the job's
// correction, is at most the epsilon the result prints. The largest change
// is above the add-one sensitivity: calibrating for adding one row alone
// would print an epsilon below the truth.
func TestNeighboursAtTheCap(t *testing.T) {
	full := `{"id":"cap","features":[{"name":"a","center":"0","scale":"1"},{"name":"b","center":"0","scale":"1"},{"name":"c","center":"0","scale":"1"}],
		"label":"y","classes":["p","q","r"],"clip_norm":"1","quant_bits":12}`
	box := `{"id":"cap","features":[{"name":"a","center":"0","scale":"1","min":"-1","max":"1"},{"name":"b","center":"0","scale":"1","min":"-1","max":"1"},{"name":"c","center":"0","scale":"1","min":"-1","max":"1"}],
		"label":"y","classes":["p","q","r"],"clip_norm":"1.7320508","quant_bits":12}`
	// Bounds beyond the box, for a moments job that clamps into it (the
	// profile's windows).
	wide := strings.ReplaceAll(box, `"min":"-1","max":"1"`, `"min":"-3","max":"2"`)
	const header = "a,b,c,y"
	// Pairs (x, r): x is the row added, r the last row kept before it comes:
	// orthogonal rows of other classes, opposite rows, rows symmetric about
	// a diagonal at several angles, box corners, rows in other buckets.
	var pairs [][2]string
	for _, beta := range []float64{-0.7, -0.5, -0.3, -0.1, 0.2} {
		pairs = append(pairs, [2]string{fmt.Sprintf("%.6f,%.6f,0,p", math.Cos(beta), math.Sin(beta)), fmt.Sprintf("%.6f,%.6f,0,p", math.Sin(beta), math.Cos(beta))})
	}
	pairs = append(pairs, [2]string{"1,0,0,p", "0,1,0,q"}, [2]string{"1,0,0,p", "-1,0,0,p"}, [2]string{"0,0,1,r", "0.6,0.8,0,p"},
		[2]string{"1,1,1,p", "-1,-1,-1,p"}, [2]string{"1,1,1,p", "0,0,0,p"}, [2]string{"1,-1,1,q", "1,1,-1,q"}, [2]string{"0.1,0,0,p", "0.9,0,0,q"})
	pairs = append(pairs, [2]string{"2,2,2,p", "-3,-3,-3,p"}, [2]string{"5,-5,1.5,p", "-1.5,1.5,-2,q"})
	base := []string{"0.2,0.1,-0.3,q", "-0.4,0.5,0.1,r", "0.3,0.3,0.3,p"}
	const capRows = 4
	for _, tc := range []struct {
		analysis, schema string
		clamp            bool
	}{{PCA, full, false}, {DCA, full, false}, {LDA, full, false}, {MomentsJob, box, false}, {MomentsJob, wide, true}, {MarginalsJob, box, false}, {NormsJob, full, false}} {
		name := tc.analysis
		if tc.clamp {
			name += " clamped"
		}
		t.Run(name, func(t *testing.T) {
			sch, err := schema.Parse([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			s := capSpec(t, sch, tc.analysis, capRows)
			s.ClampBox = tc.clamp
			cal, err := s.Calibration(sch)
			if err != nil {
				t.Fatal(err)
			}
			l, _ := s.Layout(sch)
			var variance, addOne [3]float64
			for _, b := range stats.Blocks {
				variance[b], _ = new(big.Float).SetInt(cal.Variance[b]).Float64()
				if l.Dims()[b] > 0 {
					addOne[b] = cal.Sensitivity[b] * cal.Sensitivity[b] / variance[b]
				}
			}
			measure := func(a, b []int64) float64 {
				m := 0.0
				for _, blk := range stats.Blocks {
					lo, hi := l.Range(blk)
					for i := lo; i < hi; i++ {
						d := float64(a[i] - b[i])
						m += d * d / variance[blk]
					}
				}
				return m
			}
			worst := 0.0
			for _, pr := range pairs {
				x, r := pr[0], pr[1]
				kept := append(append([]string{}, base...), r) // cap rows, r last
				after := append(append([]string{}, kept...), "0.5,0.5,0.5,q")
				before := release(t, s, sch, header, kept)
				// Added before the cap: r is pushed out.
				m1 := measure(release(t, s, sch, header, append([]string{x}, after...)), release(t, s, sch, header, after))
				// Added at the cap (the cap-th row): kept.
				m2 := measure(release(t, s, sch, header, append(append([]string{}, base...), x)), release(t, s, sch, header, base))
				// Added after the cap: dropped.
				m3 := measure(release(t, s, sch, header, append(append([]string{}, kept...), x)), before)
				if m3 != 0 {
					t.Errorf("%s after the cap changed the release by %g", x, m3)
				}
				for _, m := range []float64{m1, m2} {
					if m > cal.Mu*cal.Mu {
						t.Errorf("x %s, r %s: the release changes by %g, more than calibrated mu^2 %g", x, r, m, cal.Mu*cal.Mu)
					}
					worst = max(worst, m)
				}
			}
			pr, err := PrivacyReport(s, sch, []string{"owner-000"}, []string{"1"})
			if err != nil {
				t.Fatal(err)
			}
			// The epsilon of the largest change measured, with the job's
			// correction, against the printed one.
			measured := dp.Cost{Rho: dp.Float(worst / 2), Eta: cal.Cost.Eta, Tail: cal.Cost.Tail}.Epsilon(s.Delta)
			if measured > float64(pr.Epsilon) || pr.Epsilon > 1 {
				t.Errorf("epsilon from the largest change %v, printed %v (job 1)", measured, pr.Epsilon)
			}
			add := addOne[0] + addOne[1] + addOne[2]
			if worst <= add*1.3 {
				t.Errorf("largest change %g is not above the add-one sensitivity %g: the neighbours miss the cap's replacement", worst, add)
			}
			t.Logf("%s: largest change mu^2 %.4g, calibrated %.4g (add-one %.4g); epsilon from it %.4f, printed %.4f; an add-one calibration would print 1 for %.3f",
				tc.analysis, worst, cal.Mu*cal.Mu, add, measured, float64(pr.Epsilon), dp.GaussEpsilon(dp.GaussMu(1, s.Delta)*math.Sqrt(worst/add), s.Delta))
		})
	}
}
