package sim

import (
	"os"
	"strconv"

	"context"
	"encoding/hex"
	"github.com/hashicorp/go-hclog"
	"io"
	"math"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/datasets"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
)

// TestComponentsWine runs an exact components-only PCA job through the
// daemons (3 owners, a 2-of-3 committee with one member down): the user
// receives only the members' sealed output shares, which open to the top 5
// components and eigenvalues of the same covariance the statistics release
// gives.
func TestComponentsWine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(envInt("COMPONENTS_TIMEOUT_S", 240))*time.Second)
	defer cancel()
	data, _ := datasets.CSV("wine")
	s, err := NewSimulator(ctx, Simulation{Data: data, Name: "wine", Label: "label", Owners: 3, CSPs: 3, Threshold: 2, Dir: t.TempDir(), Seed: 1, Logger: componentsLogger(t),
		AllowExactComponents: true}) // owners take part in exact components jobs only when allowed
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The reference: the statistics release of the same job, exact.
	ref, err := s.Run(ctx, JobOptions{Analysis: job.PCA, K: 5, NoNoise: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Cluster().StopCSP(1); err != nil { // member 2 down: 2 of 3 answer
		t.Fatal(err)
	}

	key, err := seal.NewExchangeKey()
	if err != nil {
		t.Fatal(err)
	}
	sch := s.Schema()
	spec, err := s.user.Spec(ctx, userRequest(s, JobOptions{Analysis: job.PCA, K: 5, NoNoise: true}))
	if err != nil {
		t.Fatal(err)
	}
	spec.Release, spec.ResultKey = job.ReleaseComponents, hex.EncodeToString(key.PublicKey().Bytes())
	start := time.Now()
	if _, err := s.user.Submit(ctx, spec, sch); err != nil {
		t.Fatal(err)
	}
	st, err := s.user.Wait(ctx, spec.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		t.Fatalf("job: %s", st.GetReason())
	}
	took := time.Since(start)

	conn, err := s.Cluster().DialerAs(transport.Identity{Role: transport.RoleUser, ID: simUser}, "user", false).Dial(s.Cluster().ProxyAddr(), transport.Identity{Role: transport.RoleProxy})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := fedpcav1.NewProxyServiceClient(conn).FetchResult(ctx, &fedpcav1.FetchResultRequest{JobId: spec.ID()})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	hd := first.GetHeader()
	if hd.GetCiphertexts() != 0 || len(hd.GetPoints()) != 2 {
		t.Fatalf("header: %d ciphertexts, points %v", hd.GetCiphertexts(), hd.GetPoints())
	}
	var shares [][]byte
	for _, pt := range hd.GetPoints() {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCiphertext() != nil {
			t.Fatal("a ciphertext in a components release")
		}
		b, err := seal.Open(key, job.OutputAAD(spec.ID(), pt), r.GetSealedOutput())
		if err != nil {
			t.Fatalf("member %d's output: %v", pt, err)
		}
		shares = append(shares, b)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("after the outputs: %v", err)
	}
	d := len(sch.Features)
	sum, err := job.SumShares(d, 5, shares...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := job.DecodeOutput(sum, d, 5, mpc.DefaultParams.F, sch.Bits, sch.Bound())
	if err != nil {
		t.Fatal(err)
	}
	c := ref.Result.Components
	n := float64(ref.Setup.Rows)
	worstVal, worstDot := 0.0, 0.0
	for i := range 5 {
		// The statistics release's eigenvalues are of the scatter; the
		// components release's of the covariance (scatter / n).
		want := c.AllEigenvalues[i] / n
		worstVal = math.Max(worstVal, math.Abs(out.Values[i]-want)/want)
		col := mat.Col(nil, i, c.W)
		dot := 0.0
		for r := range d {
			dot += col[r] * out.Vectors[i][r]
		}
		worstDot = math.Max(worstDot, 1-math.Abs(dot))
	}
	t.Logf("components of wine through the daemons in %v: eigenvalues within %.1e, vectors within %.1e rad, n %g", took, worstVal, math.Sqrt(2*worstDot), out.N)
	if worstVal > 1e-4 || math.Sqrt(2*worstDot) > 1e-2 || out.N != n {
		t.Fatalf("components off: eigenvalues %.2e, vector angle %.2e, n %g (want %g)", worstVal, math.Sqrt(2*worstDot), out.N, n)
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// componentsLogger logs to stderr at the level of COMPONENTS_LOG (off by default).
func componentsLogger(t *testing.T) hclog.Logger {
	lvl := os.Getenv("COMPONENTS_LOG")
	if lvl == "" {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{Level: hclog.LevelFromString(lvl), Output: os.Stderr})
}
