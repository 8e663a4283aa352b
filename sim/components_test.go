package sim

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/encoding/prototext"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/datasets"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
)

// TestComponentsWine: an exact components PCA job end to end through the
// daemons (5 owners allowing exact components; a committee of 4, any 3 of
// which compute with their own randomness, no dealer): the user's result
// holds the top k components, their covariance eigenvalues and n, nothing
// else, and they equal the plaintext PCA of the same rows within the
// issue's accuracy, although one of the three computing members crashes in
// the middle of the computation (its connections cut, as kill -9 does) and
// the proxy computes again with the spare member. A second job, computed
// by the three members left, loses one of them the same way with none
// spare: it fails within a minute, naming them, and releases nothing.
func TestComponentsWine(t *testing.T) {
	if testing.Short() {
		t.Skip("a components job through the daemons with a member lost: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(envInt("COMPONENTS_TIMEOUT_S", 300))*time.Second)
	defer cancel()
	data, _ := datasets.CSV("wine")
	s, err := NewSimulator(ctx, Simulation{Data: data, Name: "wine", Label: "label", Owners: 5, CSPs: 4, Threshold: 3, Dir: t.TempDir(), Seed: 1, Logger: componentsLogger(t),
		AllowExactComponents: true}) // owners take part in exact components jobs only when allowed
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	const k = 3
	crashed := crashInRound(t, s, 3, 1) // csp-2, of the computing csp-1, csp-2 and csp-3
	rep, err := s.Run(ctx, JobOptions{Analysis: job.PCA, K: k, NoNoise: true, Release: job.ReleaseComponents, Randomness: job.RandomnessMembers})
	if err != nil {
		t.Fatal(err)
	}
	if crashed().IsZero() {
		t.Fatal("the member was not crashed during the computation")
	}
	// csp-2 crashed in round 3, before any member could seal its output:
	// the release came from csp-1, csp-3 and csp-4.
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
	checkComponentsUtility(t, "wine exact components, a member lost", rep.Utility, k)
	t.Logf("wine exact components, a member lost in round 3: angles %.3g deg, eigenvalue errors %.3g, total %.2fs",
		rep.Utility.PrincipalAnglesDeg, rep.Utility.EigenvalueRelErrors, rep.Timings.Total)

	// None spare: csp-1, csp-3 and csp-4 compute, csp-3 crashes.
	crashed = crashInRound(t, s, 3, 2)
	spec, _ := submitComponents(ctx, t, s, JobOptions{Analysis: job.PCA, K: k, NoNoise: true, Randomness: job.RandomnessMembers})
	st, err := s.user.Wait(ctx, spec.ID(), nil)
	if err != nil {
		t.Fatal(err)
	}
	failedIn := time.Since(crashed())
	t.Logf("no spare member: failed %v after the crash: %s", failedIn, st.GetReason())
	if st.GetState() != fedpcav1.JobState_JOB_STATE_FAILED || !strings.Contains(st.GetReason(), "csp/csp-3 was lost during the computation") ||
		!strings.Contains(st.GetReason(), "csp/csp-2") || !strings.Contains(st.GetReason(), "nothing was released") {
		t.Fatalf("job %v: %q; want it failed naming the lost csp-3 and the down csp-2", st.GetState(), st.GetReason())
	}
	if failedIn > time.Minute {
		t.Fatalf("the job failed %v after the member was lost, want within a minute", failedIn)
	}
}

// crashInRound crashes member i (as kill -9 would: every connection cut)
// when the proxy relays the round-th round of the next components
// computation. The returned function gives the crash's time (zero before).
func crashInRound(t *testing.T, s *Simulator, round uint64, i int) func() time.Time {
	var mu sync.Mutex
	var at time.Time
	var once sync.Once
	s.Cluster().Network().OnDelivered(func(from, method string, resp any) {
		r, ok := resp.(*fedpcav1.SolveResponse)
		if !ok || r.GetRound().GetRound() < round {
			return
		}
		once.Do(func() {
			mu.Lock()
			at = time.Now()
			mu.Unlock()
			go func() {
				if err := s.Cluster().CrashCSP(i); err != nil {
					t.Error(err)
				}
			}()
		})
	})
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return at
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

// runComponents runs a components job as the simulated user and fetches
// its result over the proxy's API, as a user would: it returns the decoded
// output, every byte the user received (the job statuses and the result
// stream) and the time from submission to the result.
func runComponents(ctx context.Context, t *testing.T, s *Simulator, o JobOptions) (*job.Output, []byte, time.Duration) {
	t.Helper()
	sch := s.Schema()
	start := time.Now()
	spec, key := submitComponents(ctx, t, s, o)
	var seen bytes.Buffer
	st, err := s.user.Wait(ctx, spec.ID(), func(st *fedpcav1.JobStatus) { seen.WriteString(prototext.Format(st)) })
	if err != nil {
		t.Fatal(err)
	}
	seen.WriteString(prototext.Format(st))
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		t.Fatalf("job: %s", st.GetReason())
	}
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
	took := time.Since(start)
	seen.WriteString(prototext.Format(first))
	hd := first.GetHeader()
	if hd.GetCiphertexts() != 0 || spec.CheckOutputPoints(hd.GetPoints()) != nil {
		t.Fatalf("header: %d ciphertexts, points %v", hd.GetCiphertexts(), hd.GetPoints())
	}
	var shares [][]byte
	for _, pt := range hd.GetPoints() {
		r, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		seen.WriteString(prototext.Format(r))
		if r.GetSealedOutput() == nil {
			t.Fatalf("%T in a components release, want sealed outputs only", r.GetMsg())
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
	sum, err := spec.CombineShares(len(sch.Features), shares)
	if err != nil {
		t.Fatal(err)
	}
	out, err := spec.Decode(sum, sch)
	if err != nil {
		t.Fatal(err)
	}
	return out, seen.Bytes(), took
}

// submitComponents submits a components job as the simulated user, with a
// new result key.
func submitComponents(ctx context.Context, t *testing.T, s *Simulator, o JobOptions) (*job.Spec, *ecdh.PrivateKey) {
	t.Helper()
	key, err := seal.NewExchangeKey()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := s.user.Spec(ctx, userRequest(s, o))
	if err != nil {
		t.Fatal(err)
	}
	spec.Release, spec.ResultKey, spec.Randomness = job.ReleaseComponents, hex.EncodeToString(key.PublicKey().Bytes()), o.Randomness
	if spec.Randomness == "" {
		spec.Randomness = job.DefaultRandomness(spec.CommitteeN, spec.CommitteeThreshold)
	}
	if _, err := s.user.Submit(ctx, spec, s.Schema()); err != nil {
		t.Fatal(err)
	}
	return spec, key
}

// TestComponentsLeakNothing: after an exact components job, no exact
// statistic of the sum (any entry of R, v or n of magnitude at least 10^5,
// as the statistics release of the same rows gives them) is in what the
// user received, in the proxy's or the members' logs (debug level), in
// their stores, or in the proxy's metrics: as a decimal, or (those of at
// least 2^32) as 8 bytes mod T either way round. The statistics are taken from a statistics job
// run after the logs, stores and metrics were read.
func TestComponentsLeakNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	data, _ := datasets.CSV("wine")
	logs := &lockedBuffer{}
	dir := t.TempDir()
	s, err := NewSimulator(ctx, Simulation{Data: data, Name: "wine", Label: "label", Owners: 3, CSPs: 3, Threshold: 2, Dir: dir, Seed: 1, AllowExactComponents: true,
		Logger: hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, JSONFormat: true, Output: logs})})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, seen, _ := runComponents(ctx, t, s, JobOptions{Analysis: job.PCA, K: 5, NoNoise: true})
	mfs, err := s.Cluster().proxyFamilies()
	if err != nil {
		t.Fatal(err)
	}
	var metrics bytes.Buffer
	for _, mf := range mfs {
		metrics.WriteString(prototext.Format(mf))
	}
	var lines []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if line != "" && !strings.Contains(line, `"@module":"owner`) {
			lines = append(lines, line)
		}
	}
	files := map[string][]byte{}
	err = filepath.WalkDir(filepath.Join(dir, "state"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, string(filepath.Separator)+"owner-") {
			return err
		}
		b, err := os.ReadFile(p)
		files[p] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) < 20 || len(files) < 4 || metrics.Len() == 0 {
		t.Fatalf("%d log lines, %d files, %d bytes of metrics: the test does not see them", len(lines), len(files), metrics.Len())
	}

	// The exact statistics of the same rows.
	ref, err := s.Run(ctx, JobOptions{Analysis: job.PCA, K: 5, NoNoise: true})
	if err != nil {
		t.Fatal(err)
	}
	rel := ref.Result.Release
	T := s.Cluster().Params().T()
	var needles [][]byte
	checked := 0
	for _, x := range slices.Concat(rel.R, rel.V, rel.N) {
		if x < 100000 && x > -100000 {
			continue
		}
		checked++
		m := uint64(x)
		if x < 0 {
			m = T - uint64(-x)
		}
		needles = append(needles, []byte(strconv.FormatInt(x, 10)))
		if x >= 1<<32 || x <= -(1<<32) {
			// 8 bytes with at most three zero bytes: not a chance match
			// in a binary file's page headers.
			needles = append(needles, binary.LittleEndian.AppendUint64(nil, m), binary.BigEndian.AppendUint64(nil, m))
		}
	}
	if checked < 50 {
		t.Fatalf("only %d statistics to look for", checked)
	}
	look := func(what string, b []byte) {
		for _, n := range needles {
			if bytes.Contains(b, n) {
				t.Errorf("a statistic (%q) is in %s", n, what)
				return
			}
		}
	}
	look("what the user received", seen)
	look("the proxy's metrics", metrics.Bytes())
	for _, l := range lines {
		look("a log line", []byte(l))
	}
	for p, b := range files {
		look(p, b)
	}
	t.Logf("looked for %d statistics in %d log lines, %d files, %d bytes of metrics and %d bytes the user received", checked, len(lines), len(files), metrics.Len(), len(seen))
}

