package schema

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
)

// validateOptions checks the reading options: columns, categories and
// missing-value policies.
func (s *Schema) validateOptions() error {
	if s.Missing != nil {
		if err := s.Missing.validate(); err != nil {
			return fmt.Errorf("schema %s: %w", s.ID, err)
		}
		if s.Missing.Policy == MissingFill {
			return fmt.Errorf("schema %s: the schema-wide missing policy cannot be %q (a fill value is per feature); use %q or set it per feature", s.ID, MissingFill, MissingDrop)
		}
	}
	cats := make(map[string]*Categorical, len(s.Categorical))
	for i := range s.Categorical {
		c := &s.Categorical[i]
		if c.Column == "" || !utf8.ValidString(c.Column) {
			return fmt.Errorf("schema %s: categorical column %d has no valid name", s.ID, i)
		}
		if _, dup := cats[c.Column]; dup {
			return fmt.Errorf("schema %s: categorical column %q appears twice", s.ID, c.Column)
		}
		if c.Column == s.Label {
			return fmt.Errorf("schema %s: categorical column %q is the label column", s.ID, c.Column)
		}
		cats[c.Column] = c
		if len(c.Categories) == 0 {
			return fmt.Errorf("schema %s: categorical column %q has no categories", s.ID, c.Column)
		}
		seen := map[string]bool{}
		for _, v := range c.Categories {
			if !utf8.ValidString(v) {
				return fmt.Errorf("schema %s: categorical column %q: category %q is not valid UTF-8", s.ID, c.Column, v)
			}
			k := s.normal(v)
			if seen[k] {
				return fmt.Errorf("schema %s: categorical column %q: category %q appears twice (after trim/ignore_case)", s.ID, c.Column, v)
			}
			seen[k] = true
		}
		if m := c.Missing; m != nil {
			if err := m.validate(); err != nil {
				return fmt.Errorf("schema %s: categorical column %q: %w", s.ID, c.Column, err)
			}
			if m.Policy == MissingFill && !seen[s.normal(m.Fill)] {
				return fmt.Errorf("schema %s: categorical column %q: fill %q is not one of its categories", s.ID, c.Column, m.Fill)
			}
		}
	}
	for _, f := range s.Features {
		col := f.SourceColumn()
		if !utf8.ValidString(col) {
			return fmt.Errorf("schema %s: feature %q: column %q is not valid UTF-8", s.ID, f.Name, col)
		}
		if s.Label != "" && col == s.Label {
			return fmt.Errorf("schema %s: feature %q reads the label column %q", s.ID, f.Name, col)
		}
		c, categorical := cats[col]
		if f.Category == nil {
			if categorical {
				return fmt.Errorf("schema %s: feature %q reads categorical column %q but names no category", s.ID, f.Name, col)
			}
		} else {
			if !categorical {
				return fmt.Errorf("schema %s: feature %q: category %q of column %q, which is not in categorical", s.ID, f.Name, *f.Category, col)
			}
			found := false
			for _, v := range c.Categories {
				if s.normal(v) == s.normal(*f.Category) {
					found = true
				}
			}
			if !found {
				return fmt.Errorf("schema %s: feature %q: %q is not a category of column %q", s.ID, f.Name, *f.Category, col)
			}
			if f.Missing != nil {
				return fmt.Errorf("schema %s: feature %q: a categorical column's missing policy goes in its categorical entry", s.ID, f.Name)
			}
		}
		if m := f.Missing; m != nil {
			if err := m.validate(); err != nil {
				return fmt.Errorf("schema %s: feature %q: %w", s.ID, f.Name, err)
			}
			if m.Policy == MissingFill {
				if _, err := fixedpoint.ParseDecimal(m.Fill); err != nil {
					return fmt.Errorf("schema %s: feature %q: fill %q is not a decimal number", s.ID, f.Name, m.Fill)
				}
			}
		}
	}
	if s.IgnoreCase {
		seen := map[string]string{}
		for _, c := range s.Classes {
			k := s.normal(c)
			if o, dup := seen[k]; dup {
				return fmt.Errorf("schema %s: classes %q and %q are the same with ignore_case/trim", s.ID, o, c)
			}
			seen[k] = c
		}
	}
	return nil
}

// normal is the form labels and categories are compared in.
func (s *Schema) normal(v string) string {
	if s.Trim {
		v = strings.TrimSpace(v)
	}
	if s.IgnoreCase {
		v = strings.ToLower(v)
	}
	return v
}

