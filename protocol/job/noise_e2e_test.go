package job

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/stats"
)

// TestEndToEndWithNoise runs the protocol with DP noise for every plan: the
// noise actually in the release has the planned variance (so every party
// added its share), and the result carries epsilon, delta, rho and the
// collusion table, and survives a JSON round trip.
func TestEndToEndWithNoise(t *testing.T) {
	p := heParams(t)
	c := he.Committee{N: 3, Threshold: 2}
	members, cpk := ceremony(t, p, c)
	user := he.GenerateKeyPair(p)
	ds := loadDataset(t, "wdbc", 16)
	parts := ds.split(5, "iid", 1)
	for _, tc := range []struct {
		plan     string
		tolerate int
		uploaded int
		analysis string
	}{
		{dp.PlanCentral, 0, 5, PCA},
		{dp.PlanServers, 0, 5, PCA},
		{dp.PlanServers, 1, 5, DCA},
		{dp.PlanOwners, 0, 4, PCA}, // one owner never uploads: the proxy tops up
		{dp.PlanAll, 2, 4, DCA},
	} {
		t.Run(fmt.Sprintf("%s_t%d_%s", tc.plan, tc.tolerate, tc.analysis), func(t *testing.T) {
			spec := newSpec(ds.schema, p, tc.analysis, 5, c, cpk, user, false)
			spec.NoisePlan, spec.Tolerate, spec.MinOwners, spec.K = tc.plan, tc.tolerate, 4, 3
			rc := runConfig{spec: spec, sch: ds.schema, ownerCSVs: parts[:tc.uploaded], committee: c, members: members, cpk: cpk, active: []he.Point{2, 3}}
			res, got, plain := runProtocol(t, p, rc, user)

			// The noise in the R block has the planned total variance.
			l, _ := spec.Layout(ds.schema)
			lo, hi := l.Range(stats.BlockR)
			var s2 float64
			for i := lo; i < hi; i++ {
				d := float64(got[i] - plain[i])
				s2 += d * d
			}
			emp := s2 / float64(hi-lo)
			cal, _ := spec.Calibration(ds.schema)
			want := new(big.Rat)
			for _, sh := range res.Privacy.Shares {
				w, _ := new(big.Rat).SetString(sh.Weight)
				want.Add(want, w)
			}
			want.Mul(want, new(big.Rat).SetInt(cal.Variance[stats.BlockR]))
			wf, _ := want.Float64()
			tol := 5 * math.Sqrt(2/float64(hi-lo))
			if math.Abs(emp/wf-1) > tol {
				t.Errorf("R-block noise variance %.4g, planned %.4g (tolerance %.0f%%)", emp, wf, 100*tol)
			}

			pr := res.Privacy
			if pr.NoNoise || pr.Delta != 1e-6 || pr.Plan != tc.plan || pr.Tolerate != tc.tolerate {
				t.Errorf("privacy header %+v", pr)
			}
			if pr.Epsilon > 1+1e-9 || pr.Epsilon < 0.99 || !(pr.Rho > 0) {
				t.Errorf("promised epsilon %v rho %v, want epsilon 1", pr.Epsilon, pr.Rho)
			}
			if len(pr.Collusion) != 5 || pr.Collusion[4].Epsilon > pr.Epsilon {
				t.Errorf("collusion table %+v", pr.Collusion)
			}
			if res.Components == nil || len(res.Components.Eigenvalues) == 0 {
				t.Fatal("no components")
			}
			b, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			var back Result
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			b2, _ := json.Marshal(&back)
			if string(b) != string(b2) {
				t.Error("result JSON does not round-trip")
			}
			// The components' fields sit at the top of the document
			// (PROTOCOL.md section 7), next to the privacy accounting.
			var doc map[string]json.RawMessage
			_ = json.Unmarshal(b, &doc)
			var priv map[string]json.RawMessage
			_ = json.Unmarshal(doc["privacy"], &priv)
			keys := []string{"job_id", "analysis", "features", "mean", "components", "eigenvalues", "all_eigenvalues", "privacy", "release"}
			if res.Analysis == PCA {
				keys = append(keys, "explained_variance_ratio")
			}
			for _, key := range keys {
				if doc[key] == nil {
					t.Errorf("result JSON has no top-level %q", key)
				}
			}
			for _, key := range []string{"epsilon", "delta", "rho", "collusion"} {
				if priv[key] == nil {
					t.Errorf("result JSON has no privacy.%s", key)
				}
			}
			// The saved release re-analyses to the same components (free).
			rel, err := back.Release.Release()
			if err != nil {
				t.Fatal(err)
			}
			again, err := Analyze(spec, ds.schema, rel, back.Owners, back.Privacy, back.HEParams)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(again.Components.Eigenvalues[0]-res.Components.Eigenvalues[0]) > 1e-12*math.Abs(res.Components.Eigenvalues[0]) {
				t.Error("re-analysis of the saved release differs")
			}
			t.Logf("%s t=%d: epsilon %.4f (honest %.4f), sigma_R %.3g, collusion %v", tc.plan, tc.tolerate, float64(pr.Epsilon), float64(pr.Collusion[0].Epsilon), float64(pr.SigmaTotal.R), pr.Collusion)
		})
	}
}

