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
// returns the number of rows. Projection is post-processing of the release
// and the owner's own data: it costs no privacy budget.
func ProjectCSV(res *Result, sch *schema.Schema, in io.Reader, out io.Writer) (int, error) {
	c := res.Components
	if c == nil {
		return 0, errors.New("project: the result has no components (analysis scatter)")
	}
	if res.SchemaHash != sch.HashHex() {
		return 0, fmt.Errorf("project: result is for schema %s…, this schema is %s…", res.SchemaHash[:12], sch.HashHex()[:12])
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
	for {
		q, class, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return n, err
		}
		for i, x := range q {
			z[i] = float64(x) * scale
		}
		for j, v := range c.Project(z) {
			rec[j] = strconv.FormatFloat(v, 'g', -1, 64)
		}
		if withLabel {
			rec[k] = sch.Classes[class]
		}
		if err := w.Write(rec); err != nil {
			return n, err
		}
		n++
	}
	w.Flush()
	return n, w.Error()
}
