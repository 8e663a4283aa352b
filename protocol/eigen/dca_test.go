package eigen

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/stats"
)

// TestDCAGolden runs the DCA program (two of three members, from the
// encrypted class statistics of the quantised rows) and holds its
// eigenvalues to scikit-learn's generalised eigenvalues of the same
// problem (reference.json, rho = 1e-3 trace(S_T) / d) within 1e-4 where
// they are at least 1e-3 (quantisation moves smaller ones more), on the
// datasets named by the short list, every labelled one without -short.
func TestDCAGolden(t *testing.T) {
	dcaGolden(t, dealerBackend)
}

// TestDCAGoldenReplicated is TestDCAGolden on the replicated backend.
func TestDCAGoldenReplicated(t *testing.T) {
	dcaGolden(t, replicatedBackend)
}

func dcaGolden(t *testing.T, b backendCase) {
	if raceEnabled {
		t.Skip("slow under the race detector")
	}
	names := []string{"wine", "iris"}
	if !testing.Short() {
		names = datasets.Names()
	}
	const g = 16
	for _, name := range names {
		ref, err := datasets.LoadReference(name)
		if err != nil {
			t.Fatal(err)
		}
		rows, d, labels, classes := quantisedLabelled(t, name, g)
		k := min(classes-1, d)
		if classes < 2 || len(ref.DCAEigenvalues) < k {
			continue
		}
		l, err := stats.NewLayout(d, classes)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := encryptedClassShares(t, l, rows, labels, g)
		e := b.engine(t)
		x = b.shares(t, x)
		job := DCAJob{Layout: l, Bits: g, Clip: 1, K: k, Solver: DefaultShared}
		start := time.Now()
		out, err := job.Run(e, x)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		col := e.Reveal(out)
		worst := 0.0
		for i := range k {
			got, want := col.V[i].Signed(e.P.F), ref.DCAEigenvalues[i]
			if want >= 1e-3 {
				worst = math.Max(worst, math.Abs(got-want)/want)
			}
		}
		fmt.Printf("| %s | %s | %d | %d | %d | %.1e | %d | %.0f | %.2f |\n", b.name, name, d, classes, k, worst, e.Cost.Rounds, float64(e.Cost.BytesPerParty)/1e6, took.Seconds())
		if testing.Verbose() {
			for i := range k {
				t.Logf("%s eigenvalue %d: %.8f, reference %.8f", name, i, col.V[i].Signed(e.P.F), ref.DCAEigenvalues[i])
			}
		}
		bar := 1e-4
		if name == "shuttle" {
			// Constant features and classes of a few rows among 58,000:
			// (S_T + rho I) has a condition number near 1e6, and the
			// whitening's fixed point leaves 1.6e-4 on its third eigenvalue
			// (0.0137); docs/BENCHMARKS.md says so.
			bar = 2e-4
		}
		if worst > bar {
			t.Errorf("%s: DCA eigenvalues within %.2e of scikit-learn (bar %g)", name, worst, bar)
		}
		for i := range k {
			if ref.DCAEigenvalues[i] < 1e-3 {
				continue // below the block iteration's resolution: a zero vector
			}
			norm := 0.0
			for r := range d {
				v := col.V[k+r*k+i].Signed(e.P.F)
				norm += v * v
			}
			if math.Abs(norm-1) > 1e-6 {
				t.Errorf("%s: component %d has norm^2 %g", name, i, norm)
			}
		}
	}
}
