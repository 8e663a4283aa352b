package sim

import (
	"bytes"
	"math"
	"strings"
	"testing"

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
