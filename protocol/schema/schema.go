package schema

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
)

// Defaults of the optional fields.
const (
	DefaultBits     = 16
	DefaultClipNorm = "1"
	// MaxFeatures bounds d: a genotype schema has a feature a variant. A job
	// that releases the d x d statistics has its own, lower bound
	// (job.MaxScatterFeatures).
	MaxFeatures = 1 << 20
	// MaxClasses bounds K.
	MaxClasses = 1024
)

// Feature is one input column and its public affine map.
type Feature struct {
	Name string `json:"name"`
	// Column is the source column the feature is read from when it differs
	// from Name (a column with spaces, or one categorical column feeding
	// several indicator features).
	Column string `json:"column,omitempty"`
	// Category, when set, makes the feature the indicator of one category
	// of a categorical column (one-hot encoding): its value is 1 when the
	// cell is that category and 0 otherwise. The column must be listed in
	// the schema's Categorical with Category among its categories.
	Category *string            `json:"category,omitempty"`
	Center   fixedpoint.Decimal `json:"center"`
	Scale    fixedpoint.Decimal `json:"scale"`
	// Min and Max, when set, are public declared bounds: owners clamp each
	// value to [Min, Max] before the map (counting locally, never sending,
	// how many they clamp). The profile job needs them: with every value in
	// a known range, one row's effect on the per-feature sums is bounded.
	Min *fixedpoint.Decimal `json:"min,omitempty"`
	Max *fixedpoint.Decimal `json:"max,omitempty"`
	// Missing, when set, is this feature's missing-value policy; it
	// overrides the schema-wide one.
	Missing *Missing `json:"missing,omitempty"`
}

// SourceColumn returns the source column the feature is read from.
func (f Feature) SourceColumn() string {
	if f.Column != "" {
		return f.Column
	}
	return f.Name
}

// Schema is the public description of a dataset.
type Schema struct {
	// ID names the dataset, e.g. "wdbc".
	ID       string    `json:"id"`
	Features []Feature `json:"features"`
	// Label is the CSV column holding the class; empty when the dataset has
	// no classes (PCA only).
	Label   string   `json:"label,omitempty"`
	Classes []string `json:"classes,omitempty"`
	// ClipNorm is C: rows are clipped to ||z||_2 <= C.
	ClipNorm fixedpoint.Decimal `json:"clip_norm"`
	// Bits is g: values are quantized to multiples of 2^-g.
	Bits uint `json:"quant_bits"`

	// How to read the source (every option is public and in the hash; an
	// option left out is not written, so schemas without it keep their
	// hash).

	// Categorical lists the categorical columns and their public category
	// lists; features with a Category encode them one-hot.
	Categorical []Categorical `json:"categorical,omitempty"`
	// Missing is the schema-wide missing-value policy (nil: a missing value
	// makes the row unreadable, and the row is skipped).
	Missing *Missing `json:"missing,omitempty"`
	// DecimalComma reads "1,5" as 1.5 in every owner's source (European
	// spreadsheets); the CSV delimiter is then ';' or a tab. The decimal
	// mark is a property of one export's format, like its delimiter: give
	// it with that source instead (FILE#decimal_comma=true, DecimalMarked),
	// so that the other owners' files are read as they are written. Kept
	// for the schemas that set it.
	DecimalComma bool `json:"decimal_comma,omitempty"`
	// Trim removes white space around every cell (numbers, labels,
	// categories) before it is read. Header names are always trimmed.
	Trim bool `json:"trim,omitempty"`
	// IgnoreCase compares labels and categories without case: " Yes" and
	// "yes" are the same class when Trim is also set.
	IgnoreCase bool `json:"ignore_case,omitempty"`
}

// Categorical is a categorical column and its public category list.
type Categorical struct {
	Column     string   `json:"column"`
	Categories []string `json:"categories"`
	// Missing, when set, is the column's missing-value policy (Fill must be
	// one of the categories).
	Missing *Missing `json:"missing,omitempty"`
}

// Missing-value policies.
const (
	// MissingDrop leaves the row out of the statistics (counted in the
	// owner's local report only).
	MissingDrop = "drop"
	// MissingFill reads the public Fill value instead.
	MissingFill = "fill"
)

