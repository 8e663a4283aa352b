package job

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
)

var (
	paramsOnce sync.Once
	testParams he.Params
)

func heParams(t testing.TB) he.Params {
	paramsOnce.Do(func() {
		var err error
		if testParams, err = he.NewDefaultParams(); err != nil {
			panic(err)
		}
	})
	return testParams
}

// reference returns a dataset's golden numbers from the bundled
// reference.json.
func reference(t testing.TB, name string) *datasets.Reference {
	t.Helper()
	r, err := datasets.LoadReference(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// dataset is a CSV split into header and rows.
type dataset struct {
	header []string
	rows   [][]string
	label  int
	schema *schema.Schema
}

func loadDataset(t testing.TB, name string, bits uint) *dataset {
	t.Helper()
	raw, err := datasets.CSV(name)
	if err != nil {
		t.Fatal(err)
	}
	recs, err := csv.NewReader(bytes.NewReader(raw)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Infer(bytes.NewReader(raw), name, "label")
	if err != nil {
		t.Fatal(err)
	}
	sch.Bits = bits
	ds := &dataset{header: recs[0], rows: recs[1:], schema: sch}
	for i, h := range ds.header {
		if h == "label" {
			ds.label = i
		}
	}
	return ds
}

// split deals the rows to n owners: "iid" (shuffled, round robin) or
// "class" (each owner holds whole classes: class c goes to owner c mod n, and
// the owners of one class share its rows).
func (ds *dataset) split(n int, how string, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 7))
	parts := make([][][]string, n)
	switch how {
	case "iid":
		idx := rng.Perm(len(ds.rows))
		for i, j := range idx {
			parts[i%n] = append(parts[i%n], ds.rows[j])
		}
	case "class":
		classes := ds.schema.Classes
		byClass := map[string][][]string{}
		for _, r := range ds.rows {
			byClass[r[ds.label]] = append(byClass[r[ds.label]], r)
		}
		for c, name := range classes {
			// Owners c, c+K, c+2K, ... hold class c; with fewer owners than
			// classes, owner c mod n holds it.
			var holders []int
			for o := c; o < n; o += len(classes) {
				holders = append(holders, o)
			}
			if len(holders) == 0 {
				holders = []int{c % n}
			}
			for i, r := range byClass[name] {
				o := holders[i%len(holders)]
				parts[o] = append(parts[o], r)
			}
		}
	}
	out := make([]string, n)
	for i, p := range parts {
		var b strings.Builder
		w := csv.NewWriter(&b)
		_ = w.Write(ds.header)
		_ = w.WriteAll(p)
		out[i] = b.String()
	}
	return out
}

func (ds *dataset) csv() string {
	var b strings.Builder
	w := csv.NewWriter(&b)
	_ = w.Write(ds.header)
	_ = w.WriteAll(ds.rows)
	return b.String()
}

// ceremony runs the committee's key generation in memory.
func ceremony(t testing.TB, p he.Params, c he.Committee) ([]*he.Member, *rlwe.PublicKey) {
	t.Helper()
	members, pk, err := he.LocalCeremony(p, c, []byte("fedpca e2e ceremony seed 000001"))
	if err != nil {
		t.Fatal(err)
	}
	return members, pk
}

// run is the whole protocol in one process with the parties in slices. It
// returns the user's release, the result and the packed plaintext sum of the
// owners' statistics (computed separately, without encryption).
type runConfig struct {
	spec      *Spec
	sch       *schema.Schema
	ownerCSVs []string
	committee he.Committee
	members   []*he.Member
	cpk       *rlwe.PublicKey
	active    []he.Point
}

func newSpec(sch *schema.Schema, p he.Params, analysisName string, owners int, c he.Committee, cpk *rlwe.PublicKey, user he.KeyPair, noNoise bool) *Spec {
	s := &Spec{
		Version: Version, Dataset: sch.ID, SchemaHash: sch.HashHex(), Analysis: analysisName, K: 0,
		Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanServers, Split: dp.DefaultSplit,
		MinOwners: owners, Deadline: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC),
		HEParams: p.ID(), HEParamsHash: p.Fingerprint(), CommitteeN: c.N, CommitteeThreshold: c.Threshold,
		CommitteeKey: Fingerprint(p.Codecs().PublicKey.Marshal(cpk)),
		User:         "spiffe://fedpca/user/test", UserKey: Fingerprint(p.Codecs().PublicKey.Marshal(user.Public)), Nonce: "e2e",
	}
	if noNoise {
		s.NoNoise, s.Epsilon = true, 0
	}
	if err := s.SetOwners(keyed(ownerNames(owners)...)); err != nil {
		panic(err)
	}
	if err := s.SetOwnerRows(20_000 / int64(max(owners, 1))); err != nil {
		panic(err)
	}
	return s
}

