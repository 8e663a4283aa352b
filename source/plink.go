package source

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/fedpca/fedpca/protocol/schema"
)

// PLINK 1 binary genotype files (https://www.cog-genomics.org/plink/1.9/formats#bed):
// PREFIX.bed, PREFIX.bim (one variant a line: chromosome, ID, cM, position,
// allele 1, allele 2) and PREFIX.fam (one individual a line: family,
// individual, father, mother, sex, phenotype). The .bed starts with the
// magic bytes 0x6c 0x1b 0x01 (the 0x01: variant-major), then one block of
// ceil(N/4) bytes per variant; individual i's call is the 2 bits at byte
// i/4, bits 2(i%4) and 2(i%4)+1 (low bit first): 00 homozygous for allele 1,
// 01 missing, 10 heterozygous, 11 homozygous for allele 2. The padding bits
// of a variant's last byte are ignored.
//
// A call's dosage is its count of allele 1 (the .bim's fifth column), as
// PLINK's --recode A writes it: 2, 1, 0, and Missing for a missing call.

// Missing is the dosage of a missing call.
const Missing int8 = -1

// plinkMagic starts every variant-major .bed file.
var plinkMagic = [3]byte{0x6c, 0x1b, 0x01}

// Variant is one line of a .bim file.
type Variant struct {
	Chrom, ID        string
	Position         int64
	Allele1, Allele2 string
}

// Genotypes is a PLINK 1 fileset held in memory (N individuals x M
// variants at 2 bits a call: 25 MB for 1,000 x 100,000). Safe for
// concurrent reads.
type Genotypes struct {
	Individuals []string // family and individual ID, "FID IID"
	Variants    []Variant
	bed         []byte // without the magic
	stride      int    // bytes per variant, ceil(N/4)
}

// N is the number of individuals, M the number of variants.
func (g *Genotypes) N() int { return len(g.Individuals) }
func (g *Genotypes) M() int { return len(g.Variants) }

// decode maps a 2-bit code to a dosage of allele 1.
var decode = [4]int8{2, Missing, 1, 0}

// Row writes individual i's dosages (M values, Missing for a missing call)
// to dst.
func (g *Genotypes) Row(i int, dst []int8) {
	byteAt, shift := i/4, uint(2*(i%4))
	for j := range g.Variants {
		dst[j] = decode[(g.bed[j*g.stride+byteAt]>>shift)&3]
	}
}

// Call returns individual i's dosage of variant j.
func (g *Genotypes) Call(i, j int) int8 {
	return decode[(g.bed[j*g.stride+i/4]>>uint(2*(i%4)))&3]
}

// OpenPLINK reads PREFIX.bed, PREFIX.bim and PREFIX.fam. A prefix given
// with one of the three extensions is taken without it.
func OpenPLINK(prefix string) (*Genotypes, error) {
	for _, ext := range []string{".bed", ".bim", ".fam"} {
		prefix = strings.TrimSuffix(prefix, ext)
	}
	fam, err := os.Open(prefix + ".fam")
	if err != nil {
		return nil, err
	}
	defer fam.Close()
	bim, err := os.Open(prefix + ".bim")
	if err != nil {
		return nil, err
	}
	defer bim.Close()
	bed, err := os.Open(prefix + ".bed")
	if err != nil {
		return nil, err
	}
	defer bed.Close()
	return ReadPLINK(bed, bim, fam)
}

// maxPLINKBytes bounds a .bed file held in memory (4 GiB: 10^5 individuals
// x 3 10^5 variants).
const maxPLINKBytes = 4 << 30

// ReadPLINK reads a fileset from its three streams. Errors name the file,
// the line and what is wrong; they quote no genotype.
func ReadPLINK(bed, bim, fam io.Reader) (*Genotypes, error) {
	g := &Genotypes{}
	if err := eachLine(fam, ".fam", func(line int, f []string) error {
		if len(f) != 6 {
			return fmt.Errorf("%d fields, want 6 (family, individual, father, mother, sex, phenotype)", len(f))
		}
		g.Individuals = append(g.Individuals, f[0]+" "+f[1])
		return nil
	}); err != nil {
		return nil, err
	}
	var err error
	if g.Variants, err = ReadBIM(bim); err != nil {
		return nil, err
	}
	if g.N() == 0 || g.M() == 0 {
		return nil, fmt.Errorf("plink: %d individuals (.fam) and %d variants (.bim): need at least one of each", g.N(), g.M())
	}
	g.stride = (g.N() + 3) / 4
	want := int64(g.stride) * int64(g.M())
	if want > maxPLINKBytes {
		return nil, fmt.Errorf("plink: %d individuals x %d variants need %d bytes, above the %d this reader holds in memory", g.N(), g.M(), want, int64(maxPLINKBytes))
	}
	var magic [3]byte
	if _, err := io.ReadFull(bed, magic[:]); err != nil {
		return nil, fmt.Errorf("plink: .bed: too short for its 3 magic bytes: %w", err)
	}
	switch {
	case magic[0] != plinkMagic[0] || magic[1] != plinkMagic[1]:
		return nil, fmt.Errorf("plink: .bed: magic bytes %#02x %#02x, want 0x6c 0x1b (not a PLINK 1 binary file)", magic[0], magic[1])
	case magic[2] == 0x00:
		return nil, errors.New("plink: .bed is individual-major (mode 0x00, PLINK before 1.0): convert it with plink --make-bed")
	case magic[2] != plinkMagic[2]:
		return nil, fmt.Errorf("plink: .bed: mode byte %#02x, want 0x01 (variant-major)", magic[2])
	}
	g.bed = make([]byte, want)
	if _, err := io.ReadFull(bed, g.bed); err != nil {
		return nil, fmt.Errorf("plink: .bed: %d individuals x %d variants need %d bytes after the magic: %w", g.N(), g.M(), want, err)
	}
	var extra [1]byte
	if n, _ := bed.Read(extra[:]); n > 0 {
		return nil, fmt.Errorf("plink: .bed is longer than %d individuals x %d variants (%d bytes after the magic): does the .fam or .bim miss lines?", g.N(), g.M(), want)
	}
	return g, nil
}