// DefaultMissingValues are the cells that count as missing when a policy
// does not list its own. A NULL from a database reads as "".
var DefaultMissingValues = []string{"", "NA", "N/A", "NaN", "nan", "null", "NULL", "?"}

// Missing is a missing-value policy: which cells count as missing and what
// to do with a row that has one.
type Missing struct {
	// Policy is MissingDrop or MissingFill.
	Policy string `json:"policy"`
	// Fill is the value used with MissingFill: a decimal number for a
	// numeric feature, a category for a categorical column.
	Fill string `json:"fill,omitempty"`
	// Values are the cells that count as missing (compared after Trim when
	// the schema trims); Parse fills in DefaultMissingValues when empty.
	Values []string `json:"values,omitempty"`
}

func (m *Missing) validate() error {
	switch m.Policy {
	case MissingDrop:
		if m.Fill != "" {
			return fmt.Errorf("missing: policy %q takes no fill value", m.Policy)
		}
	case MissingFill:
	default:
		return fmt.Errorf("missing: policy %q is not %q or %q", m.Policy, MissingDrop, MissingFill)
	}
	for _, v := range m.Values {
		if !utf8.ValidString(v) {
			return fmt.Errorf("missing: value %q is not valid UTF-8", v)
		}
	}
	return nil
}

// withDefaults returns a copy of m with the default missing values.
func (m *Missing) withDefaults() *Missing {
	if m == nil {
		return nil
	}
	c := *m
	if len(c.Values) == 0 {
		c.Values = slices.Clone(DefaultMissingValues)
	}
	return &c
}

// Parse decodes a schema file strictly (unknown fields are errors), fills in
// the defaults and validates it.
func Parse(data []byte) (*Schema, error) {
	var s Schema
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	raw := struct {
		Schema
		ClipNorm *fixedpoint.Decimal `json:"clip_norm"`
		Bits     *uint               `json:"quant_bits"`
	}{}
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("schema: trailing data after the JSON object")
	}
	s = raw.Schema
	if err := s.boundsOnly(data); err != nil {
		return nil, err
	}
	s.ClipNorm = fixedpoint.MustDecimal(DefaultClipNorm)
	if raw.ClipNorm != nil {
		s.ClipNorm = *raw.ClipNorm
	}
	s.Bits = DefaultBits
	if raw.Bits != nil {
		s.Bits = *raw.Bits
	}
	s.FillDefaults()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// boundsOnly gives the features that declare bounds min and max (a one-hot
// category feature has [0, 1] without them) and neither a center nor a
// scale the map of their bounds onto [-1, 1] (BoundsMap): a
// schema of bounds only is one a profile can start from, and serves as it
// is until a profile chooses the map. A feature with neither bounds nor a
// scale is left for Validate to refuse.
func (s *Schema) boundsOnly(data []byte) error {
	var given struct {
		Features []map[string]json.RawMessage `json:"features"`
	}
	if err := json.Unmarshal(data, &given); err != nil || len(given.Features) != len(s.Features) {
		return fmt.Errorf("schema: %v", err)
	}
	for i, g := range given.Features {
		_, center := g["center"]
		_, scale := g["scale"]
		f := &s.Features[i]
		lo, hi := f.Bounds() // a one-hot category's are [0, 1]
		switch {
		case center && scale:
		case lo == nil || hi == nil:
			if !scale {
				return fmt.Errorf("schema %s: feature %q has no scale: give its center and scale, or its bounds min and max (a profile then chooses the map)", s.ID, f.Name)
			}
		case center || scale:
			return fmt.Errorf("schema %s: feature %q gives a center or a scale but not both: give both, or neither with bounds min and max (the bounds' map)", s.ID, f.Name)
		default:
			c, sc, err := BoundsMap(*lo, *hi)
			if err != nil {
				return fmt.Errorf("schema %s: feature %q: %w", s.ID, f.Name, err)
			}
			f.Center, f.Scale = c, sc
		}
	}
	return nil
}

