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

// ProjectCSV applies a published result to an owner's own rows: each row goes
// through the schema's row map (quantized and clipped exactly as for the
// statistics, then scaled back to data units) and is projected as
// (z - mean) W. It writes a CSV with a header "component_1,...[,label]" and
// returns the number of rows. each, if not nil, also receives every
// projected row (a slice of its own) and its class ("" without classes).
// Projection is post-processing of the release and the owner's own data: it
// costs no privacy budget.
func ProjectCSV(res *Result, sch *schema.Schema, in io.Reader, out io.Writer, each func(coords []float64, class string)) (int, error) {
	c := res.Components
	if c == nil {
		return 0, errors.New("project: the result has no components (analysis scatter)")
	}
	if res.SchemaHash != sch.HashHex() {
		return 0, fmt.Errorf("project: result is for schema %s…, this schema is %s…", abbrev(res.SchemaHash), sch.HashHex()[:12])
	}
	d, k := c.Dims()
	if d != sch.D() {
		return 0, fmt.Errorf("project: result has %d features, schema %d", d, sch.D())
	}
	withLabel := sch.Label != "" && len(sch.Classes) > 0
	rd, err := sch.NewReader(in, withLabel)
	if err != nil {
		return 0, err
	}
	w := csv.NewWriter(out)
	header := make([]string, 0, k+1)
	for j := range k {
		header = append(header, fmt.Sprintf("component_%d", j+1))
	}
	if withLabel {
		header = append(header, sch.Label)
	}
	if err := w.Write(header); err != nil {
		return 0, err
	}
	scale := math.Ldexp(1, -int(sch.Bits))
	z := make([]float64, d)
	rec := make([]string, len(header))
	n := 0
	for row, err := range rd.All() {
		if err != nil {
			return n, err
		}
		for i, x := range row.Values {
			z[i] = float64(x) * scale
		}
		coords, label := c.Project(z), ""
		for j, v := range coords {
			rec[j] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		if withLabel {
			label = sch.Classes[row.Class]
			rec[k] = label
		}
		if each != nil {
			each(coords, label)
		}
		if err := w.Write(rec); err != nil {
			return n, err
		}
		n++
	}
	w.Flush()
	return n, w.Error()
}

// abbrev shortens a hash for a message; s may be anything a file said.
func abbrev(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}