// ReadBIM reads a .bim file's variants (chromosome, ID, cM, position,
// allele 1, allele 2 a line).
func ReadBIM(bim io.Reader) ([]Variant, error) {
	var vs []Variant
	err := eachLine(bim, ".bim", func(line int, f []string) error {
		if len(f) != 6 {
			return fmt.Errorf("%d fields, want 6 (chromosome, ID, cM, position, allele 1, allele 2)", len(f))
		}
		pos, err := strconv.ParseInt(f[3], 10, 64)
		if err != nil {
			return fmt.Errorf("position %q is not an integer", f[3])
		}
		if _, err := strconv.ParseFloat(f[2], 64); err != nil {
			return fmt.Errorf("genetic distance %q is not a number", f[2])
		}
		vs = append(vs, Variant{Chrom: f[0], ID: f[1], Position: pos, Allele1: f[4], Allele2: f[5]})
		return nil
	})
	return vs, err
}

// eachLine calls fn with the white-space separated fields of each
// non-empty line; its error is wrapped with the file and line.
func eachLine(r io.Reader, name string, fn func(line int, fields []string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if err := fn(line, strings.Fields(string(b))); err != nil {
			return fmt.Errorf("plink: %s line %d: %w", name, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("plink: %s: %w", name, err)
	}
	return nil
}

func init() { Register(openPLINK, "plink") }

// openPLINK opens plink://PREFIX (PREFIX.bed/.bim/.fam) as rows: one per
// individual, one column per variant (named by its .bim ID), the cells the
// dosages "0", "1", "2", and "" for a missing call (the schema's missing
// policy decides; the power job's genotype map imputes it at the public
// mean, protocol/power.Standardiser).
func openPLINK(_ context.Context, spec string) (Rows, error) {
	g, err := OpenPLINK(strings.TrimPrefix(spec, "plink://"))
	if err != nil {
		return nil, err
	}
	return RowsOf(g.Rows()), nil
}

// Rows returns the individuals as schema rows (see openPLINK).
func (g *Genotypes) Rows() schema.Rows {
	cols := make([]string, g.M())
	for j, v := range g.Variants {
		cols[j] = v.ID
	}
	return &plinkRows{g: g, cols: cols, dos: make([]int8, g.M()), cells: make([]string, g.M())}
}

type plinkRows struct {
	g     *Genotypes
	cols  []string
	i     int
	dos   []int8
	cells []string
}

func (r *plinkRows) Columns() []string { return r.cols }
func (r *plinkRows) Line() int         { return r.i + 1 }

var dosageText = [3]string{"0", "1", "2"}

func (r *plinkRows) Next() ([]string, error) {
	if r.i >= r.g.N() {
		return nil, io.EOF
	}
	r.g.Row(r.i, r.dos)
	for j, x := range r.dos {
		if x == Missing {
			r.cells[j] = ""
		} else {
			r.cells[j] = dosageText[x]
		}
	}
	r.i++
	return r.cells, nil
}

// NewGenotypes packs individuals' dosages (one row of M values per
// individual, 0, 1, 2 or Missing) as a fileset. It fails on a row of
// another length or a value that is not a dosage, naming the individual and
// variant.
func NewGenotypes(individuals []string, variants []Variant, rows [][]int8) (*Genotypes, error) {
	if len(individuals) != len(rows) || len(individuals) == 0 || len(variants) == 0 {
		return nil, fmt.Errorf("plink: %d individuals with %d rows and %d variants", len(individuals), len(rows), len(variants))
	}
	g := &Genotypes{Individuals: individuals, Variants: variants, stride: (len(rows) + 3) / 4}
	g.bed = make([]byte, g.stride*len(variants))
	var code = map[int8]byte{2: 0, Missing: 1, 1: 2, 0: 3}
	for i, row := range rows {
		if len(row) != len(variants) {
			return nil, fmt.Errorf("plink: individual %d has %d calls, want %d", i, len(row), len(variants))
		}
		byteAt, shift := i/4, uint(2*(i%4))
		for j, x := range row {
			c, ok := code[x]
			if !ok {
				return nil, fmt.Errorf("plink: individual %d, variant %d: not a dosage", i, j)
			}
			g.bed[j*g.stride+byteAt] |= c << shift
		}
	}
	return g, nil
}

// WritePLINK writes the fileset as PREFIX.bed, PREFIX.bim and PREFIX.fam
// (family = individual ID, no parents, sex and phenotype unknown).
func (g *Genotypes) WritePLINK(prefix string) error {
	var fam, bim bytes.Buffer
	for _, id := range g.Individuals {
		fid, iid, ok := strings.Cut(id, " ")
		if !ok {
			fid, iid = id, id
		}
		fmt.Fprintf(&fam, "%s %s 0 0 0 -9\n", fid, iid)
	}
	for _, v := range g.Variants {
		fmt.Fprintf(&bim, "%s\t%s\t0\t%d\t%s\t%s\n", v.Chrom, v.ID, v.Position, v.Allele1, v.Allele2)
	}
	bed := append(plinkMagic[:], g.bed...)
	for ext, b := range map[string][]byte{".fam": fam.Bytes(), ".bim": bim.Bytes(), ".bed": bed} {
		if err := os.WriteFile(prefix+ext, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
