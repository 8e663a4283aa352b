package source

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// readRaw reads PLINK's --recode A output: per individual, "FID IID" and
// its A1 counts (NA missing).
func readRaw(t *testing.T, path string) (ids []string, header []string, calls [][]int8) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	first := true
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if first {
			header, first = fs[6:], false
			continue
		}
		ids = append(ids, fs[0]+" "+fs[1])
		row := make([]int8, len(fs)-6)
		for j, c := range fs[6:] {
			switch c {
			case "NA":
				row[j] = Missing
			case "0", "1", "2":
				row[j] = int8(c[0] - '0')
			default:
				t.Fatalf("%s: cell %q", path, c)
			}
		}
		calls = append(calls, row)
	}
	return ids, header, calls
}

// TestPLINKFixtures decodes the fixtures written by PLINK 1.9 and compares
// every call with PLINK's own decoding of the same files (--recode A).
func TestPLINKFixtures(t *testing.T) {
	for _, name := range []string{"small", "fixture"} {
		prefix := filepath.Join("testdata", "plink", name)
		g, err := OpenPLINK(prefix + ".bed")
		if err != nil {
			t.Fatal(err)
		}
		ids, header, calls := readRaw(t, prefix+".raw")
		if g.N() != len(ids) || g.M() != len(header) {
			t.Fatalf("%s: %d x %d, PLINK says %d x %d", name, g.N(), g.M(), len(ids), len(header))
		}
		missing := 0
		row := make([]int8, g.M())
		for i := range g.N() {
			if g.Individuals[i] != ids[i] {
				t.Errorf("%s: individual %d is %q, PLINK says %q", name, i, g.Individuals[i], ids[i])
			}
			g.Row(i, row)
			for j, want := range calls[i] {
				if row[j] != want || g.Call(i, j) != want {
					t.Fatalf("%s: individual %d, variant %d: %d, PLINK says %d", name, i, j, row[j], want)
				}
				if want == Missing {
					missing++
				}
			}
		}
		for j, v := range g.Variants {
			if want := v.ID + "_" + v.Allele1; header[j] != want {
				t.Errorf("%s: variant %d is %s, PLINK counts %s", name, j, want, header[j])
			}
		}
		if missing == 0 {
			t.Errorf("%s: the fixture has no missing call to check", name)
		}
		// The same through the source registry, as schema rows.
		rows, err := Open(context.Background(), "plink://"+prefix)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; ; i++ {
			cells, err := rows.Next()
			if err == io.EOF {
				if i != g.N() {
					t.Errorf("%s: %d rows, want %d", name, i, g.N())
				}
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for j, c := range cells {
				want := ""
				if calls[i][j] != Missing {
					want = string(rune('0' + calls[i][j]))
				}
				if c != want {
					t.Fatalf("%s: row %d cell %d = %q, want %q", name, i, j, c, want)
				}
			}
		}
		rows.Close()
		if k, err := Key("plink://" + prefix + ".bim"); err != nil || !strings.HasPrefix(k, "plink:/") || strings.HasSuffix(k, ".bim") {
			t.Errorf("key %q, %v", k, err)
		}
	}
}

// TestPLINKRefusals: a fileset that does not fit is refused with an error
// naming what is wrong.
func TestPLINKRefusals(t *testing.T) {
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join("testdata", "plink", "small"+name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	bed, bim, fam := read(".bed"), read(".bim"), read(".fam")
	famLines := strings.SplitAfter(strings.TrimSpace(string(fam)), "\n")
	for _, tc := range []struct {
		name          string
		bed, bim, fam []byte
		want          string
	}{
		{"bad magic", append([]byte{0x6c, 0x1c, 0x01}, bed[3:]...), bim, fam, "magic bytes"},
		{"individual-major", append([]byte{0x6c, 0x1b, 0x00}, bed[3:]...), bim, fam, "individual-major"},
		{"short", bed[:len(bed)-1], bim, fam, "need"},
		{"long", append(append([]byte(nil), bed...), 0), bim, fam, "longer than"},
		{"empty", nil, bim, fam, "too short"},
		{"fam field", bed, bim, []byte("F1 I1 0 0 1\n"), ".fam line 1: 5 fields"},
		{"bim position", bed, []byte("1 rs1 0 x A G\n"), fam, ".bim line 1: position"},
		{"one individual fewer", bed, bim, []byte(strings.Join(famLines[:len(famLines)-1], "")), "longer than"},
		{"no variants", bed, nil, fam, "0 variants"},
	} {
		_, err := ReadPLINK(bytes.NewReader(tc.bed), bytes.NewReader(tc.bim), bytes.NewReader(tc.fam))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// FuzzReadPLINK: whatever the bytes, the reader returns an error or a
// fileset whose every call decodes to a dosage or Missing.
func FuzzReadPLINK(f *testing.F) {
	for _, name := range []string{"small", "fixture"} {
		var parts [3][]byte
		for i, ext := range []string{".bed", ".bim", ".fam"} {
			b, err := os.ReadFile(filepath.Join("testdata", "plink", name+ext))
			if err != nil {
				f.Fatal(err)
			}
			parts[i] = b
		}
		f.Add(parts[0], parts[1], parts[2])
	}
	f.Add([]byte{0x6c, 0x1b, 0x01, 0xff}, []byte("1 a 0 1 A C\n"), []byte("f i 0 0 0 0\n"))
	f.Fuzz(func(t *testing.T, bed, bim, fam []byte) {
		g, err := ReadPLINK(bytes.NewReader(bed), bytes.NewReader(bim), bytes.NewReader(fam))
		if err != nil {
			return
		}
		if len(bed) != 3+g.M()*((g.N()+3)/4) {
			t.Fatalf("accepted %d bytes for %d x %d", len(bed), g.N(), g.M())
		}
		row := make([]int8, g.M())
		for i := range g.N() {
			g.Row(i, row)
			for _, x := range row {
				if x != Missing && (x < 0 || x > 2) {
					t.Fatalf("dosage %d", x)
				}
			}
		}
	})
}

// rewriteFixture reads the fixture fileset and writes it again with
// WritePLINK under dir/name; it returns the fixture, its rows and the
// written prefix.
func rewriteFixture(t *testing.T, name string) (*Genotypes, [][]int8, string) {
	t.Helper()
	g0, err := OpenPLINK(filepath.Join("testdata", "plink", "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]int8, g0.N())
	for i := range rows {
		rows[i] = make([]int8, g0.M())
		g0.Row(i, rows[i])
	}
	g, err := NewGenotypes(g0.Individuals, g0.Variants, rows)
	if err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(t.TempDir(), name)
	if err := g.WritePLINK(prefix); err != nil {
		t.Fatal(err)
	}
	return g0, rows, prefix
}

// TestPLINKWriteRead: a fileset written by WritePLINK reads back the same.
func TestPLINKWriteRead(t *testing.T) {
	g0, rows, prefix := rewriteFixture(t, "out")
	back, err := OpenPLINK(prefix)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]int8, g0.M())
	for i := range rows {
		back.Row(i, row)
		if !bytes.Equal(asBytes(row), asBytes(rows[i])) {
			t.Fatalf("individual %d differs after a round trip", i)
		}
	}
	if _, err := NewGenotypes([]string{"a"}, g0.Variants[:1], [][]int8{{3}}); err == nil {
		t.Error("a dosage of 3 was packed")
	}
}

func asBytes(x []int8) []byte {
	b := make([]byte, len(x))
	for i, v := range x {
		b[i] = byte(v)
	}
	return b
}

// TestPLINKReadsOurFiles: PLINK 1.9 itself reads a fileset WritePLINK
// wrote and decodes the same calls (its --recode A against the fixture's).
// Skipped, saying so, where plink1.9 is not installed (Debian's package
// plink1.9).
func TestPLINKReadsOurFiles(t *testing.T) {
	bin, err := exec.LookPath("plink1.9")
	if err != nil {
		t.Skip("plink1.9 is not installed (apt-get install plink1.9): PLINK's own reading of our files not checked")
	}
	_, _, out := rewriteFixture(t, "ours")
	if b, err := exec.Command(bin, "--bfile", out, "--recode", "A", "--out", out).CombinedOutput(); err != nil {
		t.Fatalf("plink1.9: %v\n%s", err, b)
	}
	_, header, calls := readRaw(t, out+".raw")
	_, wantHeader, wantCalls := readRaw(t, filepath.Join("testdata", "plink", "fixture.raw"))
	if strings.Join(header, " ") != strings.Join(wantHeader, " ") {
		t.Fatalf("PLINK counts %v, want %v", header, wantHeader)
	}
	for i := range wantCalls {
		if !bytes.Equal(asBytes(calls[i]), asBytes(wantCalls[i])) {
			t.Fatalf("individual %d: PLINK decodes our file differently", i)
		}
	}
}
