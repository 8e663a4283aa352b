package eigen

import (
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/mpc"
)

type sharedResult struct {
	relErr, subspace, vector float64
	cost                     mpc.Cost
	run                      time.Duration
}

// solveShared runs route (ii) for a 3-member committee with a dealer and
// returns the top-k accuracy against the plaintext decomposition. The
// Rayleigh-Ritz step is done in the clear on the revealed Q and Y: the
// measurement's placeholder, as in route (i).
func solveShared(t testing.TB, c [][]float64, k int, cfg SharedConfig) sharedResult {
	t.Helper()
	d := len(c)
	dealer, err := mpc.NewDealer(3, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	e, err := mpc.NewEngine(3, mpc.DefaultParams, dealer)
	if err != nil {
		t.Fatal(err)
	}
	shares := e.Share(mpc.EncodeMat(c, e.P.F)) // B = 1: rows clipped to norm 1
	begin := time.Now()
	q, y, err := SharedRun(e, shares, Start(d, Block(d, k)), cfg)
	run := time.Since(begin)
	if err != nil {
		t.Fatal(err)
	}
	cost := e.Cost
	vals, vecs, err := Ritz(e.Reveal(q).Decode(e.P.F), e.Reveal(y).Decode(e.P.F), k, 1, RitzTol)
	if err != nil {
		t.Fatal(err)
	}
	ev, evec := exact(t, c)
	r := sharedResult{cost: cost, run: run}
	r.relErr, r.subspace, r.vector = accuracy(vals, vecs, ev, evec)
	return r
}

// TestSharedWine holds route (ii) to issue 32's bar on wine.
func TestSharedWine(t *testing.T) {
	c, _ := covariance(t, "wine", 0)
	r := solveShared(t, c, 5, DefaultShared)
	t.Logf("wine k=5: rel err %.2e, angle %.2e, vector %.2e, %d rounds, %d bytes per party, %v",
		r.relErr, r.subspace, r.vector, r.cost.Rounds, r.cost.BytesPerParty, r.run)
	if r.relErr > 1e-4 || r.subspace > 1e-3 {
		t.Fatalf("wine: eigenvalues %.2e (bar 1e-4), angle %.2e rad (bar 1e-3)", r.relErr, r.subspace)
	}
}

func sharedEnv(t testing.TB) SharedConfig {
	cfg := DefaultShared
	for name, p := range map[string]*int{"SHARED_STEPS": &cfg.Steps, "SHARED_ITERATIONS": &cfg.Iterations} {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatal(err)
			}
			*p = n
		}
	}
	return cfg
}

// TestSharedDatasets prints route (ii)'s row per bundled dataset (k = 5,
// and 15 at d >= 30). SHARED_DATASETS=all (or a list) runs it.
func TestSharedDatasets(t *testing.T) {
	v := os.Getenv("SHARED_DATASETS")
	if v == "" {
		t.Skip("SHARED_DATASETS=all (or a list) runs route (ii) per dataset")
	}
	names := datasets.Names()
	if v != "all" {
		names = splitComma(v)
	}
	cfg := sharedEnv(t)
	for _, name := range names {
		c, _ := covariance(t, name, 0)
		d := len(c)
		ks := []int{min(5, d)}
		if d >= 30 {
			ks = append(ks, 15)
		}
		for _, k := range ks {
			ev, _ := exact(t, c)
			gap := (ev[k-1] - ev[min(k, d-1)]) / ev[0]
			r := solveShared(t, c, k, cfg)
			fmt.Printf("| %s | %d | %d | %d | %.4f | %.1e | %.1e | %.1e | %d | %.2f | %.2f |\n", name, d, k, Block(d, k), gap,
				r.relErr, r.subspace, r.vector, r.cost.Rounds, float64(r.cost.BytesPerParty)/1e6, r.run.Seconds())
		}
	}
}
