package source

import (
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/power"
	"github.com/fedpca/fedpca/protocol/schema"
)

// TestFrequencies: a fileset's allele-1 frequencies are PLINK's own (its
// --freq output, to its 4 decimals), and the .frq reads back to them.
func TestFrequencies(t *testing.T) {
	g, err := OpenPLINK(filepath.Join("testdata", "plink", "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := g.Frequencies()
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join("testdata", "plink", "fixture.frq"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ref, want, err := ReadFrq(f)
	if err != nil {
		t.Fatal(err)
	}
	aligned, err := AlignFrequencies(g.Variants, ref, want)
	if err != nil {
		t.Fatal(err)
	}
	tol := big.NewRat(5, 100000)
	for j := range got {
		diff := new(big.Rat).Sub(got[j], aligned[j])
		if diff.Abs(diff).Cmp(tol) > 0 {
			t.Errorf("variant %s: frequency %s, PLINK %s", g.Variants[j].ID, got[j].FloatString(6), aligned[j].FloatString(4))
		}
	}
	// The panel path gives the fileset's own frequencies.
	fromPanel, err := PanelFrequencies(g.Variants, filepath.Join("testdata", "plink", "fixture"), "")
	if err != nil {
		t.Fatal(err)
	}
	for j := range got {
		if fromPanel[j].Cmp(got[j]) != 0 {
			t.Fatalf("variant %d: panel %v, fileset %v", j, fromPanel[j], got[j])
		}
	}

	// Swapped alleles give 1 - p; a variant the reference lacks, or with
	// other alleles, is named.
	v := Variant{ID: "rs1", Allele1: "A", Allele2: "G"}
	p, err := AlignFrequencies([]Variant{v}, []Variant{{ID: "rs1", Allele1: "G", Allele2: "A"}}, []*big.Rat{big.NewRat(1, 4)})
	if err != nil || p[0].Cmp(big.NewRat(3, 4)) != 0 {
		t.Errorf("swapped alleles: %v, %v; want 3/4", p, err)
	}
	for _, c := range []struct {
		ref  Variant
		want string
	}{
		{Variant{ID: "rs2", Allele1: "A", Allele2: "G"}, `variant "rs1" (study variant 1) is not in the reference`},
		{Variant{ID: "rs1", Allele1: "A", Allele2: "T"}, `variant "rs1": alleles A/G in the study, A/T in the reference`},
	} {
		if _, err := AlignFrequencies([]Variant{v}, []Variant{c.ref}, []*big.Rat{big.NewRat(1, 4)}); err == nil || err.Error() != c.want {
			t.Errorf("reference %+v: %v, want %q", c.ref, err, c.want)
		}
	}
	for _, bad := range []string{"CHR SNP A2 A1 MAF NCHROBS\n", " CHR SNP A1 A2 MAF NCHROBS\n 1 rs1 A G 1.5 60\n", "CHR SNP A1 A2 MAF NCHROBS\n"} {
		if _, _, err := ReadFrq(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadFrq(%q) accepted", bad)
		}
	}
	if _, err := PanelFrequencies(g.Variants, "", ""); err == nil {
		t.Error("no reference accepted")
	}
}

// TestGenotypeSchema: the schema a panel's frequencies give reads a PLINK
// fileset as the power job's exact standardiser maps it (within one unit of
// 2^-g where the schema's 12-digit scale rounds the other way), missing
// calls to 0, and takes more features than a d x d job may.
func TestGenotypeSchema(t *testing.T) {
	g, freqs, names := fixtureFrequencies(t)
	freqs[0] = big.NewRat(0, 1) // a variant monomorphic in the panel
	const bits = 8
	clip := fixedpoint.MustDecimal("100")
	sch, mono, err := schema.Genotypes("fixture", names, freqs, bits, clip)
	if err != nil {
		t.Fatal(err)
	}
	if len(mono) != 1 || mono[0] != names[0] || sch.D() != g.M()-1 || sch.Features[0].Name != names[1] {
		t.Fatalf("monomorphic %v, %d features of %d variants", mono, sch.D(), g.M())
	}
	bound, err := fixedpoint.Bound(clip, bits)
	if err != nil {
		t.Fatal(err)
	}
	std, err := power.NewStandardiser(freqs, bits, bound)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := sch.NewRowReader(g.Rows(), false)
	if err != nil {
		t.Fatal(err)
	}
	dos := make([]int8, g.M())
	want := make([]int64, g.M())
	i, off := 0, 0
	for row, err := range rd.All() {
		if err != nil {
			t.Fatal(err)
		}
		g.Row(i, dos)
		if _, err := std.Map(dos, want); err != nil {
			t.Fatal(err)
		}
		if want[0] != 0 {
			t.Fatalf("individual %d: the standardiser maps the monomorphic variant to %d", i, want[0])
		}
		for f, x := range row.Values {
			j := f + 1
			if d := x - want[j]; d < -1 || d > 1 {
				t.Fatalf("individual %d, variant %d (dosage %d): schema %d, standardiser %d", i, j, dos[j], x, want[j])
			} else if d != 0 {
				off++
			}
			if dos[j] == Missing && x != 0 {
				t.Fatalf("individual %d, variant %d (missing): %d, want 0", i, j, x)
			}
		}
		i++
	}
	if i != g.N() || off > g.N()*g.M()/100 {
		t.Errorf("%d rows of %d; %d values one unit off", i, g.N(), off)
	}

	// More variants than a d x d job takes (job.MaxScatterFeatures).
	many := make([]string, 5000)
	mf := make([]*big.Rat, len(many))
	for j := range many {
		many[j], mf[j] = fmt.Sprintf("v%04d", j), big.NewRat(int64(j%99+1), 100)
	}
	if s, _, err := schema.Genotypes("many", many, mf, bits, clip); err != nil || s.D() != len(many) {
		t.Fatalf("5,000 variants: %v", err)
	}
	if _, _, err := schema.Genotypes("bad", names[:1], []*big.Rat{big.NewRat(3, 2)}, bits, clip); err == nil {
		t.Error("a frequency of 1.5 accepted")
	}
}

// TestPanelStart: the panel's start has orthonormal columns spanning the
// top p eigenvectors of the panel's centred scatter under the schema.
func TestPanelStart(t *testing.T) {
	g, freqs, names := fixtureFrequencies(t)
	sch, _, err := schema.Genotypes("fixture", names, freqs, 8, fixedpoint.MustDecimal("100"))
	if err != nil {
		t.Fatal(err)
	}
	const p = 4
	w, err := PanelStart(g, sch, p)
	if err != nil {
		t.Fatal(err)
	}
	var wtw mat.Dense
	wtw.Mul(w.T(), w)
	if !mat.EqualApprox(&wtw, eye(p), 1e-10) {
		t.Fatalf("W^T W = %v", mat.Formatted(&wtw))
	}
	// The centred scatter's top p eigenvalues are what W captures.
	rows, err := sch.NewRowReader(g.Rows(), false)
	if err != nil {
		t.Fatal(err)
	}
	d := sch.D()
	x := mat.NewDense(g.N(), d, nil)
	i := 0
	for row, err := range rows.All() {
		if err != nil {
			t.Fatal(err)
		}
		for j, v := range row.Values {
			x.Set(i, j, float64(v))
		}
		i++
	}
	for j := range d {
		m := mat.Sum(x.ColView(j)) / float64(i)
		for r := range i {
			x.Set(r, j, x.At(r, j)-m)
		}
	}
	var s mat.SymDense
	s.SymOuterK(1, x.T())
	var eig mat.EigenSym
	if !eig.Factorize(&s, false) {
		t.Fatal("eigen")
	}
	vals := eig.Values(nil)
	top := 0.0
	for _, v := range vals[len(vals)-p:] {
		top += v
	}
	var xw mat.Dense
	xw.Mul(x, w)
	if got := mat.Norm(&xw, 2) * mat.Norm(&xw, 2); math.Abs(got-top) > 1e-8*top {
		t.Errorf("W captures %v of the centred scatter, its top %d eigenvalues sum to %v", got, p, top)
	}
	if _, err := PanelStart(g, sch, g.N()+1); err == nil {
		t.Error("more columns than individuals accepted")
	}
}

func eye(n int) *mat.Dense {
	m := mat.NewDense(n, n, nil)
	for i := range n {
		m.Set(i, i, 1)
	}
	return m
}

// fixtureFrequencies opens the PLINK fixture with its own frequencies and
// variant names.
func fixtureFrequencies(t *testing.T) (*Genotypes, []*big.Rat, []string) {
	t.Helper()
	g, err := OpenPLINK(filepath.Join("testdata", "plink", "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	freqs, err := g.Frequencies()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, g.M())
	for j, v := range g.Variants {
		names[j] = v.ID
	}
	return g, freqs, names
}
