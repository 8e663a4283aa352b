package sim

import (
	"context"
	"testing"
	"time"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
)

func TestSimulatorWine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	data, _ := datasets.CSV("wine")
	s, err := NewSimulator(ctx, Simulation{Data: data, Name: "wine", Label: "label", Owners: 5, CSPs: 3, Threshold: 2, Dir: t.TempDir(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref, _ := datasets.LoadReference("wine")
	for _, o := range []JobOptions{
		{Analysis: job.PCA, K: 5, NoNoise: true},
		{Analysis: job.DCA, NoNoise: true},
		{Analysis: job.PCA, K: 5, Epsilon: 1, Plan: dp.PlanServers},
		{Analysis: job.DCA, Epsilon: 1, Plan: dp.PlanServers},
	} {
		rep, err := s.Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		u := rep.Utility
		t.Logf("%s eps=%v: timings %+v bytes %+v angles %.3g q/q0 %v acc %v/%v/%v", o.Analysis, o.Epsilon, rep.Timings, rep.Bytes, u.PrincipalAnglesDeg,
			deref(u.CapturedVarianceRatio), deref(u.Accuracy), deref(u.AccuracyCentral), deref(u.AccuracyAll))
		if o.NoNoise {
			// Noise off: identical to the central result.
			for _, a := range u.PrincipalAnglesDeg {
				if a > 1e-4 {
					t.Errorf("%s noise off: principal angle %g deg", o.Analysis, a)
				}
			}
			if o.Analysis == job.PCA {
				checkEigen(t, "pca", rep.Result.Components.AllEigenvalues, ref.PCAEigenvalues, 1e-4)
				if *u.CapturedVarianceRatio < 1-1e-9 {
					t.Errorf("q/q0 %v", *u.CapturedVarianceRatio)
				}
			}
		}
		if rep.Bytes["owner"].Sent < 5*393000 || rep.Bytes["csp"].Received == 0 || rep.Timings.Total <= 0 || rep.Timings.OwnerShare <= 0 {
			t.Errorf("measurements %+v %+v", rep.Bytes, rep.Timings)
		}
	}
}

func deref(p *float64) float64 {
	if p == nil {
		return -1
	}
	return *p
}
