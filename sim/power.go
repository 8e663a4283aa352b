package sim

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/power"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/fedpca/fedpca/source"
)

// PowerJob is a power-method job run in one process with the parties in
// slices: every owner computes its round statistic in integers
// (power.Accumulator), encrypts it under the committee key with real BGV
// and proves every ciphertext well formed (protocol/zk); the proxy verifies
// every proof, sums, adds its discrete Gaussian noise share and blinds; each
// active committee member verifies every proof again and that the sum's c1
// is the owners', adds its noise share and its share of the key switch to
// the user's key (t of n, with members down); the proxy combines and
// unblinds; the user decrypts, centres and takes the next public matrix.
// It calls the protocol's step functions directly, as the daemons do
// (Simulator.RunPower runs the job through them: docs/PROTOCOL.md section
// 13), for the genotype runs, which the daemons do not read yet.
type PowerJob struct {
	// Rows are each owner's rows, quantised and clipped (power.Standardiser
	// or a schema's row map).
	Rows [][][]int64
	// D features, g bits, clip bound B.
	D     int
	Bits  uint
	Bound int64
	// K components, Oversample extra columns (p = K + Oversample), Rounds.
	K, Oversample, Rounds int
	Epsilon, Delta        float64
	NoNoise               bool
	// Plan is the noise plan (default servers) with Tolerate.
	Plan     string
	Tolerate int
	// CSPs and Threshold shape the committee; Down are the points of
	// members that are down (at most CSPs - Threshold).
	CSPs, Threshold int
	Down            []int
	Seed            string
	// Start is a public d x p matrix Q_1 starts from (power.StartFrom);
	// nil: the seed's (power.Start).
	Start *mat.Dense
	// Schema, when the rows were mapped by one, makes the job a signed
	// parent spec (job.Spec with Power, checked with Spec.Check and
	// calibrated by Spec.PowerCalibration) whose rounds the user signs as
	// job.RoundSpec and every owner admits (RoundSpec.Admit) before it
	// computes; without it the job runs on power.Params alone (the
	// genotype path, whose standardisation is not a schema's affine map).
	Schema *schema.Schema
}

// roundAdmission is the parent spec and the user's signing key of a job
// run with a schema.
type roundAdmission struct {
	parent *job.Spec
	sch    *schema.Schema
	user   *ecdsa.PrivateKey
}

// admit has the user sign round r under q and every owner admit it.
func (ra *roundAdmission) admit(r, owners int, q *power.QMatrix) (string, error) {
	rs := job.NewRoundSpec(ra.parent, r, q)
	sig, err := rs.Sign(ra.user)
	if err != nil {
		return "", err
	}
	for o := range owners {
		if err := rs.Admit(ra.parent, ra.sch, sig, ra.user.Public(), r-1, q); err != nil {
			return "", fmt.Errorf("owner %s refuses round %d: %w", ownerName(o), r, err)
		}
	}
	return rs.ID(), nil
}

// parentSpec builds and checks the signed parent spec of a job run with a
// schema, and returns the calibration it gives.
func (pj *PowerJob) parentSpec(p he.Params, pr power.Params, plan dp.Plan, cpk *rlwe.PublicKey, userKeys he.KeyPair, maxOwnerRows int64) (*roundAdmission, power.Calibration, error) {
	s := &job.Spec{Version: job.Version, Dataset: pj.Schema.ID, SchemaHash: pj.Schema.HashHex(), Analysis: job.PCA, K: pj.K,
		Epsilon: pj.Epsilon, Delta: pj.Delta, NoNoise: pj.NoNoise, NoisePlan: plan.Kind, Tolerate: plan.Tolerate, Split: dp.DefaultSplit,
		MinOwners: plan.Owners, Deadline: time.Now().Add(time.Hour).Truncate(time.Second).UTC(),
		HEParams: p.ID(), HEParamsHash: p.Fingerprint(), CommitteeN: pj.CSPs, CommitteeThreshold: pj.Threshold,
		CommitteeKey: job.Fingerprint(p.Codecs().PublicKey.Marshal(cpk)),
		User:         "spiffe://fedpca/user/simulate", UserKey: job.Fingerprint(p.Codecs().PublicKey.Marshal(userKeys.Public)), Nonce: pj.Seed,
		Power: &job.PowerSpec{Oversample: pj.Oversample, Rounds: pj.Rounds, Seed: pj.Seed, QBits: pr.QBits, RoundSeconds: 3600}}
	if s.NoNoise {
		s.Epsilon = 0
	}
	names := make([]job.Owner, plan.Owners) // in one process: no certificates, no keys
	for o := range names {
		names[o] = job.Owner{ID: ownerName(o)}
	}
	if err := s.SetOwners(names); err != nil {
		return nil, power.Calibration{}, err
	}
	if err := s.SetOwnerRows(maxOwnerRows); err != nil {
		return nil, power.Calibration{}, err
	}
	if err := s.Check(pj.Schema, p); err != nil {
		return nil, power.Calibration{}, err
	}
	cal, err := s.PowerCalibration(pj.Schema)
	if err != nil {
		return nil, power.Calibration{}, err
	}
	user, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, power.Calibration{}, err
	}
	return &roundAdmission{parent: s, sch: pj.Schema, user: user}, cal, nil
}