// ownerNames are the IDs of newSpec's owners.
func ownerNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("owner-%03d", i)
	}
	return out
}

func runProtocol(t testing.TB, p he.Params, rc runConfig, user he.KeyPair) (*Result, []int64, []int64) {
	t.Helper()
	s, sch := rc.spec, rc.sch
	if err := s.Check(sch, p); err != nil {
		t.Fatal(err)
	}
	l, err := s.Layout(sch)
	if err != nil {
		t.Fatal(err)
	}
	// Owners: statistics, encryption, upload through the wire codec.
	sum := p.NewCiphertexts(p.Chunks(l.Len()))
	plainSum := make([]int64, l.Len())
	for i, body := range rc.ownerCSVs {
		acc, _, err := ReadStatistics(s, sch, strings.NewReader(body))
		if err != nil {
			t.Fatalf("owner %d: %v", i, err)
		}
		for j, x := range acc.Pack() {
			plainSum[j] += x
		}
		cts, _, err := OwnerCiphertexts(s, sch, p, rc.cpk, acc, nil)
		if err != nil {
			t.Fatal(err)
		}
		for j, ct := range cts {
			back, err := p.Codecs().Ciphertext.Unmarshal(p.Codecs().Ciphertext.Marshal(ct))
			if err != nil {
				t.Fatal(err)
			}
			p.AddInto(sum[j], back)
		}
	}
	// Proxy: its noise share, blinding.
	uploaded := len(rc.ownerCSVs)
	proxyNoise, err := ServerNoise(s, sch, dp.RoleProxy, uploaded, nil)
	if err != nil {
		t.Fatal(err)
	}
	masks, err := Blind(p, sum, proxyNoise, nil)
	if err != nil {
		t.Fatal(err)
	}
	// CSP members: key-switch shares with their noise shares.
	var shares [][]*mhe.PublicKeySwitchShare
	var cspNames []string
	for _, pt := range rc.active {
		noise, err := ServerNoise(s, sch, dp.RoleCSP, uploaded, nil)
		if err != nil {
			t.Fatal(err)
		}
		sh, err := SwitchShares(p, rc.members[pt-1], rc.cpk, s.ID(), sum, user.Public, rc.active, noise)
		if err != nil {
			t.Fatal(err)
		}
		shares = append(shares, sh)
		cspNames = append(cspNames, fmt.Sprintf("csp-%d", pt))
	}
	// Proxy: combine, unblind.
	switched, err := CombineShares(p, rc.cpk, s.ID(), sum, shares)
	if err != nil {
		t.Fatal(err)
	}
	if err := Unblind(p, switched, masks); err != nil {
		t.Fatal(err)
	}
	// User: decrypt, analyse.
	rel, err := DecryptRelease(s, sch, p, user.Secret, switched)
	if err != nil {
		t.Fatal(err)
	}
	included := ownerNames(s.NumOwners)[:uploaded]
	if err := s.CheckNoiseParties(keyed(ownerNames(s.NumOwners)...), included, cspNames); err != nil {
		t.Fatal(err)
	}
	pr, err := PrivacyReport(s, sch, included, cspNames)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Analyze(s, sch, rel, included, pr, p.ID())
	if err != nil {
		t.Fatal(err)
	}
	return res, rel.Pack(), plainSum
}

// relErr is |got - want| relative to |want|, with eigenvalues below floor
// compared absolutely against floor.
func relErr(got, want, floor float64) float64 {
	return math.Abs(got-want) / math.Max(math.Abs(want), floor)
}

