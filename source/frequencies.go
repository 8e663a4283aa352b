package source

import (
	"fmt"
	"io"
	"math/big"
	"os"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/schema"
)

// Reference allele frequencies for a genotype schema (schema.Genotypes):
// public data, a reference panel's, never the owners' rows.

// Frequencies returns each variant's frequency of allele 1 among the
// fileset's called genotypes (a dosage counts allele 1). A variant with no
// call is an error naming it: its standardisation would be undefined.
func (g *Genotypes) Frequencies() ([]*big.Rat, error) {
	out := make([]*big.Rat, g.M())
	for j, v := range g.Variants {
		var sum, called int64
		for i := range g.N() {
			if x := g.Call(i, j); x != Missing {
				sum += int64(x)
				called++
			}
		}
		if called == 0 {
			return nil, fmt.Errorf("plink: variant %q has no called genotype in the panel", v.ID)
		}
		out[j] = big.NewRat(sum, 2*called)
	}
	return out, nil
}

// ReadFrq reads PLINK 1.9's --freq output (.frq: a header "CHR SNP A1 A2
// MAF NCHROBS", then a line a variant; MAF is the frequency of A1, taken
// exactly as written). The returned variants carry the ID and both alleles.
func ReadFrq(r io.Reader) ([]Variant, []*big.Rat, error) {
	var vs []Variant
	var fs []*big.Rat
	header := true
	err := eachLine(r, ".frq", func(line int, f []string) error {
		if header {
			header = false
			if len(f) < 5 || f[1] != "SNP" || f[2] != "A1" || f[3] != "A2" || f[4] != "MAF" {
				return fmt.Errorf("header %q: want CHR SNP A1 A2 MAF NCHROBS (plink --freq)", f)
			}
			return nil
		}
		if len(f) < 5 {
			return fmt.Errorf("%d fields, want CHR SNP A1 A2 MAF NCHROBS", len(f))
		}
		p, ok := new(big.Rat).SetString(f[4])
		if !ok || p.Sign() < 0 || p.Cmp(big.NewRat(1, 1)) > 0 {
			return fmt.Errorf("variant %q: MAF %q is not a frequency in [0, 1]", f[1], f[4])
		}
		vs = append(vs, Variant{Chrom: f[0], ID: f[1], Allele1: f[2], Allele2: f[3]})
		fs = append(fs, p)
		return nil
	})
	if err == nil && len(vs) == 0 {
		err = fmt.Errorf("plink: .frq: no variant")
	}
	return vs, fs, err
}

// AlignFrequencies returns the reference frequency of each study variant's
// allele 1, matched by ID: a reference variant with the alleles swapped gives
// 1 - p. A study variant the reference lacks, or whose alleles differ, is an
// error naming it.
func AlignFrequencies(study, ref []Variant, freqs []*big.Rat) ([]*big.Rat, error) {
	if len(ref) != len(freqs) {
		return nil, fmt.Errorf("reference: %d variants, %d frequencies", len(ref), len(freqs))
	}
	at := make(map[string]int, len(ref))
	for j, v := range ref {
		if _, dup := at[v.ID]; dup {
			return nil, fmt.Errorf("reference: variant %q appears twice", v.ID)
		}
		at[v.ID] = j
	}
	out := make([]*big.Rat, len(study))
	for i, v := range study {
		j, ok := at[v.ID]
		if !ok {
			return nil, fmt.Errorf("variant %q (study variant %d) is not in the reference", v.ID, i+1)
		}
		r := ref[j]
		switch {
		case r.Allele1 == v.Allele1 && r.Allele2 == v.Allele2:
			out[i] = new(big.Rat).Set(freqs[j])
		case r.Allele1 == v.Allele2 && r.Allele2 == v.Allele1:
			out[i] = new(big.Rat).Sub(big.NewRat(1, 1), freqs[j])
		default:
			return nil, fmt.Errorf("variant %q: alleles %s/%s in the study, %s/%s in the reference", v.ID, v.Allele1, v.Allele2, r.Allele1, r.Allele2)
		}
	}
	return out, nil
}

// PanelFrequencies returns the reference frequency of each study variant's
// allele 1 from a public reference: a PLINK fileset (panel, its prefix) or
// PLINK 1.9's --freq output (frq); exactly one of them.
func PanelFrequencies(study []Variant, panel, frq string) ([]*big.Rat, error) {
	var ref []Variant
	var freqs []*big.Rat
	switch {
	case (panel == "") == (frq == ""):
		return nil, fmt.Errorf("give a reference panel's fileset or its .frq, one of them")
	case panel != "":
		g, err := OpenPLINK(panel)
		if err != nil {
			return nil, err
		}
		if freqs, err = g.Frequencies(); err != nil {
			return nil, err
		}
		ref = g.Variants
	default:
		f, err := os.Open(frq)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if ref, freqs, err = ReadFrq(f); err != nil {
			return nil, err
		}
	}
	return AlignFrequencies(study, ref, freqs)
}

// PanelStart returns a public start for the power-method job: the top p
// principal axes (d x p, orthonormal columns) of a reference panel's
// genotypes as the schema maps them (quantised, clipped), centred on the
// panel's mean. Public data in, a public matrix out.
func PanelStart(panel *Genotypes, sch *schema.Schema, p int) (*mat.Dense, error) {
	d := sch.D()
	if p < 1 || p > d || p > panel.N() {
		return nil, fmt.Errorf("panel start: p = %d columns from %d individuals and %d features", p, panel.N(), d)
	}
	rd, err := sch.NewRowReader(panel.Rows(), false)
	if err != nil {
		return nil, err
	}
	x := mat.NewDense(panel.N(), d, nil)
	i := 0
	for row, err := range rd.All() {
		if err != nil {
			return nil, err
		}
		for j, v := range row.Values {
			x.Set(i, j, float64(v))
		}
		i++
	}
	x = mat.DenseCopyOf(x.Slice(0, i, 0, d))
	for j := range d {
		col := mat.Col(nil, j, x)
		mean := 0.0
		for _, v := range col {
			mean += v
		}
		mean /= float64(i)
		for r := range i {
			x.Set(r, j, col[r]-mean)
		}
	}
	var svd mat.SVD
	if !svd.Factorize(x, mat.SVDThin) {
		return nil, fmt.Errorf("panel start: the SVD of the panel did not converge")
	}
	var v mat.Dense
	svd.VTo(&v)
	return mat.DenseCopyOf(v.Slice(0, d, 0, p)), nil
}
