package schema

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
)

// Infer builds a schema from a whole CSV file: every column except label is a
// feature, centered at its pooled mean and scaled by its pooled population
// standard deviation (ddof = 0); a feature whose deviation is at most
// 1e-12 (|mean| + 1) is constant and gets scale 1 (or 1e-12 |mean| beyond
// 1e12, so that every row of the file maps). The classes are the
// distinct labels in sorted order. This is the preprocessing of
// ../shared/datasets/reference.json.
//
// Infer reads the pooled data, so it is for simulations, tests and schemas
// prepared from public data. In a deployment centers and scales are public
// parameters agreed on beforehand; computing them from the owners' pooled rows
// would leak. The statistics are computed in float64 (Welford's algorithm)
// because they are public parameters, and written as the exact decimal of the
// float.
func Infer(r io.Reader, id, label string) (*Schema, error) {
	rows, err := NewCSVRows(r, CSVOptions{})
	if err != nil {
		return nil, err
	}
	return InferRows(rows, InferOptions{ID: id, Label: label})
}

// InferOptions say which columns Infer reads and how.
type InferOptions struct {
	ID string
	// Label is the class column ("" for none).
	Label string
	// Exclude lists columns to leave out (an id, a date).
	Exclude []string
	// Categorical lists columns to one-hot encode: their distinct values
	// (after Trim and IgnoreCase) become the public category list, and one
	// indicator feature "COLUMN=VALUE" each.
	Categorical []string
	// Missing, Trim and IgnoreCase are copied into the schema; with
	// Missing set, missing cells are left out of a column's mean and
	// deviation.
	Missing          *Missing
	Trim, IgnoreCase bool
	// DecimalComma reads the rows' numbers with a decimal comma, as a
	// source that says so does (DecimalMarked): the file's format, not
	// written into the schema, so that other owners' files are read as
	// they are written.
	DecimalComma bool
}