// Columns returns the source columns the schema reads, in order of first
// use (features, then the label column when withLabel).
func (s *Schema) Columns(withLabel bool) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range s.Features {
		if c := f.SourceColumn(); !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	if withLabel && s.Label != "" {
		out = append(out, s.Label)
	}
	return out
}

// ErrMissing marks a row left out by a drop missing-value policy.
var ErrMissing = errors.New("missing value (the schema's missing policy drops the row)")

// errMissingNoPolicy is a missing value with no policy: the row is
// unreadable.
var errMissingNoPolicy = errors.New(`missing value and no missing-value policy: add "missing": {"policy": "drop"} to the schema, or a per-feature {"policy": "fill", "fill": "VALUE"}`)

// cellPlan says how to turn the source cell of one feature into the text
// of a decimal number.
type cellPlan struct {
	col      int             // index of the source column
	name     string          // the source column (for errors)
	category string          // normal form of the category ("" when numeric)
	isCat    bool            // one-hot indicator
	cats     map[string]bool // categorical: the normal forms of the list
	missing  *Missing        // effective policy (nil: none)
	isMiss   map[string]bool // the missing values (normal form for categorical, raw or trimmed for numbers)
	fill     string          // fill text (numeric) or normal category
}

// decoder turns source cells into feature text under the schema's options.
// Not safe for concurrent use.
type decoder struct {
	s     *Schema
	plans []cellPlan
	label int
	// decimalComma reads numbers with a decimal comma: the schema's
	// option, or the source's format (DecimalMarked).
	decimalComma bool
	comma        []byte // scratch for decimal commas
	filled       int64
	dropped      int64
	cellText     []string
}

// newDecoder maps the schema's columns to the source's header; it names
// the first column it cannot find.
func (s *Schema) newDecoder(src Rows, useClasses bool) (*decoder, error) {
	header := src.Columns()
	index := make(map[string]int, len(header))
	for i, h := range header {
		if _, dup := index[h]; dup {
			return nil, &RowError{Line: 1, Column: h, Err: errors.New("column appears twice in the header")}
		}
		index[h] = i
	}
	cats := map[string]*Categorical{}
	for i := range s.Categorical {
		cats[s.Categorical[i].Column] = &s.Categorical[i]
	}
	d := &decoder{s: s, plans: make([]cellPlan, len(s.Features)), label: -1, cellText: make([]string, len(s.Features)), decimalComma: s.readsDecimalComma(src)}
	for i, f := range s.Features {
		col := f.SourceColumn()
		c, ok := index[strings.TrimSpace(col)]
		if !ok {
			return nil, &RowError{Line: 1, Column: col, Err: missingColumn(header, col, "feature "+f.Name)}
		}
		p := cellPlan{col: c, name: col, missing: s.Missing}
		if f.Missing != nil {
			p.missing = f.Missing
		}
		if f.Category != nil {
			cat := cats[col]
			p.isCat, p.category, p.cats = true, s.normal(*f.Category), map[string]bool{}
			for _, v := range cat.Categories {
				p.cats[s.normal(v)] = true
			}
			if cat.Missing != nil {
				p.missing = cat.Missing
			}
		}
		if p.missing != nil {
			p.isMiss = map[string]bool{}
			vals := p.missing.Values
			if len(vals) == 0 {
				vals = DefaultMissingValues // a schema built in code
			}
			for _, v := range vals {
				if s.Trim {
					v = strings.TrimSpace(v)
				}
				p.isMiss[v] = true
				if p.isCat {
					p.isMiss[s.normal(v)] = true
				}
			}
			if p.missing.Policy == MissingFill {
				p.fill = p.missing.Fill
				if p.isCat {
					p.fill = s.normal(p.fill)
				}
			}
		}
		d.plans[i] = p
	}
	if useClasses {
		c, ok := index[strings.TrimSpace(s.Label)]
		if !ok {
			return nil, &RowError{Line: 1, Column: s.Label, Err: missingColumn(header, s.Label, "the label")}
		}
		d.label = c
	}
	return d, nil
}

