package job

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/fedpca/fedpca/protocol/schema"
)

// ProjectOptions are Project's options.
type ProjectOptions struct {
	// IDColumn, if set, is a column of the source copied as the first
	// column of every output row, so that the rows join back to the
	// source by it (skipped rows make the order alone unreliable).
	IDColumn string
	// Each, if not nil, also receives every projected row (a slice of its
	// own) and its class ("" without classes).
	Each func(coords []float64, class string)
}

// ProjectReport says what Project did with the rows: Rows read, Written
// projected, Skipped as unreadable and Dropped by the schema's drop
// missing-value policy (as a job's owner does), with the first few
// problems. It describes the owner's own rows, for its own operator.
type ProjectReport struct {
	Rows, Written, Skipped, Dropped int
	Examples                        []string
}

const maxProjectExamples = 5

// Project applies a published result to an owner's own rows: each row goes
// through the schema's row map (quantized and clipped exactly as for the
// statistics, then scaled back to data units) and is projected as
// (z - mean) W. It writes a CSV with a header "[ID,]component_1,...[,label]".
// A row that cannot be read, or that the drop policy leaves out, is skipped
// and counted, as in a job. Projection is post-processing of the release
// and the owner's own data: it costs no privacy budget.
func Project(res *Result, sch *schema.Schema, src schema.Rows, out io.Writer, o ProjectOptions) (*ProjectReport, error) {
	c := res.Components
	if c == nil {
		return nil, errors.New("project: the result has no components (analysis scatter)")
	}
	if res.SchemaHash != sch.HashHex() {
		return nil, fmt.Errorf("project: result is for schema %s…, this schema is %s…", abbrev(res.SchemaHash), sch.HashHex()[:12])
	}
	d, k := c.Dims()
	if d != sch.D() {
		return nil, fmt.Errorf("project: result has %d features, schema %d", d, sch.D())
	}
	var ids *idRows
	if o.IDColumn != "" {
		ids = &idRows{Rows: src, col: -1}
		for i, name := range src.Columns() {
			if name == o.IDColumn {
				ids.col = i
			}
		}
		if ids.col < 0 {
			return nil, fmt.Errorf("project: the source has no column %q (its columns: %v)", o.IDColumn, src.Columns())
		}
		src = ids
	}
	withLabel := sch.Label != "" && len(sch.Classes) > 0
	rd, err := sch.NewRowReader(src, withLabel)
	if err != nil {
		return nil, err
	}
	w := csv.NewWriter(out)
	var header []string
	if ids != nil {
		header = append(header, o.IDColumn)
	}
	first := len(header)
	for j := range k {
		header = append(header, fmt.Sprintf("component_%d", j+1))
	}
	if withLabel {
		header = append(header, sch.Label)
	}
	if err := w.Write(header); err != nil {
		return nil, err
	}
	scale := math.Ldexp(1, -int(sch.Bits))
	z := make([]float64, d)
	rec := make([]string, len(header))
	rep := &ProjectReport{}
	for row, err := range rd.All() {
		rep.Rows++
		if err != nil {
			var re *schema.RowError
			if !errors.As(err, &re) {
				return rep, err
			}
			if errors.Is(err, schema.ErrMissing) {
				rep.Dropped++
				continue
			}
			rep.Skipped++
			if len(rep.Examples) < maxProjectExamples {
				rep.Examples = append(rep.Examples, re.Error())
			}
			continue
		}
		for i, x := range row.Values {
			z[i] = float64(x) * scale
		}
		coords, label := c.Project(z), ""
		if ids != nil {
			rec[0] = ids.last
		}
		for j, v := range coords {
			rec[first+j] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		if withLabel {
			label = sch.Classes[row.Class]
			rec[first+k] = label
		}
		if o.Each != nil {
			o.Each(coords, label)
		}
		if err := w.Write(rec); err != nil {
			return rep, err
		}
		rep.Written++
	}
	w.Flush()
	return rep, w.Error()
}

// ProjectCSV is Project on CSV rows, without an ID column: it returns the
// number of rows written.
func ProjectCSV(res *Result, sch *schema.Schema, in io.Reader, out io.Writer, each func(coords []float64, class string)) (int, error) {
	rows, err := schema.NewCSVRows(in, schema.CSVOptions{})
	if err != nil {
		return 0, err
	}
	rep, err := Project(res, sch, rows, out, ProjectOptions{Each: each})
	if rep == nil {
		return 0, err
	}
	return rep.Written, err
}

// idRows keeps the ID cell of the row its source returned last.
type idRows struct {
	schema.Rows
	col  int
	last string
}

// Computed passes on the source's computed columns (schema.Computed).
func (r *idRows) Computed() []string {
	if c, ok := r.Rows.(schema.Computed); ok {
		return c.Computed()
	}
	return nil
}

func (r *idRows) Next() ([]string, error) {
	rec, err := r.Rows.Next()
	if err == nil && r.col < len(rec) {
		r.last = rec[r.col]
	}
	return rec, err
}

// abbrev shortens a hash for a message; s may be anything a file said.
func abbrev(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
