package job

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

// readRowsSerial is the reference: one schema.Reader on the exact
// (big-integer) paths, one row at a time, the row policy as a plain loop.
func readRowsSerial(s *Spec, sch *schema.Schema, rows schema.Rows) (*stats.Accumulator, ReadReport, error) {
	var rep ReadReport
	l, err := s.Layout(sch)
	if err != nil {
		return nil, rep, err
	}
	acc, err := stats.NewAccumulator(l, sch.Bound(), sch.Bits)
	if err != nil {
		return nil, rep, err
	}
	rd, err := sch.NewRowReader(rows, l.K > 1 && l.Kind == stats.Full)
	if err != nil {
		return nil, rep, err
	}
	rd.Exact()
	var bucket func([]int64) int
	if l.Kind == stats.Histogram {
		bucket = NormBuckets(s.NormEdges, sch.Bits)
	}
	for {
		if acc.Rows() >= min(s.MaxOwnerRows, acc.MaxRows()) {
			// Dropped; a source failing further on changes nothing.
			n, _ := rd.Skip()
			rep.Dropped += n
			break
		}
		q, k, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, schema.ErrMissing) {
			continue
		}
		var re *schema.RowError
		if errors.As(err, &re) {
			rep.Skipped++
			if len(rep.Examples) < maxExamples {
				rep.Examples = append(rep.Examples, re.Error())
			}
			continue
		}
		if err != nil {
			return nil, rep, err
		}
		if bucket != nil {
			k = bucket(q)
		}
		if err := acc.Add(q, k); err != nil {
			return nil, rep, err
		}
	}
	rep.Rows = acc.Rows()
	_, rep.Clipped = rd.Rows()
	rep.Clamped = rd.Clamped()
	rep.Missing, rep.Filled = rd.MissingDropped(), rd.Filled()
	return acc, rep, nil
}

// samePipeline checks that the pipeline on several numbers of workers, on
// the fast paths and on the exact ones, gives the reference's integers,
// report and error.
func samePipeline(t testing.TB, what string, s *Spec, sch *schema.Schema, csv []byte) ReadReport {
	t.Helper()
	open := func() schema.Rows {
		rows, err := schema.NewCSVRows(bytes.NewReader(csv), schema.CSVOptions{})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return rows
	}
	want, wrep, werr := readRowsSerial(s, sch, open())
	for _, w := range []int{1, 2, 3, 8} {
		for _, exact := range []bool{false, true} {
			if exact && w != 2 {
				continue
			}
			got, rep, err := readRows(s, sch, open(), w, exact)
			if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
				t.Fatalf("%s, %d workers: error %v, want %v", what, w, err, werr)
			}
			if err != nil {
				continue
			}
			if !reflect.DeepEqual(rep, wrep) {
				t.Fatalf("%s, %d workers: report\n%+v\nwant\n%+v", what, w, rep, wrep)
			}
			if !slices.Equal(got.Pack(), want.Pack()) {
				t.Fatalf("%s, %d workers: statistics differ from the exact serial reader's", what, w)
			}
		}
	}
	return wrep
}

// Every bundled dataset, through the schema the simulator infers for it:
// the pipeline's integers (R, v, n), clip counts and report are the exact
// serial reader's, for PCA, DCA and a norms histogram, with rows clipped
// (C = 1) and not (C = 1000), at g = 16 and 22, and with max_owner_rows
// cutting the file.
func TestPipelineMatchesExactOnDatasets(t *testing.T) {
	for _, name := range datasets.Names() {
		csv, err := datasets.CSV(name)
		if err != nil {
			t.Fatal(err)
		}
		if testing.Short() && len(csv) > 1<<20 {
			continue
		}
		base, err := schema.Infer(bytes.NewReader(csv), name, "label")
		if err != nil {
			t.Fatal(err)
		}
		n := int64(bytes.Count(csv, []byte("\n")) - 1)
		for _, c := range []string{"1", "1000"} {
			for _, g := range []uint{16, 22} {
				sch := *base
				sch.ClipNorm, sch.Bits = fixedpoint.MustDecimal(c), g
				specs := map[string]*Spec{
					"pca":       {Analysis: PCA, MaxOwnerRows: 1 << 40},
					"dca":       {Analysis: DCA, MaxOwnerRows: 1 << 40},
					"pca cut":   {Analysis: PCA, MaxOwnerRows: n / 3},
					"pca cut 0": {Analysis: PCA, MaxOwnerRows: 0},
					"norms":     {Analysis: NormsJob, MaxOwnerRows: 1 << 40, NormEdges: []fixedpoint.Decimal{fixedpoint.MustDecimal("0.5"), fixedpoint.MustDecimal("0.999"), fixedpoint.MustDecimal("2")}},
				}
				if len(base.Classes) < 2 {
					delete(specs, "dca")
				}
				for what, s := range specs {
					samePipeline(t, fmt.Sprintf("%s C=%s g=%d %s", name, c, g, what), s, &sch, csv)
				}
			}
		}
	}
}

