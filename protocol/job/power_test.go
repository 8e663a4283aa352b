package job

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/power"
	"github.com/fedpca/fedpca/protocol/schema"
)

// TestPowerSpec: a parent spec checks (the composed cost within its budget,
// every round inside the plaintext range); what a power job cannot be is
// refused; a spec without the power part keeps its encoding (older IDs
// unchanged).
func TestPowerSpec(t *testing.T) {
	p := heParams(t)
	c := he.Committee{N: 3, Threshold: 2}
	_, cpk := ceremony(t, p, c)
	user := he.GenerateKeyPair(p)
	ds := loadDataset(t, "wine", 16)
	plain := newSpec(ds.schema, p, PCA, 5, c, cpk, user, false)
	if bytes.Contains(plain.Canonical(), []byte("power")) {
		t.Fatalf("a statistics spec's encoding mentions power: %s", plain.Canonical())
	}
	parent := *plain
	parent.K = 3
	parent.Power = &PowerSpec{Oversample: 5, Rounds: 3, Seed: "wine", QBits: 12, RoundSeconds: 60}
	if parent.ID() == plain.ID() {
		t.Fatal("the power part does not change the job ID")
	}
	if err := parent.Check(ds.schema, p); err != nil {
		t.Fatal(err)
	}
	cal, err := parent.PowerCalibration(ds.schema)
	if err != nil {
		t.Fatal(err)
	}
	if e := cal.Cost.Epsilon(parent.Delta); e > parent.Epsilon || e < 0.99*parent.Epsilon {
		t.Errorf("the composed cost certifies epsilon %v for a budget of %v", e, parent.Epsilon)
	}
	for _, tc := range []struct {
		name string
		edit func(s *Spec)
		want string
	}{
		{"dca", func(s *Spec) { s.Analysis = DCA }, "PCA only"},
		{"components", func(s *Spec) {
			s.Release, s.ResultKey, s.Randomness = ReleaseComponents, strings.Repeat("ab", 32), RandomnessMembers
		}, "releases its rounds only"},
		{"k above p", func(s *Spec) { s.K = 20 }, "p = 25 columns exceed d = 13"},
		{"rounds", func(s *Spec) { s.Power.Rounds = 0 }, "rounds = 0"},
		{"matrix bits", func(s *Spec) { s.Power.QBits = 40 }, "matrix bits h = 40"},
		{"start", func(s *Spec) { s.Power.Start = "xyz" }, "start: want 64"},
		{"round window", func(s *Spec) { s.Power.RoundSeconds = 0 }, "round_seconds 0"},
		{"overflow", func(s *Spec) { s.Power.QBits = 20; s.MaxOwnerRows = 1 << 20; s.MaxRows = 5 << 20 }, "does not fit"},
	} {
		s := parent
		ps := *parent.Power
		s.Power = &ps
		tc.edit(&s)
		if err := s.Check(ds.schema, p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}

	// A genotype schema wider than a d x d job takes: the power job
	// checks under it, the statistics release is refused, saying why.
	names := make([]string, MaxScatterFeatures+1)
	freqs := make([]*big.Rat, len(names))
	for j := range names {
		names[j], freqs[j] = fmt.Sprintf("rs%d", j), big.NewRat(int64(j%9+1), 10)
	}
	wide, _, err := schema.Genotypes("cohort", names, freqs, 8, fixedpoint.MustDecimal("64"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Spec{&parent, plain} {
		s.Dataset, s.SchemaHash, s.Standardize = wide.ID, wide.HashHex(), false
	}
	if err := parent.Check(wide, p); err != nil {
		t.Errorf("a power job on %d variants: %v", wide.D(), err)
	}
	if err := plain.Check(wide, p); err == nil || !strings.Contains(err.Error(), "the d x d statistics take at most 4096") {
		t.Errorf("a statistics release on %d features: %v", wide.D(), err)
	}
}

// TestRoundSpec: a round is admitted only under its parent, signed by the
// parent's user, after the last round the party took part in and within
// T, with the matrix it names, which must pass the Gram test; its ID is the
// one the owners' proofs bind; its encoding parses back only canonical.
func TestRoundSpec(t *testing.T) {
	p := heParams(t)
	c := he.Committee{N: 3, Threshold: 2}
	_, cpk := ceremony(t, p, c)
	ds := loadDataset(t, "wine", 16)
	parent := newSpec(ds.schema, p, PCA, 5, c, cpk, he.GenerateKeyPair(p), false)
	parent.K = 3
	parent.Power = &PowerSpec{Oversample: 5, Rounds: 2, Seed: "wine", QBits: 12, RoundSeconds: 60}
	other := *parent
	other.Nonce = "other"
	pr, err := parent.PowerParams(ds.schema)
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
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	stranger, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	r1 := NewRoundSpec(parent, 1, q)
	sig, err := r1.Sign(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Admit(parent, ds.schema, sig, key.Public(), 0, q); err != nil {
		t.Fatal(err)
	}
	if r1.ID() != power.RoundID(parent.ID(), 1, q) || r1.ID() == parent.ID() {
		t.Error("the round's ID is not power.RoundID of its parent, number and matrix")
	}
	bad := &power.QMatrix{D: q.D, P: q.P, H: q.H, Data: append([]int64(nil), q.Data...)}
	for i := range q.D {
		bad.Data[i*q.P+1] = bad.Data[i*q.P] // two equal columns: ||Qq||_2 above 2^h
	}
	rBad := NewRoundSpec(parent, 1, bad)
	sigBad, _ := rBad.Sign(key)
	r3 := RoundSpec{Parent: parent.ID(), Round: 3, QHash: r1.QHash}
	sig3, _ := r3.Sign(key)
	r2 := RoundSpec{Parent: parent.ID(), Round: 2, QHash: r1.QHash}
	sig2, _ := r2.Sign(key)
	if err := r2.Admit(parent, ds.schema, sig2, key.Public(), 0, q); err != nil {
		t.Errorf("a party that missed round 1 may answer round 2: %v", err)
	}
	if back, err := ParseRoundSpec(r1.Canonical()); err != nil || back != r1 {
		t.Errorf("round spec round trip: %v, %+v", err, back)
	}
	for _, b := range []string{`{"parent":"` + r1.Parent + `","round":1,"q_hash":"` + r1.QHash + `","x":1}`, ` ` + string(r1.Canonical()),
		`{"parent":"` + r1.Parent + `","round":0,"q_hash":"` + r1.QHash + `"}`} {
		if _, err := ParseRoundSpec([]byte(b)); err == nil {
			t.Errorf("round spec %s parsed", b)
		}
	}
	sigStranger, _ := r1.Sign(stranger)
	for _, tc := range []struct {
		name   string
		r      RoundSpec
		parent *Spec
		sig    []byte
		after  int
		q      *power.QMatrix
		want   string
	}{
		{"another parent", r1, &other, sig, 0, q, "names parent"},
		{"not the user's signature", r1, parent, sigStranger, 0, q, "user signature"},
		{"a round taken part in", r1, parent, sig, 1, q, "not after round 1"},
		{"going back", r1, parent, sig, 2, q, "not after round 2"},
		{"past T", r3, parent, sig3, 2, q, "rounds 1 to 2"},
		{"another matrix", r1, parent, sig, 0, bad, "hash is not the one"},
		{"a matrix above 2^h", rBad, parent, sigBad, 0, bad, "Gram row"},
	} {
		if err := tc.r.Admit(tc.parent, ds.schema, tc.sig, key.Public(), tc.after, tc.q); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