// TestComponentsCost measures a components job through the daemons for
// docs/BENCHMARKS.md (COMPONENTS_RANDOMNESS=dealer: with the proxy dealing
// the randomness, else the three members make their own): COMPONENTS_BENCH=d50 runs PCA with k = 15 on sonar's
// first 50 features split among 10 owners (a 2-of-3 committee, exact),
// and prints submit-to-result, eigenvalue error and principal angle
// against the statistics release of the same job; dca50 DCA on digits'
// first 50 features with 2 components, and dpdca50 the same with DP noise
// (epsilon 1, the servers plan: the regulariser chosen on shares), whose
// eigenvalues are those of another noisy sum than the statistics
// release's, so only printed.
func TestComponentsCost(t *testing.T) {
	bench := os.Getenv("COMPONENTS_BENCH")
	if bench != "d50" && bench != "dca50" && bench != "dpdca50" {
		t.Skip("COMPONENTS_BENCH=d50 (PCA), dca50 (DCA on digits' first 50 features, 2 components) or dpdca50 (the same with DP noise) runs the measurement")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	name, analysis, k := "sonar", job.PCA, 15
	if bench != "d50" {
		name, analysis, k = "digits", job.DCA, 2
	}
	noNoise := bench != "dpdca50"
	data, _ := datasets.CSV(name)
	var b strings.Builder
	for line := range strings.SplitSeq(strings.TrimSpace(string(data)), "\n") {
		f := strings.Split(line, ",")
		b.WriteString(strings.Join(append(f[:50:50], f[len(f)-1]), ",") + "\n")
	}
	s, err := NewSimulator(ctx, Simulation{Data: []byte(b.String()), Name: name + "50", Label: "label", Owners: 10, CSPs: 3, Threshold: 2, Dir: t.TempDir(), Seed: 1, AllowExactComponents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref, err := s.Run(ctx, JobOptions{Analysis: analysis, K: k, NoNoise: noNoise, Epsilon: 1})
	if err != nil {
		t.Fatal(err)
	}
	var took []time.Duration
	randomness := os.Getenv("COMPONENTS_RANDOMNESS") // members (the default) or dealer
	for range 3 {
		out, _, d := runComponents(ctx, t, s, JobOptions{Analysis: analysis, K: k, NoNoise: noNoise, Epsilon: 1, Randomness: randomness})
		took = append(took, d)
		if !noNoise {
			t.Logf("DP %s d = 50, k = %d, 10 owners: %v submit to result (statistics release: %.2f s), eigenvalues %v (the statistics release's of another draw: %v)", analysis, k, d, ref.Timings.Total, out.Values, ref.Result.Components.Eigenvalues)
			continue
		}
		n := float64(ref.Setup.Rows)
		worst := 0.0
		for i := range k {
			want := ref.Result.Components.Eigenvalues[i]
			if analysis == job.PCA {
				want = ref.Result.Components.AllEigenvalues[i] / n
			}
			worst = math.Max(worst, math.Abs(out.Values[i]-want)/want)
		}
		t.Logf("%s d = 50, k = %d, 10 owners: %v submit to result (statistics release: %.2f s), eigenvalues within %.1e", analysis, k, d, ref.Timings.Total, worst)
	}
	slices.Sort(took)
	t.Logf("median %v", took[1])
}

// TestComponentsDCAWine: exact components-only DCA and LDA through the
// daemons against the statistics release's: DCA computed by the three
// members with their own randomness, LDA with one member of three down
// and the proxy dealing.
func TestComponentsDCAWine(t *testing.T) {
	if testing.Short() {
		t.Skip("two components jobs through the daemons: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	data, _ := datasets.CSV("wine")
	s, err := NewSimulator(ctx, Simulation{Data: data, Name: "wine", Label: "label", Owners: 3, CSPs: 3, Threshold: 2, Dir: t.TempDir(), Seed: 1, AllowExactComponents: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	refs := map[string]*Report{}
	for _, a := range []string{job.DCA, job.LDA} {
		if refs[a], err = s.Run(ctx, JobOptions{Analysis: a, K: 2, NoNoise: true}); err != nil {
			t.Fatal(err)
		}
	}
	d := len(s.Schema().Features)
	for _, a := range []string{job.DCA, job.LDA} {
		randomness := job.RandomnessMembers
		if a == job.LDA {
			if err := s.Cluster().StopCSP(0); err != nil {
				t.Fatal(err)
			}
			randomness = job.RandomnessDealer
		}
		out, _, took := runComponents(ctx, t, s, JobOptions{Analysis: a, K: 2, NoNoise: true, Randomness: randomness})
		c := refs[a].Result.Components
		for i := range 2 {
			want := c.Eigenvalues[i]
			col := mat.Col(nil, i, c.W)
			norm, dot := 0.0, 0.0
			for r := range d {
				norm += col[r] * col[r]
				dot += col[r] * out.Vectors[i][r]
			}
			angle := math.Acos(math.Min(1, math.Abs(dot)/math.Sqrt(norm)))
			t.Logf("%s component %d: eigenvalue %.8f (statistics release %.8f), angle %.1e rad", a, i, out.Values[i], want, angle)
			if math.Abs(out.Values[i]-want)/want > 1e-4 || angle > 1e-3 {
				t.Errorf("%s component %d: eigenvalue %g against %g, angle %g rad", a, i, out.Values[i], want, angle)
			}
		}
		t.Logf("%s components of wine through the daemons (randomness %s) in %v", a, randomness, took)
	}
}