// A file with every kind of row the policy treats apart: unreadable cells,
// wrong field counts, missing values dropped and filled, categories,
// values clamped to declared bounds, cells in exponent form and with many
// digits (the exact path), and max_owner_rows falling in the middle of a
// batch.
func TestPipelineRowPolicy(t *testing.T) {
	sch, err := schema.Parse([]byte(`{"id":"mixed","features":[
		{"name":"a","center":"0.07939088988555858","scale":"0.48679961163652585","min":"-3","max":"3"},
		{"name":"b","center":"-2.5","scale":"3e-1","missing":{"policy":"fill","fill":"1.5"}},
		{"name":"c","center":"0","scale":"1","missing":{"policy":"drop"}},
		{"name":"color=red","column":"color","category":"red","center":"0.3","scale":"0.5"},
		{"name":"color=blue","column":"color","category":"blue","center":"0.3","scale":"0.5"}],
		"categorical":[{"column":"color","categories":["red","blue","green"]}],
		"label":"label","classes":["x","y"],"clip_norm":"3","trim":true}`))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	cells := []string{"0.5", "-1.25", "7", "-7", "1e-3", "2.5E+1", "12345678901234567890.5", "-0", " 3.25 ", "x", "", "NA", "1,5", "0.0000000000000000000001"}
	var b strings.Builder
	b.WriteString("a,b,c,color,label\n")
	for i := range 3000 {
		if rng.IntN(97) == 0 {
			b.WriteString("1,2\n") // wrong number of fields
			continue
		}
		pick := func() string {
			if rng.IntN(4) == 0 {
				return cells[rng.IntN(len(cells))]
			}
			return fmt.Sprintf("%.*f", rng.IntN(8), rng.NormFloat64()*2)
		}
		color := []string{"red", "blue", "green", "Red", "purple"}[rng.IntN(5)]
		label := []string{"x", "y", "z"}[min(rng.IntN(40), 2)*min(i%3, 1)]
		fmt.Fprintf(&b, "%q,%q,%q,%s,%s\n", pick(), pick(), pick(), color, label)
	}
	csv := []byte(b.String())
	var seen ReadReport
	for _, s := range []*Spec{
		{Analysis: PCA, MaxOwnerRows: 1 << 40},
		{Analysis: DCA, MaxOwnerRows: 1 << 40},
		{Analysis: DCA, MaxOwnerRows: 1001},
		{Analysis: PCA, MaxOwnerRows: 1},
	} {
		rep := samePipeline(t, fmt.Sprintf("%s max_owner_rows %d", s.Analysis, s.MaxOwnerRows), s, sch, csv)
		seen.Rows, seen.Clipped, seen.Clamped = max(seen.Rows, rep.Rows), max(seen.Clipped, rep.Clipped), max(seen.Clamped, rep.Clamped)
		seen.Skipped, seen.Dropped = max(seen.Skipped, rep.Skipped), max(seen.Dropped, rep.Dropped)
		seen.Missing, seen.Filled = max(seen.Missing, rep.Missing), max(seen.Filled, rep.Filled)
	}
	// The file exercises every counter (or the comparison above proves less).
	if seen.Rows < 500 || seen.Clipped == 0 || seen.Clamped == 0 || seen.Skipped == 0 || seen.Dropped < 1000 || seen.Missing == 0 || seen.Filled == 0 {
		t.Errorf("the file does not exercise every rule: %+v", seen)
	}
}

// FuzzReadRows builds a CSV file from arbitrary cells and checks the
// pipeline against the exact serial reader.
func FuzzReadRows(f *testing.F) {
	f.Add("0.5,-1.25\n3,4\n", int64(1<<40))
	f.Add("99999999999999999999,1e400\n-0,-0.000\n1,2,3\n\"1\n2\",x\n", int64(2))
	f.Add("0.07939088988555858,-0.09093844618528625\n 1 ,\t2\n.5,5.\n", int64(1))
	f.Add("1e-3,2E+2\n0.0000000000000000001,18446744073709551616\n", int64(0))
	sch, err := schema.Parse([]byte(`{"id":"fuzz","features":[
		{"name":"a","center":"0.07939088988555858","scale":"0.48679961163652585"},
		{"name":"b","center":"-2.5","scale":"3e-1","min":"-10","max":"10"}],"clip_norm":"2"}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body string, maxOwnerRows int64) {
		if maxOwnerRows < 0 {
			maxOwnerRows = -maxOwnerRows
		}
		samePipeline(t, "fuzz", &Spec{Analysis: PCA, MaxOwnerRows: maxOwnerRows}, sch, []byte("a,b\n"+body))
	})
}
