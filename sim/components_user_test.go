package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

// Accuracy of an exact components job (issue 32): eigenvalues within 1e-4
// relative error, principal angles within 1e-3 rad of the plaintext PCA of
// the same rows.
const (
	componentsEigenTol = 1e-4
	componentsAngleTol = 1e-3 // radians
)

// checkComponentsUtility checks a components job's utility against the
// plaintext PCA of the same rows.
func checkComponentsUtility(t *testing.T, what string, u *Utility, k int) {
	t.Helper()
	if len(u.PrincipalAnglesDeg) != k || len(u.EigenvalueRelErrors) != k || u.CapturedVarianceRatio == nil {
		t.Fatalf("%s: utility %+v, want %d angles and eigenvalue errors and q/q0", what, u, k)
	}
	for i, a := range u.PrincipalAnglesDeg {
		if rad := a * math.Pi / 180; rad > componentsAngleTol {
			t.Errorf("%s: principal angle %d is %.3g rad, want at most %g", what, i+1, rad, componentsAngleTol)
		}
	}
	for i, e := range u.EigenvalueRelErrors {
		if e > componentsEigenTol {
			t.Errorf("%s: eigenvalue %d relative error %.3g, want at most %g", what, i+1, e, componentsEigenTol)
		}
	}
	if q := *u.CapturedVarianceRatio; q < 1-1e-6 {
		t.Errorf("%s: q/q0 %v", what, q)
	}
}

// TestComponentsExactWine: an exact components PCA job end to end through
// the daemons (3 members, any 2 compute; owners allowing exact
// components; no noise): the user's result holds the top k components,
// their covariance eigenvalues and n, nothing else, and they equal the
// plaintext PCA of the same rows within the accuracy.
func TestComponentsExactWine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	data, _ := datasets.CSV("wine")
	s, err := NewSimulator(ctx, Simulation{Data: data, Name: "wine", Label: "label", Owners: 5, CSPs: 3, Threshold: 2, Dir: t.TempDir(), Seed: 1,
		AllowExactComponents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const k = 3
	rep, err := s.Run(ctx, JobOptions{Analysis: job.PCA, K: k, NoNoise: true, Release: job.ReleaseComponents})
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Result
	if res.Released != job.ReleaseComponents || res.Output == nil || res.Components != nil || res.Release != nil || res.Quality != nil {
		t.Fatalf("result: released %q, output %v, statistics' components %v, release %v, quality %v",
			res.Released, res.Output != nil, res.Components != nil, res.Release != nil, res.Quality != nil)
	}
	if res.NoisyN != float64(s.rows.n()) {
		t.Errorf("n = %v, want the %d rows", res.NoisyN, s.rows.n())
	}
	doc, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.ParseResult(doc); err != nil {
		t.Fatalf("the result document does not validate: %v", err)
	}
	for _, banned := range []string{`"mean"`, `"all_eigenvalues"`, `"explained_variance_ratio"`, `"release"`, `"quality"`} {
		if bytes.Contains(doc, []byte(banned)) {
			t.Errorf("the components result holds %s", banned)
		}
	}
	checkComponentsUtility(t, "wine exact components", rep.Utility, k)
	t.Logf("wine exact components: angles %.3g deg, eigenvalue errors %.3g, timings %+v, bytes %+v",
		rep.Utility.PrincipalAnglesDeg, rep.Utility.EigenvalueRelErrors, rep.Timings, rep.Bytes)
}

// TestComponentsUtility: the simulator measures a components result (the
// top components and covariance eigenvalues, no mean) against the
// plaintext PCA as it does a statistics result: a components result made
// of the plaintext PCA itself has zero angles and eigenvalue errors, q/q0
// 1 and the central accuracy; the report prints it and says the total
// variance is not released.
func TestComponentsUtility(t *testing.T) {
	data, _ := datasets.CSV("wine")
	sch, err := schema.Infer(bytes.NewReader(data), "wine", "label")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := mapRows(sch, data)
	if err != nil {
		t.Fatal(err)
	}
	const k = 3
	central, _, err := job.Central(&job.Spec{Analysis: job.PCA, K: k, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}, sch, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	d := sch.D()
	top := &job.TopComponents{W: make([][]float64, d)}
	for i := range d {
		for j := range k {
			top.W[i] = append(top.W[i], -central.Components.W.At(i, j)) // the sign is free
		}
	}
	for _, v := range central.Components.Eigenvalues {
		top.Eigenvalues = append(top.Eigenvalues, v/central.NoisyN)
	}
	priv := &job.Result{JobID: central.JobID, Dataset: central.Dataset, SchemaHash: central.SchemaHash, Analysis: job.PCA, Features: central.Features,
		NoisyN: central.NoisyN, Privacy: job.Privacy{NoNoise: true}, HEParams: "test", Released: job.ReleaseComponents, Output: top}
	u, err := rows.utility(priv, central, 1)
	if err != nil {
		t.Fatal(err)
	}
	checkComponentsUtility(t, "the plaintext PCA as a components result", u, k)
	if u.Accuracy == nil || *u.Accuracy != *u.AccuracyCentral {
		t.Errorf("accuracy %v, want the central %v (nearest centroid does not depend on the centring)", deref(u.Accuracy), deref(u.AccuracyCentral))
	}
	var out strings.Builder
	(&Report{Setup: Setup{Analysis: job.PCA, Dataset: "wine"}, Result: priv, Utility: u}).WriteText(&out, true)
	for _, want := range []string{"components only", "covariance eigenvalues", "total variance is not released", "exact components", "component"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