// missingColumn says that a column is not in the header, and what is close.
func missingColumn(header []string, col, what string) error {
	msg := "feature missing from the header"
	if what == "the label" {
		msg = "label column missing from the header"
	} else if !strings.HasPrefix(what, "feature ") {
		msg = what + " column missing from the header"
	}
	squash := func(v string) string {
		return strings.NewReplacer(" ", "", "_", "", "-", "", ".", "").Replace(strings.ToLower(v))
	}
	for _, h := range header {
		if squash(h) == squash(col) {
			return fmt.Errorf("%s: the header has %q; rename that column to %q or set the feature's \"column\" to %q", msg, h, col, h)
		}
	}
	cols := header
	if len(cols) > 12 {
		cols = append(cols[:12:12], "…")
	}
	hint := "rename a column, or set the feature's \"column\""
	if len(header) == 1 {
		hint = "the header is one column: is the delimiter right? (give it with the source's delimiter option)"
	}
	return fmt.Errorf("%s (the header has %d columns: %s); %s", msg, len(header), strings.Join(quoteAll(cols), ", "), hint)
}

func quoteAll(v []string) []string {
	out := make([]string, len(v))
	for i, s := range v {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// decode fills d.cellText from one source row. A missing value under a drop
// policy gives a *RowError wrapping ErrMissing; any other unreadable cell a
// *RowError naming the column (Line 0: the caller sets it).
func (d *decoder) decode(rec []string) ([]string, error) {
	filled := false
	for i := range d.plans {
		p := &d.plans[i]
		v := rec[p.col]
		if d.s.Trim {
			v = strings.TrimSpace(v)
		}
		if p.isCat {
			n := d.s.normal(v)
			if p.isMiss[v] || p.isMiss[n] {
				if p.missing.Policy == MissingDrop {
					d.dropped++
					return nil, &RowError{Column: p.name, Err: ErrMissing}
				}
				n, filled = p.fill, true
			} else if !p.cats[n] {
				if p.missing == nil && (v == "" || isDefaultMissing(v)) {
					return nil, &RowError{Column: p.name, Err: errMissingNoPolicy}
				}
				return nil, &RowError{Column: p.name, Err: fmt.Errorf("%q is not one of the column's categories (add it to the schema's categorical list, or set trim/ignore_case)", v)}
			}
			if n == p.category {
				d.cellText[i] = "1"
			} else {
				d.cellText[i] = "0"
			}
			continue
		}
		fill := false
		if p.isMiss[v] {
			if p.missing.Policy == MissingDrop {
				d.dropped++
				return nil, &RowError{Column: p.name, Err: ErrMissing}
			}
			v, filled, fill = p.fill, true, true // the schema's decimal
		} else if p.missing == nil && isDefaultMissing(v) {
			return nil, &RowError{Column: p.name, Err: errMissingNoPolicy}
		}
		if d.decimalComma && !fill {
			if strings.IndexByte(v, '.') >= 0 {
				// 1.234 is 1234 with a thousands separator, or 1.234 in
				// another locale: neither is read silently.
				return nil, &RowError{Column: p.name, Err: fmt.Errorf("%q: a '.' in a number read with decimal commas (a thousands separator, or a decimal point?): remove thousands separators from the export, or read it without decimal_comma", v)}
			}
			v = d.commaToDot(v)
		}
		d.cellText[i] = v
	}
	if filled {
		d.filled++
	}
	return d.cellText, nil
}

// readsDecimalComma says whether the schema reads src's numbers with a
// decimal comma: its own option, or the source's format.
func (s *Schema) readsDecimalComma(src Rows) bool {
	m, ok := src.(DecimalMarked)
	return s.DecimalComma || ok && m.DecimalComma()
}

// isDefaultMissing says whether a cell looks missing (to say so in errors
// when the schema has no policy).
func isDefaultMissing(v string) bool {
	if v != "" && (v[0] >= '0' && v[0] <= '9' || v[0] == '-' || v[0] == '+' || v[0] == '.') {
		return false // a number: no default missing value starts so
	}
	v = strings.TrimSpace(v)
	for _, m := range DefaultMissingValues {
		if v == m {
			return true
		}
	}
	return false
}

// commaToDot rewrites the one decimal comma of a number; a cell with a dot
// or several commas is left as is (and will not parse: "1.234,5" is not
// accepted, thousands separators are ambiguous).
func (d *decoder) commaToDot(v string) string {
	i := strings.IndexByte(v, ',')
	if i < 0 || strings.IndexByte(v[i+1:], ',') >= 0 || strings.IndexByte(v, '.') >= 0 {
		return v
	}
	d.comma = append(append(append(d.comma[:0], v[:i]...), '.'), v[i+1:]...)
	return string(d.comma)
}
