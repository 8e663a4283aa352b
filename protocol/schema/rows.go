package schema

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/fedpca/fedpca/protocol/fixedpoint"
)

// RowError names the line and column of a bad CSV cell.
type RowError struct {
	Line   int    // 1-based line number in the file (the header is line 1)
	Column string // column name, empty for errors about the whole row
	Err    error
}

func (e *RowError) Error() string {
	if e.Column == "" {
		return fmt.Sprintf("line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("line %d, column %q: %v", e.Line, e.Column, e.Err)
}

func (e *RowError) Unwrap() error { return e.Err }

// ErrUnknownClass reports a label that is not in the schema's class list.
var ErrUnknownClass = errors.New("label is not one of the schema's classes")

// Mapper turns raw feature text into a quantized, clipped row. It holds
// scratch space and is not safe for concurrent use.
type Mapper struct {
	s       *Schema
	quant   []*fixedpoint.Quantizer
	bounds  []bounds
	clip    *fixedpoint.Clipper
	scratch fixedpoint.Scratch
	classes map[string]int
	index   map[string]int // feature name -> position
	clamped int64
	lo, hi  []int64 // per-feature range after the map, when tracked
	exact   bool    // big-integer quantization and the sorted clip only
}

// bounds are a feature's declared [min, max] in integer units.
type bounds struct {
	lo, hi       int64
	hasLo, hasHi bool
}

func (b bounds) clamp(v int64) (int64, bool) {
	switch {
	case b.hasLo && v < b.lo:
		return b.lo, true
	case b.hasHi && v > b.hi:
		return b.hi, true
	}
	return v, false
}

// NewMapper returns the row map of the schema.
func (s *Schema) NewMapper() (*Mapper, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	key := string(s.Canonical())
	mappers.Lock()
	t := mappers.m[key]
	mappers.Unlock()
	if t == nil {
		var err error
		if t, err = s.newMapper(); err != nil {
			return nil, err
		}
		mappers.Lock()
		if len(mappers.m) >= maxMappers {
			clear(mappers.m)
		}
		mappers.m[key] = t
		mappers.Unlock()
	}
	m := t.clone()
	m.s = s
	return m, nil
}

// mappers keeps the read-only part of the latest schemas' row maps (the
// quantizers' constants, the declared bounds), by canonical encoding:
// building them takes longer than reading a small owner's rows, and every
// job of a dataset reads with the same schema.
var mappers = struct {
	sync.Mutex
	m map[string]*Mapper
}{m: map[string]*Mapper{}}

const maxMappers = 64

func (s *Schema) newMapper() (*Mapper, error) {
	m := &Mapper{s: s, quant: make([]*fixedpoint.Quantizer, len(s.Features)), bounds: make([]bounds, len(s.Features))}
	for i, f := range s.Features {
		q, err := fixedpoint.NewQuantizer(f.Center, f.Scale, s.Bits)
		if err != nil {
			return nil, fmt.Errorf("schema %s: feature %q: %w", s.ID, f.Name, err)
		}
		m.quant[i] = q
		b := &m.bounds[i]
		lo, hi := f.Bounds()
		if lo != nil {
			if b.lo, err = q.Quantize(lo.String(), &m.scratch); err != nil {
				return nil, fmt.Errorf("schema %s: feature %q: min: %w", s.ID, f.Name, err)
			}
			b.hasLo = true
		}
		if hi != nil {
			if b.hi, err = q.Quantize(hi.String(), &m.scratch); err != nil {
				return nil, fmt.Errorf("schema %s: feature %q: max: %w", s.ID, f.Name, err)
			}
			b.hasHi = true
		}
	}
	var err error
	if m.clip, err = fixedpoint.NewClipper(s.Bound()); err != nil {
		return nil, err
	}
	m.classes = make(map[string]int, len(s.Classes))
	for i, c := range s.Classes {
		m.classes[s.normal(c)] = i
	}
	m.index = make(map[string]int, len(s.Features))
	for i, f := range s.Features {
		m.index[f.Name] = i
		m.index[f.SourceColumn()] = i
	}
	return m, nil
}

// InBox returns nil when every feature declares bounds that the map sends
// into [-1, 1] (|quantized bound| <= 2^g), so that every row read is in the
// box |z_i| <= 1; otherwise an error naming the first feature that is not.
func (s *Schema) InBox() error {
	m, err := s.NewMapper()
	if err != nil {
		return err
	}
	one := int64(1) << s.Bits
	for i, b := range m.bounds {
		f := s.Features[i]
		switch {
		case !b.hasLo || !b.hasHi:
			return fmt.Errorf("needs declared bounds min and max on every feature; %q has none", f.Name)
		case b.lo < -one || b.hi > one:
			return fmt.Errorf("needs every feature's bounds mapped into [-1, 1]; %q: [%s, %s] with center %s and scale %s is not", f.Name, f.Min, f.Max, f.Center, f.Scale)
		}
	}
	return nil
}

// Class returns the index of a label in the class list.
func (m *Mapper) Class(label string) (int, error) {
	k, ok := m.classes[m.s.normal(label)]
	if !ok {
		return 0, fmt.Errorf("%q: %w%s", label, ErrUnknownClass, m.s.classHint(label))
	}
	return k, nil
}

// classHint suggests the reading option that would make a label one of
// the classes: trim, ignore_case, or both ("" when neither would).
func (s *Schema) classHint(label string) string {
	for _, c := range s.Classes {
		var opts []string
		l := label
		if !s.Trim && strings.TrimSpace(l) != l {
			l, opts = strings.TrimSpace(l), append(opts, `"trim": true`)
		}
		if !s.IgnoreCase && l != c && strings.EqualFold(l, c) {
			l, opts = c, append(opts, `"ignore_case": true`)
		}
		if l == c && len(opts) > 0 {
			return fmt.Sprintf(" (the class %q differs only in white space or case: set %s in the schema)", c, strings.Join(opts, " and "))
		}
	}
	return ""
}

// Map quantizes, clamps to the declared bounds and clips one row given as
// the text of its features in schema order. dst must have length D. On error
// it names the feature (as a *RowError with Line 0) and dst is unspecified.
func (m *Mapper) Map(cells []string, dst []int64) (clipped bool, err error) {
	if len(cells) != len(m.quant) || len(dst) != len(m.quant) {
		return false, fmt.Errorf("row has %d values, schema %s has %d features", len(cells), m.s.ID, len(m.quant))
	}
	quantize := (*fixedpoint.Quantizer).Quantize
	clip := (*fixedpoint.Clipper).Clip
	if m.exact {
		quantize, clip = (*fixedpoint.Quantizer).QuantizeExact, (*fixedpoint.Clipper).ClipExact
	}
	for i, c := range cells {
		v, err := quantize(m.quant[i], c, &m.scratch)
		if err != nil {
			return false, &RowError{Column: m.s.Features[i].SourceColumn(), Err: err}
		}
		v, c := m.bounds[i].clamp(v)
		if c {
			m.clamped++
		}
		dst[i] = v
	}
	if m.lo != nil {
		for i, v := range dst {
			m.lo[i], m.hi[i] = min(m.lo[i], v), max(m.hi[i], v)
		}
	}
	return clip(m.clip, dst)
}

// clone returns a mapper for another goroutine: the same map, its own
// scratch space, counters at zero, no range tracking.
func (m *Mapper) clone() *Mapper {
	c := *m
	c.clip, _ = fixedpoint.NewClipper(m.clip.Bound()) // the bound was valid for m
	c.scratch = fixedpoint.Scratch{}
	c.clamped, c.lo, c.hi = 0, nil, nil
	return &c
}

// Clamped returns how many values Map has clamped to a declared bound so far.
func (m *Mapper) Clamped() int64 { return m.clamped }

// RowMap maps one source row at a time: the schema's reading options
// (columns, categories, missing values, decimal commas), the class, and the
// row map (quantize, clamp, clip). A Reader holds one; code that maps rows
// on several goroutines gives each its own (Clone). Not safe for concurrent
// use.
type RowMap struct {
	m          *Mapper
	dec        *decoder
	useClasses bool
}

// NewRowMap prepares to map the rows of a source (its columns, its
// format), which it checks first (CheckSource); see NewRowReader.
func (s *Schema) NewRowMap(src Rows, useClasses bool) (*RowMap, error) {
	if err := s.CheckSource(src, useClasses); err != nil {
		return nil, err
	}
	m, err := s.NewMapper()
	if err != nil {
		return nil, err
	}
	if useClasses && len(s.Classes) == 0 {
		return nil, fmt.Errorf("schema %s has no classes", s.ID)
	}
	dec, err := s.newDecoder(src, useClasses)
	if err != nil {
		return nil, err
	}
	return &RowMap{m: m, dec: dec, useClasses: useClasses}, nil
}

// Clone returns a row map for another goroutine: the same map, its own
// scratch space, its counters at zero.
func (rm *RowMap) Clone() *RowMap {
	dec := *rm.dec
	dec.comma, dec.filled, dec.dropped = nil, 0, 0
	dec.cellText = make([]string, len(rm.dec.cellText))
	return &RowMap{m: rm.m.clone(), dec: &dec, useClasses: rm.useClasses}
}

// ClampBox makes the map clamp every value into the box [-1, 1] of the
// schema's units (at most 2^g in absolute value), after the declared
// bounds and before the clip: a profile's round that measures the values
// inside a window (the window is the schema's map) counts the rest at its
// edges. The clamps are counted with the declared bounds'.
func (rm *RowMap) ClampBox() {
	m := *rm.m
	one := int64(1) << m.s.Bits
	m.bounds = slices.Clone(m.bounds)
	for i, b := range m.bounds {
		if !b.hasLo || b.lo < -one {
			b.lo = -one
		}
		if !b.hasHi || b.hi > one {
			b.hi = one
		}
		b.hasLo, b.hasHi = true, true
		m.bounds[i] = b
	}
	rm.m = &m
}

// Exact makes the map use only the big-integer paths of package
// fixedpoint (QuantizeExact, ClipExact): the reference that the fast paths
// are tested against. The integers are the same either way.
func (rm *RowMap) Exact() { rm.m.exact = true }

// Map maps the cells of one row (a source's record, in its column order)
// into dst (length D) and returns its class (0 without classes) and whether
// the clip scaled it. A row that cannot be read gives a *RowError naming
// the line and column (wrapping ErrMissing for a row a drop missing-value
// policy leaves out); dst is then unspecified.
func (rm *RowMap) Map(rec []string, line int, dst []int64) (class int, clipped bool, err error) {
	if rm.useClasses {
		if class, err = rm.m.Class(rec[rm.dec.label]); err != nil {
			return 0, false, &RowError{Line: line, Column: rm.m.s.Label, Err: err}
		}
	}
	cells, err := rm.dec.decode(rec)
	if err != nil {
		var re *RowError
		if errors.As(err, &re) {
			re.Line = line
			return 0, false, re
		}
		return 0, false, &RowError{Line: line, Err: err}
	}
	clipped, err = rm.m.Map(cells, dst)
	if err != nil {
		var re *RowError
		if errors.As(err, &re) {
			re.Line = line
			if errors.Is(re.Err, fixedpoint.ErrSyntax) && !rm.dec.decimalComma && strings.Contains(cells[rm.m.index[re.Column]], ",") {
				re.Err = fmt.Errorf("%w (a decimal comma? give this source as FILE#decimal_comma=true, with ';' or tab as the delimiter)", re.Err)
			}
			return 0, false, re
		}
		return 0, false, &RowError{Line: line, Err: err}
	}
	return class, clipped, nil
}

// Clamped returns how many values were clamped to a declared bound so far.
func (rm *RowMap) Clamped() int64 { return rm.m.Clamped() }

// Filled returns how many rows had a missing value filled in so far.
func (rm *RowMap) Filled() int64 { return rm.dec.filled }

// MissingDropped returns how many rows a drop missing-value policy left
// out so far.
func (rm *RowMap) MissingDropped() int64 { return rm.dec.dropped }

// Reader streams the rows of a source through the schema's options and
// row map. Not safe for concurrent use.
type Reader struct {
	*RowMap
	src     Rows
	row     []int64
	rows    int64
	clipped int64
}

// NewReader reads the header of a CSV file (any dialect NewCSVRows reads,
// the delimiter detected) and prepares to map its rows; see NewRowReader.
func (s *Schema) NewReader(r io.Reader, useClasses bool) (*Reader, error) {
	rows, err := NewCSVRows(r, CSVOptions{})
	if err != nil {
		return nil, err
	}
	return s.NewRowReader(rows, useClasses)
}

// NewRowReader prepares to map the rows of a source. Its columns must
// include every column the schema reads (a feature's column, a categorical
// column), and the label column when useClasses is set; other columns are
// ignored. Without useClasses every row is of class 0.
func (s *Schema) NewRowReader(src Rows, useClasses bool) (*Reader, error) {
	rm, err := s.NewRowMap(src, useClasses)
	if err != nil {
		return nil, err
	}
	return &Reader{RowMap: rm, src: src, row: make([]int64, len(s.Features))}, nil
}

// Next returns the next row, quantized and clipped, and its class. The slice
// is reused by the following call. At the end it returns io.EOF. A row that
// cannot be read gives a *RowError naming its line and column, after which
// reading can go on with the next row; a row left out by a drop
// missing-value policy gives a *RowError wrapping ErrMissing. Any other
// error (the source cannot be read) is final.
func (rd *Reader) Next() ([]int64, int, error) {
	rec, err := rd.src.Next()
	if err != nil {
		return nil, 0, err
	}
	class, clipped, err := rd.Map(rec, rd.src.Line(), rd.row)
	if err != nil {
		return nil, 0, err
	}
	rd.rows++
	if clipped {
		rd.clipped++
	}
	return rd.row, class, nil
}

// Row is a row as Reader.All yields it: quantized and clipped, and its class.
type Row struct {
	Values []int64 // reused by the following row
	Class  int
}

// All iterates over the remaining rows (Next until io.EOF, which is not
// yielded). A row that cannot be read is yielded as its error (a *RowError)
// and the iteration goes on with the next row; any other error is yielded
// last.
func (rd *Reader) All() iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		for {
			v, class, err := rd.Next()
			if err == io.EOF {
				return
			}
			var re *RowError
			if !yield(Row{Values: v, Class: class}, err) || (err != nil && !errors.As(err, &re)) {
				return
			}
		}
	}
}

// Skip reads the remaining rows without mapping them and returns how many
// there were (rows that do not parse included).
func (rd *Reader) Skip() (int64, error) {
	var n int64
	for {
		_, err := rd.src.Next()
		var re *RowError
		switch {
		case err == io.EOF:
			return n, nil
		case err == nil || errors.As(err, &re):
			n++
		default:
			return n, err
		}
	}
}

// Rows returns how many rows were read so far, and how many of them were
// clipped.
func (rd *Reader) Rows() (rows, clipped int64) { return rd.rows, rd.clipped }

// TrackRange makes the reader keep each feature's smallest and largest
// value after the map (clamped, before the row clip), for Range.
func (rd *Reader) TrackRange() {
	d := len(rd.row)
	rd.m.lo, rd.m.hi = make([]int64, d), make([]int64, d)
	for i := range d {
		rd.m.lo[i], rd.m.hi[i] = math.MaxInt64, math.MinInt64
	}
}

// Range returns the per-feature minimum and maximum after the map, in
// integer units of 2^-g (after TrackRange; undefined before any row).
func (rd *Reader) Range() (lo, hi []int64) { return rd.m.lo, rd.m.hi }