// PowerRound is what one round measured.
type PowerRound struct {
	Round int `json:"round"`
	// Ciphertexts per owner; Bytes per owner sent (ciphertexts and proofs).
	Ciphertexts int   `json:"ciphertexts_per_owner"`
	Bytes       int64 `json:"bytes_per_owner"`
	// Seconds: owners (median over owners: statistic, encryption, proofs),
	// proxy (verification, sum, noise, blinding), members (verification,
	// noise, key switch; the slowest member), user (decryption, decoding,
	// the next matrix), and the whole round.
	OwnerStat    float64 `json:"owner_statistic_s"`
	OwnerEncrypt float64 `json:"owner_encrypt_prove_s"`
	Proxy        float64 `json:"proxy_s"`
	Members      float64 `json:"members_s"`
	User         float64 `json:"user_s"`
	Total        float64 `json:"total_s"`
}

// PowerReport is a power-method job's result and measurements.
type PowerReport struct {
	D, N, Owners, K, P, Rounds int
	Bits, QBits                uint
	Bound                      int64
	Epsilon, Delta             float64
	NoNoise                    bool
	Plan                       string
	Committee                  string
	// SigmaY is the central noise's standard deviation per entry of a
	// round, in units of C^2; Cost the job's composed cost and the epsilon
	// it certifies at Delta (what each owner's ledger charges once).
	SigmaY, SigmaV float64
	Cost           dp.Cost
	CostEpsilon    float64
	Factor         float64
	// Bound is Hardt-Price's e for the noise of this job and the central
	// spectrum's gap lambda_k - lambda_{k+1} (set by the evaluation).
	HPBound    float64
	RoundStats []PowerRound
	// Seconds from round 0's first owner to the user's components; peak
	// resident memory of the process during the protocol.
	Seconds float64
	PeakRSS int64
	// Parent is the signed parent spec's ID (jobs run with a schema).
	Parent string `json:",omitempty"`
	// Result are the job's components: Ritz when the job starts from a
	// public matrix (its span is known to hold the structure), SVD
	// otherwise; both come from the same release (post-processing).
	Result   power.Components `json:"-"`
	SVD      power.Components `json:"-"`
	Ritz     power.Components `json:"-"`
	Finish   string
	Values   []float64
	Shrink   float64
	NoiseOff bool
}

