package sim

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/power"
)

// runGenotypePower simulates a cohort and runs a power job on it through
// the protocol's steps (real BGV, proofs, noise shares, a 2-of-3 committee
// with member 2 down), then evaluates it against the central PCA.
func runGenotypePower(t *testing.T, cp GenotypeParams, pj PowerJob) (*PowerReport, *PowerAccuracy) {
	t.Helper()
	c, err := BaldingNichols(cp)
	if err != nil {
		t.Fatal(err)
	}
	pj.Bits = 8
	pj.Bound = ClipBound(pj.Bits, cp.D, 1)
	pj.D = cp.D
	if pj.Rows, err = StandardiseCohort(c, pj.Bits, pj.Bound); err != nil {
		t.Fatal(err)
	}
	pj.CSPs, pj.Threshold, pj.Down = 3, 2, []int{2}
	rep, err := pj.Run()
	if err != nil {
		t.Fatal(err)
	}
	accs, err := EvaluatePower(pj.Rows, pj.D, pj.Bits, []*mat.Dense{rep.Result.W}, pj.K, c.Pops, pj.Seed, 0)
	if err != nil {
		t.Fatal(err)
	}
	acc := accs[0]
	t.Logf("d = %d, n = %d, %d owners, k = %d, p = %d, T = %d, noise %v: sigma_Y %.3g C^2, %.1f s, %d cts/owner/round, %.1f MB/owner/round; captured %.4f, angles %.3g deg (largest), separation %.3f (central %.3f); central eigenvalues %.4g",
		rep.D, rep.N, rep.Owners, rep.K, rep.P, rep.Rounds, !rep.NoiseOff, rep.SigmaY, rep.Seconds, rep.RoundStats[1].Ciphertexts, float64(rep.RoundStats[1].Bytes)/1e6,
		acc.CapturedRatio, acc.Angles[0], acc.Separation, acc.CentralSeparation, acc.CentralValues)
	return rep, acc
}

// TestPowerJobNoiseless: without noise, the protocol's power job (integers,
// encryption, a 2-of-3 key switch with a member down) finds the central
// top k of the same rows: captured variance and principal angles.
func TestPowerJobNoiseless(t *testing.T) {
	cp := GenotypeParams{N: 300, D: 600, Populations: 3, Owners: 3, FST: 0.1, Missing: 0.01, Seed: 1}
	// k = 2: the two population axes, far above the bulk (a gap the rounds
	// resolve; the bulk itself has none).
	pj := PowerJob{K: 2, Oversample: 8, Rounds: 12, NoNoise: true, Seed: "noiseless"}
	rep, acc := runGenotypePower(t, cp, pj)
	if acc.CapturedRatio < 1-1e-6 {
		t.Errorf("captured variance ratio %.8f without noise, want 1 - 1e-6", acc.CapturedRatio)
	}
	if acc.Angles[0] > 0.5 {
		t.Errorf("largest principal angle %.3g deg without noise", acc.Angles[0])
	}
	for i, v := range rep.Values {
		if rel := v/acc.CentralValues[i] - 1; rel > 1e-3 || rel < -1e-3 {
			t.Errorf("eigenvalue %d: %.6g, central %.6g", i, v, acc.CentralValues[i])
		}
	}
	if acc.Separation != acc.CentralSeparation {
		t.Errorf("separation %.3f, central %.3f", acc.Separation, acc.CentralSeparation)
	}
}

// TestPowerJobDP: with noise at epsilon 1 the job certifies its whole
// composed cost within the budget, and where the structure is well above
// the noise (two populations at F_ST 0.3: the axis carries about 46% of the
// variance, sigma sqrt(d) is about 20% of it) it separates the populations
// as the central PCA does and captures most of its variance, starting from
// a public panel's components.
func TestPowerJobDP(t *testing.T) {
	if raceEnabled {
		t.Skip("slow under the race detector (make test runs it without; TestPowerJobNoiseless covers the same code under -race)")
	}
	cp := GenotypeParams{N: 2000, D: 1000, Populations: 2, Owners: 4, FST: 0.3, Missing: 0.01, Seed: 2, Panel: 50}
	gr := GenotypeRun{Cohort: cp, Job: PowerJob{K: 1, Oversample: 9, Rounds: 1, Epsilon: 1, Delta: 1e-6, CSPs: 3, Threshold: 2, Down: []int{2}, Seed: "dp"}}
	rep, err := gr.Run()
	if err != nil {
		t.Fatal(err)
	}
	j, a := rep.Job, rep.Accuracy
	if j.NoiseOff || j.CostEpsilon > 1 || j.CostEpsilon < 0.99 {
		t.Errorf("the job certifies epsilon %v (noise off %v), want just within 1", j.CostEpsilon, j.NoiseOff)
	}
	if a.CapturedRatio < 0.7 {
		t.Errorf("captured variance %.3f < 0.7", a.CapturedRatio)
	}
	if a.Separation < a.CentralSeparation-0.05 {
		t.Errorf("separation %.3f, central %.3f", a.Separation, a.CentralSeparation)
	}
	t.Logf("captured %.4f, angle %.3g deg, separation %.4f (central %.4f), sigma_Y %.3g C^2", a.CapturedRatio, a.Angles[0], a.Separation, a.CentralSeparation, j.SigmaY)
}