// TestEndToEndNoNoise is the in-process end-to-end test of the protocol core:
// owners holding slices of real datasets (5 and 50 owners; iid and
// class-per-owner splits), committees of 1 and of 3 members with threshold 2
// (one member absent at switch time), noise off. The user's decrypted
// release equals the plaintext integer sums exactly, and the PCA eigenvalues
// and DCA generalised eigenvalues match reference.json.
func TestEndToEndNoNoise(t *testing.T) {
	p := heParams(t)
	committees := []struct {
		c      he.Committee
		active []he.Point
	}{
		{he.Committee{N: 1, Threshold: 1}, []he.Point{1}},
		{he.Committee{N: 3, Threshold: 2}, []he.Point{1, 3}}, // member 2 absent
	}
	type ceremonyOut struct {
		members []*he.Member
		cpk     *rlwe.PublicKey
	}
	keys := make([]ceremonyOut, len(committees))
	for i, c := range committees {
		keys[i].members, keys[i].cpk = ceremony(t, p, c.c)
	}
	user := he.GenerateKeyPair(p)
	for _, name := range []string{"wdbc", "wine", "digits", "satellite"} {
		t.Run(name, func(t *testing.T) {
			want := reference(t, name)
			ds := loadDataset(t, name, EndToEndBits)
			combo := 0
			for _, owners := range []int{5, 50} {
				for _, how := range []string{"iid", "class"} {
					ci := combo % len(committees)
					combo++
					parts := ds.split(owners, how, uint64(owners))
					for _, an := range []string{PCA, DCA} {
						spec := newSpec(ds.schema, p, an, owners, committees[ci].c, keys[ci].cpk, user, true)
						rc := runConfig{spec: spec, sch: ds.schema, ownerCSVs: parts, committee: committees[ci].c,
							members: keys[ci].members, cpk: keys[ci].cpk, active: committees[ci].active}
						res, got, plain := runProtocol(t, p, rc, user)
						for i := range plain {
							if got[i] != plain[i] {
								t.Fatalf("%d owners %s %s: release[%d] = %d, plaintext sum %d", owners, how, an, i, got[i], plain[i])
							}
						}
						label := fmt.Sprintf("%s %d owners %s n=%d t=%d %s", name, owners, how, committees[ci].c.N, committees[ci].c.Threshold, an)
						checkAgainstReference(t, label, res, want.PCAEigenvalues, want.DCAEigenvalues)
					}
				}
			}
		})
	}
}

// EndToEndBits is the quantization of the golden test. The fixed-point error
// of a clipped row is about 2^-(g+1) per entry; at g = 22 the eigenvalues
// match reference.json to about 3e-7 (worst case: satellite's smallest DCA
// eigenvalue), inside the 1e-6 tolerance. The default g = 16 matches to
// about 6e-5 on those small generalised eigenvalues and 4e-6 on PCA
// eigenvalues. g = 22 still allows 2^59 / 2^44 = 32768 rows.
const EndToEndBits = 22

// GoldenTolerance is the relative tolerance on eigenvalues against
// reference.json.
const GoldenTolerance = 1e-6

func checkAgainstReference(t *testing.T, label string, res *Result, pca, dca []float64) {
	t.Helper()
	c := res.Components
	switch res.Analysis {
	case PCA:
		all := c.AllEigenvalues
		if len(all) != len(pca) {
			t.Fatalf("%s: %d eigenvalues, reference %d", label, len(all), len(pca))
		}
		floor := 1e-3 * pca[0]
		worst := 0.0
		for i := range pca {
			worst = math.Max(worst, relErr(all[i], pca[i], floor))
		}
		if worst > GoldenTolerance {
			t.Errorf("%s: PCA eigenvalues differ from reference.json by %.2e (relative)", label, worst)
		}
		t.Logf("%s: PCA max relative error %.2e", label, worst)
	case DCA:
		got := c.Eigenvalues
		if len(got) != len(dca) {
			t.Fatalf("%s: %d generalised eigenvalues, reference %d", label, len(got), len(dca))
		}
		worst := 0.0
		for i := range dca {
			worst = math.Max(worst, relErr(got[i], dca[i], 1e-3*dca[0]))
		}
		if worst > GoldenTolerance {
			t.Errorf("%s: DCA generalised eigenvalues differ from reference.json by %.2e (relative)", label, worst)
		}
		t.Logf("%s: DCA max relative error %.2e", label, worst)
	}
	if !sort.SliceIsSorted(c.Eigenvalues, func(i, j int) bool { return c.Eigenvalues[i] > c.Eigenvalues[j] }) {
		t.Errorf("%s: eigenvalues not descending", label)
	}
}