// InferRows is Infer for any source, with options.
func InferRows(rows Rows, opt InferOptions) (*Schema, error) {
	header := rows.Columns()
	index := make(map[string]int, len(header))
	for i, h := range header {
		if _, dup := index[h]; dup {
			return nil, &RowError{Line: 1, Column: h, Err: errors.New("column appears twice in the header")}
		}
		index[h] = i
	}
	s := &Schema{ID: opt.ID, Label: opt.Label, ClipNorm: fixedpoint.MustDecimal(DefaultClipNorm), Bits: DefaultBits,
		Missing: opt.Missing.withDefaults(), Trim: opt.Trim, IgnoreCase: opt.IgnoreCase}
	if s.Missing != nil && s.Missing.Policy == MissingFill {
		return nil, errors.New("infer schema: the schema-wide missing policy can only be drop")
	}
	skip := map[string]bool{}
	need := func(c, what string) error {
		if _, ok := index[c]; !ok {
			return &RowError{Line: 1, Column: c, Err: missingColumn(header, c, what)}
		}
		return nil
	}
	labelCol := -1
	if opt.Label != "" {
		if err := need(opt.Label, "the label"); err != nil {
			return nil, err
		}
		labelCol = index[opt.Label]
		skip[opt.Label] = true
	}
	for _, c := range opt.Exclude {
		if err := need(c, "--exclude"); err != nil {
			return nil, err
		}
		skip[c] = true
	}
	isCat := map[string]bool{}
	for _, c := range opt.Categorical {
		if err := need(c, "--categorical"); err != nil {
			return nil, err
		}
		isCat[c] = true
	}
	missing := map[string]bool{}
	if s.Missing != nil {
		for _, v := range s.Missing.Values {
			missing[s.normal(v)] = true
		}
	}
	type column struct {
		idx        int
		cat        bool
		n          float64
		mean, m2   float64
		categories map[string]int64 // categorical: value -> count
	}
	var cols []*column
	for i, h := range header {
		if skip[h] {
			continue
		}
		c := &column{idx: i, cat: isCat[h]}
		if c.cat {
			c.categories = map[string]int64{}
		}
		cols = append(cols, c)
	}
	if len(cols) == 0 {
		return nil, errors.New("infer schema: no feature columns left")
	}
	labels := map[string]bool{}
	dec := &decoder{s: s, decimalComma: opt.DecimalComma || s.readsDecimalComma(rows)}
	n := 0
	for {
		rec, err := rows.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		line := rows.Line()
		n++
		for _, c := range cols {
			v := rec[c.idx]
			if s.Trim {
				v = strings.TrimSpace(v)
			}
			if s.Missing != nil && (missing[v] || missing[s.normal(v)]) {
				continue
			}
			if c.cat {
				k := s.normal(v)
				if _, ok := c.categories[k]; !ok && len(c.categories) >= MaxClasses {
					return nil, &RowError{Line: line, Column: header[c.idx], Err: fmt.Errorf("more than %d categories", MaxClasses)}
				}
				c.categories[k]++
				continue
			}
			if dec.decimalComma {
				v = dec.commaToDot(v)
			}
			x, err := fixedpoint.ParseFloat(v)
			if err != nil {
				hint := "; leave the column out with --exclude, or one-hot encode it with --categorical"
				if strings.Contains(v, ",") && !dec.decimalComma {
					hint = "; a decimal comma? give the file as FILE#decimal_comma=true (or use --decimal-comma)"
				}
				if isDefaultMissing(v) {
					hint = "; a missing value? use --missing drop"
				}
				return nil, &RowError{Line: line, Column: header[c.idx], Err: fmt.Errorf("%w%s", err, hint)}
			}
			c.n++
			delta := x - c.mean
			c.mean += delta / c.n
			c.m2 += delta * (x - c.mean)
		}
		if labelCol >= 0 {
			l := s.normal(rec[labelCol])
			if !labels[l] {
				if len(labels) >= MaxClasses {
					return nil, &RowError{Line: line, Column: opt.Label, Err: fmt.Errorf("more than %d distinct labels", MaxClasses)}
				}
				labels[l] = true
			}
		}
	}
	if n == 0 {
		return nil, errors.New("infer schema: no rows")
	}
	for _, c := range cols {
		name := header[c.idx]
		if !c.cat {
			if c.n == 0 {
				return nil, &RowError{Line: 1, Column: name, Err: errors.New("every value is missing")}
			}
			f, err := inferFeature(name, c.mean, c.m2/c.n)
			if err != nil {
				return nil, err
			}
			s.Features = append(s.Features, f)
			continue
		}
		cats := slices.Sorted(maps.Keys(c.categories))
		s.Categorical = append(s.Categorical, Categorical{Column: name, Categories: cats})
		var total float64
		for _, k := range cats {
			total += float64(c.categories[k])
		}
		for _, k := range cats {
			p := float64(c.categories[k]) / total
			f, err := inferFeature(name+"="+k, p, p*(1-p))
			if err != nil {
				return nil, err
			}
			f.Column, f.Category = name, &k
			s.Features = append(s.Features, f)
		}
	}
	for l := range labels {
		s.Classes = append(s.Classes, l)
	}
	slices.Sort(s.Classes)
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// inferFeature is a feature centered at mean and scaled by sqrt(variance).
func inferFeature(name string, mean, variance float64) (Feature, error) {
	sd := math.Sqrt(variance)
	if sd <= 1e-12*(math.Abs(mean)+1) {
		// Constant: scale 1 as in the reference, unless the values are
		// so large that the float64 center is off by more than the
		// quantization range allows (1e28 with a center 4e11 away).
		sd = max(1, 1e-12*math.Abs(mean))
	}
	center, err := fixedpoint.FromFloat(mean)
	if err != nil {
		return Feature{}, err
	}
	scale, err := fixedpoint.FromFloat(sd)
	if err != nil {
		return Feature{}, err
	}
	return Feature{Name: name, Center: center, Scale: scale}, nil
}
