package schema

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
)

// ReadingFields are the parts of a schema that say how rows are read, by
// their JSON keys: the schema's own and, for those in FeatureFields, a
// feature's; "schema" for a difference none of the others names. A
// Difference names one of them.
var ReadingFields = []string{"id", "features", "label", "classes", "quant_bits", "missing", "categorical", "trim", "ignore_case", "decimal_comma",
	"name", "column", "category", "min", "max", "schema"}

// FeatureFields are the ReadingFields of a feature ("missing" is a
// feature's or the schema's).
var FeatureFields = []string{"name", "column", "category", "min", "max", "missing"}

// Difference is where one schema reads rows otherwise than another: one of
// ReadingFields, and the index of the feature it belongs to (-1 for the
// schema's own). It is public: it compares two public schemas.
type Difference struct {
	Field   string
	Feature int
}

// ReadingDifference returns the first place where t reads rows otherwise
// than s, or nil when it reads them as s does: t may change only the map
// (centers, scales, clip norm), the profile job's output (see SameReading).
func (s *Schema) ReadingDifference(t *Schema) *Difference {
	top := func(field string) *Difference { return &Difference{Field: field, Feature: -1} }
	switch {
	case s.ID != t.ID:
		return top("id")
	case len(s.Features) != len(t.Features):
		return top("features")
	case s.Label != t.Label:
		return top("label")
	case !slices.Equal(s.Classes, t.Classes):
		return top("classes")
	case s.Bits != t.Bits:
		return top("quant_bits")
	}
	for i, f := range s.Features {
		g := t.Features[i]
		field := ""
		switch {
		case f.Name != g.Name:
			field = "name"
		case !sameDecimal(f.Min, g.Min):
			field = "min"
		case !sameDecimal(f.Max, g.Max):
			field = "max"
		case f.Column != g.Column:
			field = "column"
		case (f.Category == nil) != (g.Category == nil) || f.Category != nil && *f.Category != *g.Category:
			field = "category"
		case !sameJSON(f.Missing, g.Missing):
			field = "missing"
		default:
			continue
		}
		return &Difference{Field: field, Feature: i}
	}
	switch {
	case !sameJSON(s.Missing, t.Missing):
		return top("missing")
	case !sameJSON(s.Categorical, t.Categorical):
		return top("categorical")
	case s.Trim != t.Trim:
		return top("trim")
	case s.IgnoreCase != t.IgnoreCase:
		return top("ignore_case")
	case s.DecimalComma != t.DecimalComma:
		return top("decimal_comma")
	}
	// Anything else the canonical form holds: t with s's map must be s.
	u := *t
	u.Features = slices.Clone(t.Features)
	for i := range u.Features {
		u.Features[i].Center, u.Features[i].Scale = s.Features[i].Center, s.Features[i].Scale
	}
	u.ClipNorm = s.ClipNorm
	if !bytes.Equal(u.Canonical(), s.Canonical()) {
		return top("schema")
	}
	return nil
}

// ColumnFeature returns the field and feature a source column stands for
// in the schema: the first feature read from it ("column"), or the label
// ("label", -1); nil for a column the schema does not read.
func (s *Schema) ColumnFeature(column string) *Difference {
	for i, f := range s.Features {
		if f.SourceColumn() == column {
			return &Difference{Field: "column", Feature: i}
		}
	}
	if column != "" && column == s.Label {
		return &Difference{Field: "label", Feature: -1}
	}
	return nil
}

func sameDecimal(a, b *fixedpoint.Decimal) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Rat().Cmp(b.Rat()) == 0)
}

// sameJSON compares two option values by their encoding (both are plain
// data the canonical form encodes the same way).
func sameJSON(a, b any) bool {
	x, errx := json.Marshal(a)
	y, erry := json.Marshal(b)
	return errx == nil && erry == nil && bytes.Equal(x, y)
}
