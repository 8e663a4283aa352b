package job

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/he"
)

func TestParseSpec(t *testing.T) {
	p := heParams(t)
	ds := loadDataset(t, "wine", 16)
	user := he.GenerateKeyPair(p)
	_, cpk := ceremony(t, p, he.Committee{N: 1, Threshold: 1})
	s := newSpec(ds.schema, p, DCA, 3, he.Committee{N: 1, Threshold: 1}, cpk, user, false)
	b := s.Canonical()
	back, err := ParseSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID() != s.ID() {
		t.Fatal("parsed spec has another ID")
	}
	for name, bad := range map[string][]byte{
		"not canonical": bytes.Replace(b, []byte(`"k":0`), []byte(`"k": 0`), 1),
		"unknown field": bytes.Replace(b, []byte(`{"version"`), []byte(`{"x":1,"version"`), 1),
		"trailing":      append(append([]byte{}, b...), []byte(" {}")...),
		"invalid":       bytes.Replace(b, []byte(`"epsilon":1`), []byte(`"epsilon":-1`), 1),
		"not json":      []byte("spec"),
		"too large":     bytes.Repeat([]byte(" "), MaxSpecBytes+1),
	} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestProjectCSV(t *testing.T) {
	p := heParams(t)
	ds := loadDataset(t, "wine", 16)
	user := he.GenerateKeyPair(p)
	c := he.Committee{N: 1, Threshold: 1}
	members, cpk := ceremony(t, p, c)
	s := newSpec(ds.schema, p, DCA, 2, c, cpk, user, true)
	s.MinOwners = 1
	if err := s.SetOwners(keyed(ownerNames(1)...)); err != nil {
		t.Fatal(err)
	}
	if err := s.SetOwnerRows(20_000); err != nil {
		t.Fatal(err)
	}
	res, _, _ := runProtocol(t, p, runConfig{spec: s, sch: ds.schema, ownerCSVs: []string{ds.csv()}, committee: c, members: members, cpk: cpk, active: []he.Point{1}}, user)
	var out bytes.Buffer
	var seen []string
	n, err := ProjectCSV(res, ds.schema, strings.NewReader(ds.csv()), &out, func(coords []float64, class string) {
		seen = append(seen, fmt.Sprintf("%s,%s,%s", strconv.FormatFloat(coords[0], 'g', -1, 64), strconv.FormatFloat(coords[1], 'g', -1, 64), class))
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if n != len(ds.rows) || len(lines) != n+1 || lines[0] != "component_1,component_2,label" {
		t.Fatalf("%d rows, %d lines, header %q", n, len(lines), lines[0])
	}
	if len(seen) != n || seen[0] != lines[1] || seen[n-1] != lines[n] {
		t.Fatalf("each saw %d rows, first %q (CSV %q)", len(seen), seen[0], lines[1])
	}
	other := *res
	for _, h := range []string{strings.Repeat("0", 64), "", "abc"} {
		other.SchemaHash = h
		if _, err := ProjectCSV(&other, ds.schema, strings.NewReader(ds.csv()), &out, nil); err == nil {
			t.Errorf("result for schema %q accepted", h)
		}
	}
}

// TestQuality: the noise scales of a result, and warnings exactly for the
// PCA components whose eigenvalue or eigengap is below the noise's spectral
// norm (2 sqrt(d) sigma_R = 4 here).
func TestQuality(t *testing.T) {
	res := &Result{NoisyN: 100, Privacy: Privacy{SigmaTotal: BlockValues{R: 1, V: 2, N: 3}},
		Components: &analysis.Components{Analysis: analysis.AnalysisPCA, Eigenvalues: []float64{100, 99.9, 10, 1}, AllEigenvalues: []float64{100, 99.9, 10, 1}}}
	q, _ := quality(res, analysis.Scatters{}, nil, 4, 1)
	if q.NoisyNStd != 3 || q.MeanStd != 0.02 || q.EntryStd != 1 || q.NoiseSpectralNorm != 4 || math.Abs(q.EigenvalueStd-math.Sqrt2) > 1e-15 {
		t.Errorf("scales %+v", q)
	}
	var warned []string
	for _, w := range q.Warnings {
		warned = append(warned, w[:len("component 1")])
	}
	if strings.Join(warned, ",") != "component 1,component 2,component 4" {
		t.Errorf("warnings %q", q.Warnings)
	}
	res.NoisyN = 5
	if q, _ := quality(res, analysis.Scatters{}, nil, 4, 1); !strings.Contains(q.Warnings[0], "noisy_n") {
		t.Errorf("a count within its noise: %q", q.Warnings)
	}
	res.Privacy.NoNoise = true
	if q, _ := quality(res, analysis.Scatters{}, nil, 4, 1); q != nil {
		t.Error("a result without noise has a quality")
	}
}

// TestSpecVersion: a spec of another release is refused with
// ErrSpecVersion, which the proxy turns into advice at start.
func TestSpecVersion(t *testing.T) {
	s := fuzzSpec()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	s.Version = 1
	if err := s.Validate(); !errors.Is(err, ErrSpecVersion) {
		t.Fatalf("version 1: %v", err)
	}
}

// TestExactComponentsK: a components job without DP noise releases at most
// d - 2 components (the top d - 1 eigenpairs with n leave only the last
// eigenvalue unknown); with noise, up to d.
func TestExactComponentsK(t *testing.T) {
	p := heParams(t)
	sch := loadDataset(t, "wine", 16).schema
	user := he.GenerateKeyPair(p)
	c1 := he.Committee{N: 1, Threshold: 1}
	_, cpk := ceremony(t, p, c1)
	d := sch.D()
	for _, c := range []struct {
		k       int
		noNoise bool
		ok      bool
	}{{d - 2, true, true}, {d - 1, true, false}, {d, true, false}, {d, false, true}} {
		s := newSpec(sch, p, PCA, 2, c1, cpk, user, c.noNoise)
		s.Release, s.K, s.ResultKey, s.Randomness = ReleaseComponents, c.k, strings.Repeat("ab", 32), RandomnessDealer
		err := s.Check(sch, p)
		if c.ok != (err == nil) || (!c.ok && !strings.Contains(err.Error(), fmt.Sprintf("releases at most d - 2 = %d", d-2))) {
			t.Errorf("k = %d of %d, no noise %v: %v", c.k, d, c.noNoise, err)
		}
	}
	if MaxExactK(2) != 0 || MaxExactK(13) != 11 {
		t.Errorf("MaxExactK: %d %d", MaxExactK(2), MaxExactK(13))
	}
}