// BoundsMap returns the center (min+max)/2 and scale (max-min)/2 that map
// [min, max] onto [-1, 1], exactly (half a sum of decimals is a decimal).
func BoundsMap(lo, hi fixedpoint.Decimal) (center, scale fixedpoint.Decimal, err error) {
	if lo.Rat().Cmp(hi.Rat()) >= 0 {
		return center, scale, fmt.Errorf("bounds [%s, %s]: min must be below max", lo, hi)
	}
	two := big.NewRat(2, 1)
	if center, err = exactDecimal(new(big.Rat).Quo(new(big.Rat).Add(lo.Rat(), hi.Rat()), two)); err != nil {
		return center, scale, err
	}
	scale, err = exactDecimal(new(big.Rat).Quo(new(big.Rat).Sub(hi.Rat(), lo.Rat()), two))
	return center, scale, err
}

// exactDecimal returns a rational with a finite decimal expansion as a
// decimal, refusing to round.
func exactDecimal(r *big.Rat) (fixedpoint.Decimal, error) {
	text := strings.TrimRight(strings.TrimRight(r.FloatString(40), "0"), ".")
	d, err := fixedpoint.ParseDecimal(text)
	if err == nil && d.Rat().Cmp(r) != 0 {
		err = fmt.Errorf("%s has more than 40 decimals", r.RatString())
	}
	return d, err
}

// FillDefaults writes out the defaults of the options that are set (the
// missing values of each missing-value policy), so that a schema and the
// same schema with its defaults spelled out have one hash.
func (s *Schema) FillDefaults() {
	s.Missing = s.Missing.withDefaults()
	for i := range s.Features {
		s.Features[i].Missing = s.Features[i].Missing.withDefaults()
	}
	for i := range s.Categorical {
		s.Categorical[i].Missing = s.Categorical[i].Missing.withDefaults()
	}
}

// Bounds returns the feature's bounds: its declared min and max, or for a
// one-hot category feature without them [0, 1] (an indicator is 0 or 1, so
// they change no value read); nil where there is none.
func (f Feature) Bounds() (lo, hi *fixedpoint.Decimal) {
	lo, hi = f.Min, f.Max
	if f.Category != nil {
		if lo == nil {
			lo = &indicatorLo
		}
		if hi == nil {
			hi = &indicatorHi
		}
	}
	return lo, hi
}

var indicatorLo, indicatorHi = fixedpoint.MustDecimal("0"), fixedpoint.MustDecimal("1")

// Validate checks the schema and names the first problem it finds.
func (s *Schema) Validate() error {
	if strings.TrimSpace(s.ID) == "" {
		return fmt.Errorf("schema: id is empty")
	}
	// Names must survive the canonical JSON encoding unchanged (it writes
	// invalid UTF-8 as U+FFFD), or the schema's hash would change when it
	// is written and read back.
	for _, n := range append(append([]string{s.ID, s.Label}, s.FeatureNames()...), s.Classes...) {
		if !utf8.ValidString(n) {
			return fmt.Errorf("schema %q: name %q is not valid UTF-8", s.ID, n)
		}
	}
	if len(s.Features) == 0 {
		return fmt.Errorf("schema %s: no features", s.ID)
	}
	if len(s.Features) > MaxFeatures {
		return fmt.Errorf("schema %s: %d features exceed %d", s.ID, len(s.Features), MaxFeatures)
	}
	seen := make(map[string]bool, len(s.Features)+1)
	for i, f := range s.Features {
		if f.Name == "" {
			return fmt.Errorf("schema %s: feature %d has no name", s.ID, i)
		}
		if seen[f.Name] {
			return fmt.Errorf("schema %s: feature %q appears twice", s.ID, f.Name)
		}
		seen[f.Name] = true
		if f.Scale.Sign() <= 0 {
			return fmt.Errorf("schema %s: feature %q: scale %s must be positive", s.ID, f.Name, f.Scale)
		}
		if f.Min != nil && f.Max != nil && f.Min.Rat().Cmp(f.Max.Rat()) > 0 {
			return fmt.Errorf("schema %s: feature %q: min %s is above max %s", s.ID, f.Name, f.Min, f.Max)
		}
	}
	if len(s.Classes) > 0 && s.Label == "" {
		return fmt.Errorf("schema %s: classes given but no label column", s.ID)
	}
	if s.Label != "" && seen[s.Label] {
		return fmt.Errorf("schema %s: label column %q is also a feature", s.ID, s.Label)
	}
	if err := s.validateOptions(); err != nil {
		return err
	}
	if len(s.Classes) > MaxClasses {
		return fmt.Errorf("schema %s: %d classes exceed %d", s.ID, len(s.Classes), MaxClasses)
	}
	cls := make(map[string]bool, len(s.Classes))
	for _, c := range s.Classes {
		if cls[c] {
			return fmt.Errorf("schema %s: class %q appears twice", s.ID, c)
		}
		cls[c] = true
	}
	if s.Bits > fixedpoint.MaxBits {
		return fmt.Errorf("schema %s: quant_bits %d exceed %d", s.ID, s.Bits, fixedpoint.MaxBits)
	}
	if _, err := fixedpoint.Bound(s.ClipNorm, s.Bits); err != nil {
		return fmt.Errorf("schema %s: %w", s.ID, err)
	}
	return nil
}