// Run runs the job. It refuses a committee below 2 of 3 with a member down
// only as the job says: the shape is the caller's.
func (pj *PowerJob) Run() (*PowerReport, error) {
	if len(pj.Rows) == 0 {
		return nil, errors.New("power job: no owners")
	}
	if pj.CSPs == 0 {
		pj.CSPs, pj.Threshold = 3, 2
	}
	if pj.Plan == "" {
		pj.Plan = dp.PlanServers
	}
	committee := he.Committee{N: pj.CSPs, Threshold: pj.Threshold}
	var active []he.Point
	for _, pt := range committee.Points() {
		if !containsInt(pj.Down, int(pt)) {
			active = append(active, pt)
		}
	}
	if len(active) < pj.Threshold {
		return nil, fmt.Errorf("power job: %d members up, the key switch needs %d", len(active), pj.Threshold)
	}
	active = active[:pj.Threshold]
	var maxOwnerRows, total int64
	for _, rows := range pj.Rows {
		maxOwnerRows = max(maxOwnerRows, int64(len(rows)))
		total += int64(len(rows))
	}
	owners := len(pj.Rows)
	maxRows := maxOwnerRows * int64(owners)
	h, err := power.ChooseQBits(maxRows, pj.Bound, 3)
	if err != nil {
		return nil, err
	}
	pr := power.Params{D: pj.D, K: pj.K, P: pj.K + pj.Oversample, Rounds: pj.Rounds, Seed: []byte(pj.Seed), Bits: pj.Bits, Bound: pj.Bound, QBits: h, MaxRows: maxRows}
	if err := pr.Validate(); err != nil {
		return nil, err
	}
	plan := dp.Plan{Kind: pj.Plan, Tolerate: pj.Tolerate, Owners: owners, CSPs: pj.Threshold}
	cal := power.NoNoise(pr)
	if !pj.NoNoise {
		sb, err := plan.ShareBound(owners)
		if err != nil {
			return nil, err
		}
		if cal, err = power.Calibrate(pr, pj.Epsilon, pj.Delta, dp.DefaultSplit, sb); err != nil {
			return nil, err
		}
	}
	p, err := he.NewDefaultParams()
	if err != nil {
		return nil, err
	}
	if err := cal.CheckRange(big.NewInt(p.MaxAbs()), plan.MaxTotalWeight(owners)); err != nil {
		return nil, err
	}
	rep := &PowerReport{D: pr.D, N: int(total), Owners: owners, K: pr.K, P: pr.P, Rounds: pr.Rounds, Bits: pr.Bits, QBits: h, Bound: pr.Bound,
		Epsilon: pj.Epsilon, Delta: pj.Delta, NoNoise: pj.NoNoise, Plan: pj.Plan, Committee: fmt.Sprintf("%d of %d, down %v", pj.Threshold, pj.CSPs, pj.Down),
		Cost: cal.Cost, Factor: cal.Factor, NoiseOff: cal.NoiseOff()}
	if !cal.NoiseOff() {
		c2 := math.Ldexp(float64(pr.Bound), -int(pr.Bits))
		rep.SigmaY, rep.SigmaV = cal.SigmaY()/(c2*c2), cal.SigmaV()/c2
		rep.CostEpsilon = cal.Cost.Epsilon(pj.Delta)
	}

	members, cpk, err := he.LocalCeremony(p, committee, []byte("fedpca power job ceremony "+pj.Seed))
	if err != nil {
		return nil, err
	}
	userKeys := he.GenerateKeyPair(p)
	key, err := p.ProofKey(cpk)
	if err != nil {
		return nil, err
	}
	parent := "power-" + pj.Seed
	var ra *roundAdmission
	if pj.Schema != nil {
		if ra, cal, err = pj.parentSpec(p, pr, plan, cpk, userKeys, maxOwnerRows); err != nil {
			return nil, fmt.Errorf("parent spec: %w", err)
		}
		parent = ra.parent.ID()
		rep.Cost, rep.Factor, rep.Parent = cal.Cost, cal.Factor, parent
		if !cal.NoiseOff() {
			c2 := math.Ldexp(float64(pr.Bound), -int(pr.Bits))
			rep.SigmaY, rep.SigmaV = cal.SigmaY()/(c2*c2), cal.SigmaV()/c2
			rep.CostEpsilon = cal.Cost.Epsilon(pj.Delta)
		}
	}
	resetPeakRSS()
	start := time.Now()

	var mean power.Mean
	var q *power.QMatrix
	var yc *mat.Dense
	for r := 0; r <= pr.Rounds; r++ {
		if r == 1 {
			var q0 *mat.Dense
			if pj.Start != nil {
				q0, err = power.StartFrom(pr, pj.Start)
			} else {
				q0, err = power.Start(pr)
			}
			if err != nil {
				return nil, err
			}
			if q, _, err = power.Quantize(q0, h); err != nil {
				return nil, err
			}
		}
		id := power.RoundID(parent, r, q)
		if ra != nil {
			if r == 0 {
				id = ra.parent.ID() // round 0 is the parent job
			} else if id, err = ra.admit(r, owners, q); err != nil {
				return nil, err
			}
		}
		vals, rs, err := powerRound(p, pr, cal, plan, key, cpk, members, active, userKeys, id, r, q, pj.Rows)
		if err != nil {
			return nil, fmt.Errorf("round %d: %w", r, err)
		}
		t0 := time.Now()
		if r == 0 {
			if mean, err = power.DecodeMean(pr, cal, vals); err != nil {
				return nil, err
			}
		} else {
			if yc, err = power.DecodeRound(pr, q, vals, mean); err != nil {
				return nil, err
			}
			if r < pr.Rounds {
				if q, err = power.Next(pr, yc); err != nil {
					return nil, err
				}
			}
		}
		rs.User += time.Since(t0).Seconds()
		rs.Total += time.Since(t0).Seconds()
		rep.RoundStats = append(rep.RoundStats, rs)
	}
	comps, err := power.Finish(pr, q.Float(), yc)
	if err != nil {
		return nil, err
	}
	rep.SVD = comps
	if rep.Ritz, err = power.FinishRitz(pr, q.Float(), yc); err != nil {
		return nil, err
	}
	rep.Finish = "svd"
	if pj.Start != nil {
		comps, rep.Finish = rep.Ritz, "ritz"
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.PeakRSS = peakRSS()
	rep.Result, rep.Values, rep.Shrink = comps, comps.Values, mean.Shrink
	return rep, nil
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// powerUpload is one owner's upload of a round.
type powerUpload struct {
	cts    []*rlwe.Ciphertext
	proofs [][]byte
}

// powerRound runs round r: the owners' uploads, the proxy's and members'
// steps, and the user's decryption; it returns the released integers.
func powerRound(p he.Params, pr power.Params, cal power.Calibration, plan dp.Plan, key *zk.Key, cpk *rlwe.PublicKey,
	members []*he.Member, active []he.Point, userKeys he.KeyPair, id string, r int, q *power.QMatrix, rows [][][]int64) ([]int64, PowerRound, error) {
	rs := PowerRound{Round: r}
	roundStart := time.Now()
	if q != nil {
		// Every owner checks the public matrix before using it.
		if err := power.CheckQ(q, pr.D, pr.P, pr.QBits); err != nil {
			return nil, rs, err
		}
	}
	owners := len(rows)
	ups := make([]powerUpload, owners)
	statT, encT := make([]float64, owners), make([]float64, owners)
	ownerW, err := plan.Weight(dp.RoleOwner, owners)
	if err != nil {
		return nil, rs, err
	}
	errs := make([]error, owners)
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for o := range owners {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			t0 := time.Now()
			acc, err := power.NewAccumulator(pr, q, int64(len(rows[o])))
			if err == nil {
				err = acc.Add(rows[o])
			}
			if err != nil {
				errs[o] = err
				return
			}
			vals := acc.Values()
			noise, err := cal.Noise(r, ownerW, nil)
			if err == nil {
				for i, x := range noise {
					vals[i] += x
				}
			}
			statT[o] = time.Since(t0).Seconds()
			t1 := time.Now()
			enc, err := he.NewEncryptor(p, cpk)
			if err != nil {
				errs[o] = err
				return
			}
			cts, wits, err := enc.EncryptWitnessed(vals)
			if err != nil {
				errs[o] = err
				return
			}
			proofs, _, err := job.ProveUpload(p, key, id, ownerName(o), cts, wits, nil)
			if err != nil {
				errs[o] = err
				return
			}
			ups[o] = powerUpload{cts: cts, proofs: proofs}
			encT[o] = time.Since(t1).Seconds()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, rs, err
	}
	rs.OwnerStat, rs.OwnerEncrypt = median(statT), median(encT)
	rs.Ciphertexts = len(ups[0].cts)
	for i, ct := range ups[0].cts {
		rs.Bytes += int64(len(p.Codecs().Ciphertext.Marshal(ct)) + len(ups[0].proofs[i]))
	}

	// Proxy: verify every proof (as received over the wire), sum, noise,
	// blind.
	t0 := time.Now()
	n := len(ups[0].cts)
	sum := p.NewCiphertexts(n)
	if err := verifyAll(p, key, id, ups, nil); err != nil {
		return nil, rs, err
	}
	for _, u := range ups {
		for j, ct := range u.cts {
			p.AddInto(sum[j], ct)
		}
	}
	proxyW, err := plan.Weight(dp.RoleProxy, owners)
	if err != nil {
		return nil, rs, err
	}
	vlen := pr.Len()
	if r == 0 {
		vlen = pr.Round0Len()
	}
	proxyNoise, err := cal.Noise(r, proxyW, nil)
	if err != nil {
		return nil, rs, err
	}
	masks, err := job.Blind(p, sum, proxyNoise, nil)
	if err != nil {
		return nil, rs, err
	}
	rs.Proxy = time.Since(t0).Seconds()

	// Members: each verifies every proof and the sum's c1, adds its noise
	// share and its key-switch share.
	t0 = time.Now()
	cspW, err := plan.Weight(dp.RoleCSP, owners)
	if err != nil {
		return nil, rs, err
	}
	var shares [][]*mhe.PublicKeySwitchShare
	for _, pt := range active {
		if err := verifyAll(p, key, id, ups, sum); err != nil {
			return nil, rs, fmt.Errorf("member %d: %w", pt, err)
		}
		noise, err := cal.Noise(r, cspW, nil)
		if err != nil {
			return nil, rs, err
		}
		sh, err := job.SwitchShares(p, members[pt-1], cpk, id, sum, userKeys.Public, active, noise)
		if err != nil {
			return nil, rs, fmt.Errorf("member %d: %w", pt, err)
		}
		shares = append(shares, sh)
	}
	rs.Members = time.Since(t0).Seconds() / float64(len(active))

	// Proxy: combine and unblind; user: decrypt.
	t0 = time.Now()
	switched, err := job.CombineShares(p, cpk, id, sum, shares)
	if err != nil {
		return nil, rs, err
	}
	if err := job.Unblind(p, switched, masks); err != nil {
		return nil, rs, err
	}
	vals, err := he.NewDecryptor(p, userKeys.Secret).DecryptSwitched(switched, vlen)
	if err != nil {
		return nil, rs, err
	}
	rs.User = time.Since(t0).Seconds()
	rs.Total = time.Since(roundStart).Seconds()
	return vals, rs, nil
}

// verifyAll verifies every upload's proofs (after a round trip through the
// wire codec) and, when sum is given, that each summed c1 is the sum of the
// owners' c1 (the proxy's noise and mask touch c0 only).
func verifyAll(p he.Params, key *zk.Key, id string, ups []powerUpload, sum []*rlwe.Ciphertext) error {
	var c1 []*rlwe.Ciphertext
	if sum != nil {
		c1 = p.NewCiphertexts(len(sum))
	}
	for o, u := range ups {
		backs := make([]*rlwe.Ciphertext, len(u.cts))
		for j, ct := range u.cts {
			back, err := p.Codecs().Ciphertext.Unmarshal(p.Codecs().Ciphertext.Marshal(ct))
			if err != nil {
				return err
			}
			backs[j] = back
			if c1 != nil {
				p.AddInto(c1[j], back)
			}
			first, ends := job.ProofEnds(j, len(u.cts))
			if !ends {
				continue
			}
			if _, err := job.VerifyCiphertexts(p, key, id, ownerName(o), first, len(u.cts), backs[first:j+1], u.proofs[j], false); err != nil {
				return fmt.Errorf("owner %s: %w", ownerName(o), err)
			}
		}
	}
	for j := range c1 {
		if !bytes.Equal(p.AppendPoly(nil, c1[j].Value[1]), p.AppendPoly(nil, sum[j].Value[1])) {
			return fmt.Errorf("ciphertext %d of the sum is not the sum of the named owners' uploads", j)
		}
	}
	return nil
}

func ownerName(o int) string { return fmt.Sprintf("owner-%03d", o) }

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// resetPeakRSS resets the kernel's peak resident size of this process
// (Linux: clear_refs 5), so that peakRSS measures from here.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns the process's peak resident size in bytes (VmHWM), 0 when
// unknown.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}

// GenotypeRun is `fedpca simulate --genotypes`: a Balding-Nichols cohort,
// each owner's part written as a PLINK fileset and read back by the owner
// (source.OpenPLINK), standardised with the public reference frequencies
// and clipped to C = ClipFactor sqrt(d), then a power job and its
// evaluation against the central PCA.
type GenotypeRun struct {
	Cohort     GenotypeParams
	Job        PowerJob
	ClipFactor float64
	// Dir receives the owners' filesets (owner-NNN.bed/.bim/.fam).
	Dir string
	// CentralIters caps the central baseline's iterations (0: 200).
	CentralIters int
}

// GenotypeReport is what a genotype run measured.
type GenotypeReport struct {
	Cohort   GenotypeParams `json:"cohort"`
	Clip     float64        `json:"clip_norm"`
	Clipped  float64        `json:"fraction_rows_clipped"`
	Job      *PowerReport   `json:"job"`
	Accuracy *PowerAccuracy `json:"accuracy"`
	// SVDAccuracy and RitzAccuracy are those of the two ways of taking
	// the components from the last release (power.Finish,
	// power.FinishRitz; Accuracy is the one the job's rule chose: Ritz when
	// it starts from a public matrix); PanelAccuracy is that of the public
	// panel's own top k components, which use no private data (nil without
	// a panel).
	SVDAccuracy   *PowerAccuracy `json:"svd_accuracy"`
	RitzAccuracy  *PowerAccuracy `json:"ritz_accuracy"`
	PanelAccuracy *PowerAccuracy `json:"panel_accuracy,omitempty"`
	// PLINKBytes is the size of one owner's .bed file.
	PLINKBytes int64 `json:"plink_bytes_per_owner"`
}

// cohort simulates the cohort and writes each owner's part as a PLINK
// fileset in Dir (none without Dir), returning their prefixes; it sets the
// defaults (clip factor 1, g = 8).
func (gr *GenotypeRun) cohort() (*GenotypeCohort, []string, error) {
	if gr.ClipFactor == 0 {
		gr.ClipFactor = 1
	}
	if gr.Job.Bits == 0 {
		gr.Job.Bits = 8
	}
	c, err := BaldingNichols(gr.Cohort)
	if err != nil || gr.Dir == "" {
		return c, nil, err
	}
	var prefixes []string
	for o, g := range c.Owners {
		prefix := filepath.Join(gr.Dir, ownerName(o))
		if err := g.WritePLINK(prefix); err != nil {
			return nil, nil, err
		}
		prefixes = append(prefixes, prefix)
	}
	return c, prefixes, nil
}

// Run runs it.
func (gr GenotypeRun) Run() (*GenotypeReport, error) {
	c, prefixes, err := gr.cohort()
	if err != nil {
		return nil, err
	}
	out := &GenotypeReport{Cohort: gr.Cohort}
	for o, prefix := range prefixes {
		if c.Owners[o], err = source.OpenPLINK(prefix); err != nil {
			return nil, err
		}
		if st, err := os.Stat(prefix + ".bed"); err == nil && o == 0 {
			out.PLINKBytes = st.Size()
		}
	}
	pj := gr.Job
	pj.D = gr.Cohort.D
	pj.Bound = ClipBound(pj.Bits, pj.D, gr.ClipFactor)
	out.Clip = gr.ClipFactor * math.Sqrt(float64(pj.D))
	if pj.Rows, err = StandardiseCohort(c, pj.Bits, pj.Bound); err != nil {
		return nil, err
	}
	// The share of rows at the clip bound (a row the clip scaled ends
	// within rounding of it).
	var clipped, n int
	b2 := float64(pj.Bound) * float64(pj.Bound)
	for _, rows := range pj.Rows {
		for _, q := range rows {
			s := 0.0
			for _, x := range q {
				s += float64(x) * float64(x)
			}
			if s > b2*(1-1e-3) {
				clipped++
			}
			n++
		}
	}
	out.Clipped = float64(clipped) / float64(n)
	if c.PanelRows != nil {
		// Q_1 from the public panel's top p components.
		g, err := source.NewGenotypes(make([]string, len(c.PanelRows)), c.Owners[0].Variants, c.PanelRows)
		if err != nil {
			return nil, err
		}
		panel, err := StandardiseCohort(&GenotypeCohort{Owners: []*source.Genotypes{g}, Reference: c.Reference}, pj.Bits, pj.Bound)
		if err != nil {
			return nil, err
		}
		cp, err := centralPCA(newDataMatrix(panel, pj.D, pj.Bits), pj.K+pj.Oversample, "panel", 0)
		if err != nil {
			return nil, err
		}
		pj.Start = cp.U
	}
	if out.Job, err = pj.Run(); err != nil {
		return nil, err
	}
	ws := []*mat.Dense{out.Job.SVD.W, out.Job.Ritz.W}
	if pj.Start != nil {
		ws = append(ws, mat.DenseCopyOf(pj.Start.Slice(0, pj.D, 0, pj.K)))
	}
	accs, err := EvaluatePower(pj.Rows, pj.D, pj.Bits, ws, pj.K, c.Pops, pj.Seed, gr.CentralIters)
	if err != nil {
		return nil, err
	}
	out.SVDAccuracy, out.RitzAccuracy, out.Accuracy = accs[0], accs[1], accs[0]
	if pj.Start != nil {
		out.PanelAccuracy, out.Accuracy = accs[2], accs[1]
	}
	if v := out.Accuracy.CentralValues; len(v) > pj.K && !out.Job.NoiseOff {
		c2 := out.Clip * out.Clip
		out.Job.HPBound = power.Bound(out.Job.SigmaY*c2, pj.D, pj.K+pj.Oversample, pj.Rounds, 0.05, v[pj.K-1]-v[pj.K])
	}
	return out, nil
}

// RunDaemons runs the cohort's power-method job through the daemons, as a
// deployment would: each owner's part written as a PLINK fileset that its
// owner daemon reads (plink://), the schema of the public reference
// frequencies (schema.Genotypes, clip ClipFactor sqrt(D), Job.Bits or 8;
// variants monomorphic in the reference left out), a committee of
// Job.CSPs with Job.Down (points) crashed, and the user's run
// (Simulator.RunPower), against the central PCA of the rows as the owners
// map them. With a public panel the job starts from the panel's top p
// components (mapped by the same schema) and the comparison measures the
// panel's own top k too; without one it starts from its seed.
func (gr GenotypeRun) RunDaemons(ctx context.Context, logger hclog.Logger) (*PowerComparison, error) {
	if gr.Dir == "" {
		return nil, fmt.Errorf("genotypes: the daemons read the owners' filesets from a directory (Dir)")
	}
	c, prefixes, err := gr.cohort()
	if err != nil {
		return nil, err
	}
	var sources []string
	for _, prefix := range prefixes {
		sources = append(sources, "plink://"+prefix)
	}
	names := make([]string, gr.Cohort.D)
	for j, v := range c.Owners[0].Variants {
		names[j] = v.ID
	}
	bits := gr.Job.Bits
	clip, err := fixedpoint.FromFloat(gr.ClipFactor * math.Sqrt(float64(gr.Cohort.D)))
	if err != nil {
		return nil, err
	}
	sch, _, err := schema.Genotypes("genotypes", names, c.Reference, bits, clip)
	if err != nil {
		return nil, err
	}
	pj := gr.Job
	po := PowerOptions{Rounds: pj.Rounds, Oversample: pj.Oversample, CentralIters: gr.CentralIters}
	for _, p := range pj.Down {
		po.Down = append(po.Down, p-1)
	}
	if c.PanelRows != nil {
		g, err := source.NewGenotypes(make([]string, len(c.PanelRows)), c.Owners[0].Variants, c.PanelRows)
		if err != nil {
			return nil, err
		}
		panel, err := readRows(sch, g.Rows())
		if err != nil {
			return nil, err
		}
		cp, err := centralPCA(newDataMatrix([][][]int64{panel}, sch.D(), bits), pj.K+pj.Oversample, "panel", 0)
		if err != nil {
			return nil, err
		}
		po.Start = cp.U
	}
	sm, err := NewSimulator(ctx, Simulation{Sources: sources, Populations: c.Pops, Schema: sch, CSPs: pj.CSPs, Threshold: pj.Threshold,
		Dir: filepath.Join(gr.Dir, "deployment"), Logger: logger, Seed: gr.Cohort.Seed})
	if err != nil {
		return nil, err
	}
	defer sm.Close()
	return sm.RunPower(ctx, JobOptions{Analysis: "pca", K: pj.K, Epsilon: pj.Epsilon, Delta: pj.Delta, NoNoise: pj.NoNoise, Plan: pj.Plan, Tolerate: pj.Tolerate}, po)
}

// WriteText prints the report: the setup, the privacy account, each round's
// time and bytes, and the accuracy against the central PCA.
func (r *GenotypeReport) WriteText(w io.Writer) {
	j, a := r.Job, r.Accuracy
	fmt.Fprintf(w, "power-method PCA of %d individuals x %d variants (%d populations, F_ST %.3g, %.1f%% missing), %d owners\n",
		r.Cohort.N, r.Cohort.D, r.Cohort.Populations, r.Cohort.FST, 100*r.Cohort.Missing, j.Owners)
	fmt.Fprintf(w, "  k = %d, p = %d, T = %d rounds after round 0; g = %d bits, h = %d bits; C = %.4g (%.1f%% of rows clipped)\n",
		j.K, j.P, j.Rounds, j.Bits, j.QBits, r.Clip, 100*r.Clipped)
	fmt.Fprintf(w, "  committee %s; noise plan %s\n", j.Committee, j.Plan)
	if j.NoiseOff {
		fmt.Fprintf(w, "  no noise: not differentially private\n")
	} else {
		fmt.Fprintf(w, "  privacy: the whole job (all %d rounds) is (%.4g, %.3g)-DP, charged once: rho %.4g, discrete correction %.2g; sigma per entry %.4g C^2 (rounds), %.4g C (v); replacement factor %.3f\n",
			j.Rounds+1, j.CostEpsilon, j.Delta, float64(j.Cost.Rho), float64(j.Cost.Eta), j.SigmaY, j.SigmaV, j.Factor)
		fmt.Fprintf(w, "  Hardt-Price bound at the central gap (lambda_k - lambda_k+1): e = %.3g (>= 1 promises nothing)\n", j.HPBound)
	}
	fmt.Fprintf(w, "  round  cts/owner  MB/owner  owner stat s  owner enc+proofs s  proxy s  member s  user s  total s\n")
	for _, s := range j.RoundStats {
		fmt.Fprintf(w, "  %5d  %9d  %8.2f  %12.2f  %18.2f  %7.2f  %8.2f  %6.2f  %7.2f\n",
			s.Round, s.Ciphertexts, float64(s.Bytes)/1e6, s.OwnerStat, s.OwnerEncrypt, s.Proxy, s.Members, s.User, s.Total)
	}
	fmt.Fprintf(w, "  end to end %.1f s, peak resident memory %.2f GB (the whole process: every party, the rows)\n", j.Seconds, float64(j.PeakRSS)/1e9)
	fmt.Fprintf(w, "accuracy of the components (%s) against the central PCA of the same rows (%d iterations, last relative change %.1g, %.1f s):\n", j.Finish, a.CentralIters, a.CentralChange, a.CentralSeconds)
	fmt.Fprintf(w, "  captured variance of the top %d: %.4f of the central's\n", j.K, a.CapturedRatio)
	fmt.Fprintf(w, "  principal angles (deg): %s\n", fmtFloats(a.Angles, "%.3g"))
	fmt.Fprintf(w, "  populations by nearest centroid on the top 2 components: %.4f (central %.4f)\n", a.Separation, a.CentralSeparation)
	fmt.Fprintf(w, "  eigenvalues: %s\n  central:     %s\n", fmtFloats(j.Values, "%.5g"), fmtFloats(a.CentralValues, "%.5g"))
	for _, x := range []struct {
		name string
		a    *PowerAccuracy
	}{{"top k singular vectors of the last release (svd)", r.SVDAccuracy}, {"Rayleigh-Ritz in the last public matrix's span (ritz)", r.RitzAccuracy},
		{"the public panel's own top k (no private data)", r.PanelAccuracy}} {
		if x.a != nil {
			fmt.Fprintf(w, "  %s: captured %.4f, separation %.4f, principal angles (deg) %s\n", x.name, x.a.CapturedRatio, x.a.Separation, fmtFloats(x.a.Angles, "%.3g"))
		}
	}
}

func fmtFloats(xs []float64, f string) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf(f, x)
	}
	return strings.Join(parts, " ")
}