// TestPowerDaemons: a power-method job through the daemons (mutual TLS, a
// 2-of-3 committee with csp-2 down, wine dealt to 3 owners): without noise
// it finds the central top k; with noise it runs, certifies its composed
// cost within the budget, and every owner's ledger charges that cost once,
// keyed by the parent job, with no entry for any round.
func TestPowerDaemons(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	data, _ := datasets.CSV("wine")
	sm, err := NewSimulator(ctx, Simulation{Data: data, Name: "wine", Label: "label", Owners: 3, CSPs: 3, Threshold: 2, Seed: 3, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	cmp, err := sm.RunPower(ctx, JobOptions{Analysis: "pca", K: 3, NoNoise: true}, PowerOptions{Rounds: 8, Oversample: 5, Down: []int{1}})
	if err != nil {
		t.Fatal(err)
	}
	res := cmp.Result
	doc, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.ParseResult(doc); err != nil {
		t.Fatalf("the result document does not validate: %v", err)
	}
	if res.Released != job.ReleasePower || res.JobID != cmp.Power.Parent || len(res.Power.Each) != 9 || res.NoisyN != float64(cmp.Power.N) {
		t.Fatalf("result: released %q, job %.12s (parent %.12s), %d rounds, n %v (%d rows)", res.Released, res.JobID, cmp.Power.Parent, len(res.Power.Each), res.NoisyN, cmp.Power.N)
	}
	for _, r := range res.Power.Each {
		if len(r.CSPs) != 2 || slices.Contains(r.CSPs, CSPID(1)) || len(r.Owners) != 3 {
			t.Errorf("round %d switched by %v with owners %v; want csp-1 and csp-3, every owner", r.Round, r.CSPs, r.Owners)
		}
	}
	if a := cmp.PowerAccuracy; a.CapturedRatio < 1-1e-6 || a.Angles[0] > 0.1 {
		t.Errorf("without noise: captured %.8f, largest angle %.3g deg", a.CapturedRatio, a.Angles[0])
	}
	t.Logf("noiseless, wine, d = %d, p = %d, T = %d, 3 owners, csp-2 down: %.1f s; captured %.8f, largest angle %.3g deg",
		cmp.Power.D, cmp.Power.P, cmp.Power.Rounds, cmp.Power.Seconds, cmp.PowerAccuracy.CapturedRatio, cmp.PowerAccuracy.Angles[0])

	cmp, err = sm.RunPower(ctx, JobOptions{Analysis: "pca", K: 2, Epsilon: 1}, PowerOptions{Rounds: 2, Oversample: 4})
	if err != nil {
		t.Fatal(err)
	}
	parent, cost := cmp.Power.Parent, cmp.Power.Cost
	if e := cost.Epsilon(cmp.Power.Delta); e > 1 || e < 0.99 || cmp.Result.Privacy.Cost == nil || *cmp.Result.Privacy.Cost != cost {
		t.Errorf("the job certifies epsilon %v; the result reports cost %v, want %v", e, cmp.Result.Privacy.Cost, cost)
	}
	rounds := map[string]bool{}
	for _, r := range cmp.Result.Power.Each[1:] {
		rounds[r.JobID] = true
	}
	for _, id := range sm.OwnerIDs() {
		entries, err := sm.Cluster().Owner(id).Ledger(sm.Schema().ID)
		if err != nil {
			t.Fatal(err)
		}
		charged := 0
		for _, e := range entries {
			if rounds[e.Job] {
				t.Errorf("owner %s: a ledger entry for round job %.12s", id, e.Job)
			}
			if e.Job != parent {
				continue
			}
			charged++
			if e.State != owner.Committed || e.Cost == nil || *e.Cost != cost {
				t.Errorf("owner %s: the parent's entry is %s at %+v, want committed at the composed cost %+v", id, e.State, e.Cost, cost)
			}
		}
		if charged != 1 {
			t.Errorf("owner %s: %d ledger entries for the parent job, want 1", id, charged)
		}
	}
	t.Logf("epsilon 1: %.1f s, sigma_Y %.3g C^2; captured %.4f", cmp.Power.Seconds, cmp.Power.SigmaY, cmp.PowerAccuracy.CapturedRatio)
}

// TestPowerRoundsRefused: the proxy opens a power job's rounds only in
// order, signed by the parent's user, under a matrix that passes the Gram
// test and is the one the round names, within T, and each round number
// once; the same round again is the same round.
func TestPowerRoundsRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	data, _ := datasets.CSV("wine")
	sm, err := NewSimulator(ctx, Simulation{Data: data, Name: "wine", Label: "label", Owners: 2, CSPs: 3, Threshold: 2, Seed: 4, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	req := userRequest(sm, JobOptions{Analysis: "pca", K: 2, NoNoise: true})
	req.Power = &job.PowerSpec{Oversample: 2, Rounds: 2, Seed: "refused", RoundSeconds: 600}
	spec, err := sm.user.Spec(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sm.user.Submit(ctx, spec, sm.sch); err != nil {
		t.Fatal(err)
	}
	if st, err := sm.user.Wait(ctx, spec.ID(), nil); err != nil || st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		t.Fatalf("round 0: %v %v", st.GetReason(), err)
	}
	pr, err := spec.PowerParams(sm.sch)
	if err != nil {
		t.Fatal(err)
	}
	q0, err := power.Start(pr)
	if err != nil {
		t.Fatal(err)
	}
	q, _, err := power.Quantize(q0, pr.QBits)
	if err != nil {
		t.Fatal(err)
	}
	swapped := &power.QMatrix{D: q.D, P: q.P, H: q.H, Data: slices.Clone(q.Data)}
	equal := &power.QMatrix{D: q.D, P: q.P, H: q.H, Data: slices.Clone(q.Data)}
	for i := range q.D {
		row := swapped.Data[i*q.P : (i+1)*q.P]
		row[0], row[1] = row[1], row[0]
		equal.Data[i*q.P+1] = equal.Data[i*q.P] // two equal columns: the Gram test fails
	}
	signer := sm.Cluster().Creds("user/" + simUser).Signer()
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	open := func(rs job.RoundSpec, key crypto.Signer, q *power.QMatrix) error {
		sig, err := rs.Sign(key)
		if err != nil {
			t.Fatal(err)
		}
		stream, err := sm.user.Proxy().CreateRound(ctx)
		if err != nil {
			return err
		}
		if err := stream.Send(&fedpcav1.CreateRoundRequest{Msg: &fedpcav1.CreateRoundRequest_Header{Header: &fedpcav1.RoundHeader{RoundSpec: rs.Canonical(), Signature: sig}}}); err != nil {
			return err
		}
		for _, f := range job.MatrixFrames(q) {
			if err := stream.Send(&fedpcav1.CreateRoundRequest{Msg: &fedpcav1.CreateRoundRequest_Frame{Frame: &fedpcav1.MatrixFrame{Words: f}}}); err != nil {
				break // refused early: the status follows
			}
		}
		resp, err := stream.CloseAndRecv()
		if err == nil && resp.GetJob().GetJobId() != rs.ID() {
			t.Errorf("round %d opened as job %.12s, want %.12s", rs.Round, resp.GetJob().GetJobId(), rs.ID())
		}
		return err
	}
	r1 := job.NewRoundSpec(spec, 1, q)
	for _, tc := range []struct {
		name string
		rs   job.RoundSpec
		key  crypto.Signer
		q    *power.QMatrix
		want string
	}{
		{"round 2 first", job.NewRoundSpec(spec, 2, q), signer, q, "round 1 of job " + spec.ID()[:12] + "… is not done"},
		{"another signer", r1, stranger, q, "user signature"},
		{"a matrix above 2^h", job.NewRoundSpec(spec, 1, equal), signer, equal, "Gram row"},
		{"not the matrix named", r1, signer, swapped, "hash is not the one the round names"},
		{"past T", job.NewRoundSpec(spec, 3, q), signer, q, "rounds 1 to 2"},
	} {
		if err := open(tc.rs, tc.key, tc.q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := open(r1, signer, q); err != nil {
		t.Fatalf("round 1: %v", err)
	}
	if err := open(r1, signer, q); err != nil {
		t.Errorf("round 1 again: %v", err)
	}
	if err := open(job.NewRoundSpec(spec, 1, swapped), signer, swapped); err == nil || !strings.Contains(err.Error(), "exists already") {
		t.Errorf("round 1 under another matrix: %v", err)
	}
	if st, err := sm.user.Wait(ctx, r1.ID(), nil); err != nil || st.GetState() != fedpcav1.JobState_JOB_STATE_DONE || st.GetRound() != 1 || st.GetParentJobId() != spec.ID() {
		t.Fatalf("round 1: %v %v, round %d of %.12s", st.GetReason(), err, st.GetRound(), st.GetParentJobId())
	}
}

// TestPowerOwnerDrops: an owner lost after round 0 leaves the rounds as an
// owner leaves any job: each round waits for it until its own deadline (the
// parent's plus a round window per round) and seals there with min_owners,
// the servers' top-up standing in for its noise share; its ledger keeps
// the parent's one entry, charged at round 0.
func TestPowerOwnerDrops(t *testing.T) {
	if testing.Short() {
		t.Skip("rounds that wait for their deadlines: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	data, _ := datasets.CSV("wine")
	sm, err := NewSimulator(ctx, Simulation{Data: data, Name: "wine", Label: "label", Owners: 3, CSPs: 3, Threshold: 2, Seed: 5, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	if err := sm.Cluster().WaitCommittee(ctx); err != nil {
		t.Fatal(err)
	}
	req := userRequest(sm, JobOptions{Analysis: "pca", K: 2, Epsilon: 1, MinOwners: 2})
	req.Deadline = time.Now().Add(8 * time.Second)
	req.Power = &job.PowerSpec{Oversample: 2, Rounds: 2, Seed: "drops", RoundSeconds: 4}
	spec, err := sm.user.Spec(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	lost := sm.OwnerIDs()[2]
	crashed := false
	start := time.Now()
	res, err := sm.user.RunPower(ctx, spec, sm.sch, nil, func(round int, st *fedpcav1.JobStatus) {
		if round == 0 && st.GetState() == fedpcav1.JobState_JOB_STATE_DONE && !crashed {
			crashed = true
			if err := sm.Cluster().CrashOwner(lost); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	for _, r := range res.Power.Each {
		want := 2
		if r.Round == 0 {
			want = 3
		}
		if len(r.Owners) != want || (r.Round > 0 && slices.Contains(r.Owners, lost)) {
			t.Errorf("round %d: owners %v, want %d", r.Round, r.Owners, want)
		}
	}
	if closes := spec.RoundDeadline(2); time.Now().Before(closes) {
		t.Errorf("round 2 sealed before its deadline %s without the lost owner", closes)
	}
	views, err := owner.ReadLedgers(filepath.Join(sm.sim.Dir, "state", "owner-"+lost), 1e6, 1e-6) // its store, offline
	if err != nil {
		t.Fatal(err)
	}
	if len(views) != 1 || len(views[0].Jobs) != 1 || views[0].Jobs[0].Job != spec.ID() || views[0].Jobs[0].State != owner.Committed {
		t.Errorf("the lost owner's ledger: %+v, want the parent's entry, committed", views)
	}
	t.Logf("an owner lost after round 0: rounds sealed at their deadlines with 2 owners, %.1f s", took.Seconds())
}

// TestPowerGenotypesDaemons: genotypes wider than a d x d job takes go
// through the daemons: each owner daemon reads its PLINK fileset
// (plink://) through the reference frequencies' genotype schema, the
// committee switches every round 2 of 3 with csp-2 down, and without noise
// the job separates the populations as the central PCA of the same rows
// does, capturing its top k's variance.
func TestPowerGenotypesDaemons(t *testing.T) {
	if testing.Short() {
		t.Skip("a genotype power job through the daemons: skipped with -short")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	gr := GenotypeRun{
		Cohort: GenotypeParams{N: 240, D: job.MaxScatterFeatures + 404, Populations: 3, Owners: 3, FST: 0.1, Missing: 0.01, Seed: 5},
		Job:    PowerJob{K: 2, Oversample: 6, Rounds: 4, NoNoise: true, CSPs: 3, Threshold: 2, Down: []int{2}, Seed: "genotypes"},
		Dir:    t.TempDir(),
	}
	cmp, err := gr.RunDaemons(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	j, a := cmp.Power, cmp.PowerAccuracy
	if j.D <= job.MaxScatterFeatures || j.N != gr.Cohort.N || j.Owners != 3 {
		t.Fatalf("d = %d, n = %d, %d owners", j.D, j.N, j.Owners)
	}
	for _, r := range cmp.Result.Power.Each {
		if len(r.CSPs) != 2 || slices.Contains(r.CSPs, CSPID(1)) || len(r.Owners) != 3 {
			t.Errorf("round %d switched by %v with owners %v; want csp-1 and csp-3, every owner", r.Round, r.CSPs, r.Owners)
		}
	}
	if a.CapturedRatio < 0.99 || a.Separation < a.CentralSeparation-0.05 {
		t.Errorf("captured %.4f of the central top %d's; separation %.3f, central %.3f", a.CapturedRatio, j.K, a.Separation, a.CentralSeparation)
	}
	t.Logf("d = %d, n = %d, %d owners, T = %d through the daemons: %.1f s, %.2f MB per owner per round; captured %.4f, separation %.3f (central %.3f)",
		j.D, j.N, j.Owners, j.Rounds, j.Seconds, float64(j.RoundStats[1].Bytes)/1e6, a.CapturedRatio, a.Separation, a.CentralSeparation)
}