// SameReading returns nil when t reads rows exactly as s does and may
// differ only in the map that follows: each feature's center and scale and
// the clip norm. Same ID, features (names, order, declared bounds), label,
// classes and quantization bits; otherwise an error naming the first
// difference. An owner serving s takes part in jobs under such a t (the
// profile job chooses the map), never under a schema that reads its rows
// differently or bounds them less.
func (s *Schema) SameReading(t *Schema) error {
	d := s.ReadingDifference(t)
	if d == nil {
		return nil
	}
	var f, g Feature
	if d.Feature >= 0 {
		f, g = s.Features[d.Feature], t.Features[d.Feature]
	}
	switch d.Field {
	case "id":
		return fmt.Errorf("dataset %q, not %q", t.ID, s.ID)
	case "features":
		return fmt.Errorf("%d features, not %d", len(t.Features), len(s.Features))
	case "label", "classes":
		return fmt.Errorf("label %q and classes %q, not %q and %q", t.Label, t.Classes, s.Label, s.Classes)
	case "quant_bits":
		return fmt.Errorf("quant_bits %d, not %d", t.Bits, s.Bits)
	case "name":
		return fmt.Errorf("feature %d is %q, not %q", d.Feature, g.Name, f.Name)
	case "min", "max":
		return fmt.Errorf("feature %q: bounds [%v, %v], not [%v, %v]", f.Name, g.Min, g.Max, f.Min, f.Max)
	}
	if d.Feature >= 0 {
		return fmt.Errorf("feature %q: its %s differs", f.Name, d.Field)
	}
	return fmt.Errorf("its reading options differ (%s)", d.Field)
}

// D returns the number of features.
func (s *Schema) D() int { return len(s.Features) }

// K returns the number of classes of an analysis: 1 when the schema has no
// classes or classes are not used, len(Classes) otherwise.
func (s *Schema) K(useClasses bool) int {
	if !useClasses || len(s.Classes) == 0 {
		return 1
	}
	return len(s.Classes)
}

// Bound returns the clip radius in integer units, B = floor(2^g C).
func (s *Schema) Bound() int64 {
	b, err := fixedpoint.Bound(s.ClipNorm, s.Bits)
	if err != nil {
		panic(fmt.Sprintf("schema %s not validated: %v", s.ID, err))
	}
	return b
}

// FeatureNames returns the feature names in order.
func (s *Schema) FeatureNames() []string {
	names := make([]string, len(s.Features))
	for i, f := range s.Features {
		names[i] = f.Name
	}
	return names
}

// Canonical returns the canonical JSON encoding that the hash is taken over.
func (s *Schema) Canonical() []byte {
	// encoding/json writes struct fields in declaration order and Decimal
	// as its canonical text, so this is canonical as long as the struct is.
	// The defaults of set options are written out (as Parse fills them in),
	// so a schema built in code hashes as its parsed file does.
	c := *s
	c.Features, c.Categorical = slices.Clone(s.Features), slices.Clone(s.Categorical)
	c.FillDefaults()
	b, err := json.Marshal(&c)
	if err != nil {
		panic(fmt.Sprintf("schema: marshal: %v", err))
	}
	return b
}

// Hash returns the SHA-256 of the canonical encoding.
func (s *Schema) Hash() [32]byte { return sha256.Sum256(s.Canonical()) }

// HashHex returns Hash as lower-case hex.
func (s *Schema) HashHex() string {
	h := s.Hash()
	return hex.EncodeToString(h[:])
}