// TestSpecChecks: a bad spec is refused with an error naming the field.
func TestSpecChecks(t *testing.T) {
	p := heParams(t)
	ds := loadDataset(t, "wine", 16)
	user := he.GenerateKeyPair(p)
	_, cpk := ceremony(t, p, he.Committee{N: 1, Threshold: 1})
	good := func() *Spec { return newSpec(ds.schema, p, PCA, 5, he.Committee{N: 1, Threshold: 1}, cpk, user, false) }
	if err := good().Check(ds.schema, p); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mutate func(*Spec)
		want   string
	}{
		{func(s *Spec) { s.Epsilon = 0 }, "epsilon"},
		{func(s *Spec) { s.Delta = 1 }, "delta"},
		{func(s *Spec) { s.Analysis = "svd" }, "analysis"},
		{func(s *Spec) { s.NumOwners = 0 }, "num_owners"},
		{func(s *Spec) { s.OwnersRoot = "ab" }, "owners_root"},
		{func(s *Spec) { s.MinOwners = 9 }, "min_owners"},
		{func(s *Spec) { s.SchemaHash = "00" }, "schema_hash"},
		{func(s *Spec) { s.SchemaHash = fmt.Sprintf("%064x", 1) }, "differs from schema"},
		{func(s *Spec) { s.NoisePlan = "everyone" }, "noise_plan"},
		{func(s *Spec) { s.Tolerate = 2 }, "tolerate 2"},
		{func(s *Spec) { _ = s.SetOwnerRows(1 << 40) }, "may overflow"},
		{func(s *Spec) { s.MaxRows++ }, "max_rows"},
		{func(s *Spec) { s.MaxOwnerRows = 0 }, "max_owner_rows"},
		{func(s *Spec) { s.HEParamsHash = fmt.Sprintf("%064x", 2) }, "he_params"},
		{func(s *Spec) { s.CommitteeThreshold = 3 }, "committee"},
		{func(s *Spec) { s.Split = dp.Split{R: 1} }, "split"},
	} {
		s := good()
		tc.mutate(s)
		if err := s.Check(ds.schema, p); err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("%q: %v", tc.want, err)
		}
	}
	// A components job's sums may fill the plaintext range, as a
	// statistics job's (the members' conversion is exact over all of
	// it): the same largest row cap, and one row more refused for either,
	// naming that range.
	stats, comps := good(), good()
	comps.Release, comps.ResultKey, comps.Randomness, comps.K = ReleaseComponents, strings.Repeat("ab", 32), RandomnessDealer, 2
	most, err := stats.LargestOwnerRows(ds.schema, p)
	if err != nil {
		t.Fatal(err)
	}
	if same, err := comps.LargestOwnerRows(ds.schema, p); err != nil || same != most {
		t.Errorf("largest max_owner_rows %d for a components job (%v), %d for the statistics", same, err, most)
	}
	for _, c := range []struct {
		s    *Spec
		rows int64
		ok   bool
	}{{stats, most, true}, {comps, most, true}, {stats, most + 1, false}, {comps, most + 1, false}} {
		if err := c.s.SetOwnerRows(c.rows); err != nil {
			t.Fatal(err)
		}
		err := c.s.Check(ds.schema, p)
		if c.ok != (err == nil) || (err != nil && !contains(err.Error(), "the plaintext range (T-3)/2")) {
			t.Errorf("release %q with max_owner_rows %d: %v", c.s.Release, c.rows, err)
		}
	}

	// The job ID is the hash of the canonical spec: any change changes it.
	a, b := good(), good()
	if a.ID() != b.ID() {
		t.Fatal("equal specs, different IDs")
	}
	b.Nonce = "other"
	if a.ID() == b.ID() {
		t.Fatal("different specs, equal IDs")
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
