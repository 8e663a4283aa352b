package schema

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// CheckReport is what reading a whole source through the schema found. It
// is for the owner alone (its terminal and log): it describes private rows.
type CheckReport struct {
	Schema  string   `json:"schema"`
	Columns []string `json:"columns"` // the source's columns
	Ignored []string `json:"ignored"` // source columns the schema does not read
	// Rows is every row of the source; Used of them map; Skipped cannot
	// be read; Missing were dropped by the missing policy; Filled had a
	// missing value filled in (and are used).
	Rows, Used, Skipped, Missing, Filled int64
	// SkippedBy counts the skipped rows by column ("" for the whole row).
	SkippedBy map[string]int64 `json:"skipped_by,omitempty"`
	// Examples are the first few skipped rows (line, column, what is wrong).
	Examples []string `json:"examples,omitempty"`
	// Clamped values were outside their declared [min, max]; Clipped rows
	// were scaled down to the clip norm.
	Clamped, Clipped int64
	// Features holds each feature's range after the map (z = (x - center) /
	// scale, clamped, before the row clip).
	Features []FeatureRange `json:"features"`
}

// FeatureRange is one feature's range after the map.
type FeatureRange struct {
	Name     string  `json:"name"`
	Min, Max float64 // z values (display only: the statistics stay integers)
}

const maxCheckExamples = 10

// Check reads every row of src through the schema (with the label when the
// schema has classes). An error means the source does not fit the schema
// (a column is missing: the error names it) or cannot be read; unreadable
// rows are counted in the report.
func (s *Schema) Check(src Rows) (*CheckReport, error) {
	rd, err := s.NewRowReader(src, len(s.Classes) > 0)
	if err != nil {
		return nil, err
	}
	rd.TrackRange()
	rep := &CheckReport{Schema: s.ID, Columns: src.Columns(), SkippedBy: map[string]int64{}}
	used := map[string]bool{}
	for _, c := range s.Columns(true) {
		used[c] = true
	}
	for _, c := range rep.Columns {
		if !used[c] {
			rep.Ignored = append(rep.Ignored, c)
		}
	}
	for _, err := range rd.All() {
		if err == nil {
			rep.Rows++
			continue
		}
		var re *RowError
		if !errors.As(err, &re) {
			return nil, err
		}
		rep.Rows++
		if errors.Is(err, ErrMissing) {
			continue
		}
		rep.Skipped++
		rep.SkippedBy[re.Column]++
		if len(rep.Examples) < maxCheckExamples {
			rep.Examples = append(rep.Examples, re.Error())
		}
	}
	rep.Used, rep.Clipped = rd.Rows()
	rep.Clamped, rep.Missing, rep.Filled = rd.Clamped(), rd.MissingDropped(), rd.Filled()
	lo, hi := rd.Range()
	unit := math.Ldexp(1, -int(s.Bits))
	for i, f := range s.Features {
		if rep.Used > 0 { // no range of no row
			rep.Features = append(rep.Features, FeatureRange{Name: f.Name, Min: float64(lo[i]) * unit, Max: float64(hi[i]) * unit})
		}
	}
	return rep, nil
}

// ErrNoUsableRow: a source of which no row can be used through its schema.
var ErrNoUsableRow = errors.New("no row of the source is usable")

// Usable is an error (ErrNoUsableRow) when no row of the source can be
// used, saying what happened to them. It is for the owner's operator: it
// counts the source's rows, which nothing that leaves the owner may.
func (r *CheckReport) Usable() error {
	if r.Used > 0 {
		return nil
	}
	if r.Rows == 0 {
		return fmt.Errorf("%w: the source has no rows", ErrNoUsableRow)
	}
	why := fmt.Sprintf("of its %d rows, %d are unreadable and %d have a missing value (drop policy)", r.Rows, r.Skipped, r.Missing)
	if len(r.Examples) > 0 {
		why += "; first: " + r.Examples[0]
	}
	return fmt.Errorf("%w: %s; fix the schema (a column's type, categories, labels, the missing-value policy) or the source", ErrNoUsableRow, why)
}

// String formats the report for a terminal.
func (r *CheckReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schema %s: %d columns in the source", r.Schema, len(r.Columns))
	if len(r.Ignored) > 0 {
		fmt.Fprintf(&b, " (not read: %s)", strings.Join(quoteAll(r.Ignored), ", "))
	}
	fmt.Fprintf(&b, "\nrows read           %d\n", r.Rows)
	fmt.Fprintf(&b, "rows used          %d\n", r.Used)
	fmt.Fprintf(&b, "rows skipped       %d (unreadable)\n", r.Skipped)
	for c, n := range r.SkippedBy {
		if c == "" {
			c = "(whole row)"
		}
		fmt.Fprintf(&b, "  at column %-12q %d\n", c, n)
	}
	fmt.Fprintf(&b, "rows dropped       %d (missing value, drop policy)\n", r.Missing)
	fmt.Fprintf(&b, "rows filled        %d (missing value, fill policy)\n", r.Filled)
	fmt.Fprintf(&b, "values clamped     %d (outside a feature's min/max)\n", r.Clamped)
	fmt.Fprintf(&b, "rows clipped       %d of %d (norm above the clip norm)\n", r.Clipped, r.Used)
	for _, e := range r.Examples {
		fmt.Fprintf(&b, "  skipped: %s\n", e)
	}
	if r.Used == 0 {
		b.WriteString("no row used: no feature ranges\n")
		return b.String()
	}
	fmt.Fprintf(&b, "%-24s %12s %12s   (after the map z = (x - center) / scale)\n", "feature", "min", "max")
	for _, f := range r.Features {
		fmt.Fprintf(&b, "%-24s %12.4g %12.4g\n", f.Name, f.Min, f.Max)
	}
	return b.String()
}
