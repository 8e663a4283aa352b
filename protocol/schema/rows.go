package schema

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"

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
	clamped int64
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
	m := &Mapper{s: s, quant: make([]*fixedpoint.Quantizer, len(s.Features)), bounds: make([]bounds, len(s.Features))}
	for i, f := range s.Features {
		q, err := fixedpoint.NewQuantizer(f.Center, f.Scale, s.Bits)
		if err != nil {
			return nil, fmt.Errorf("schema %s: feature %q: %w", s.ID, f.Name, err)
		}
		m.quant[i] = q
		b := &m.bounds[i]
		if f.Min != nil {
			if b.lo, err = q.Quantize(f.Min.String(), &m.scratch); err != nil {
				return nil, fmt.Errorf("schema %s: feature %q: min: %w", s.ID, f.Name, err)
			}
			b.hasLo = true
		}
		if f.Max != nil {
			if b.hi, err = q.Quantize(f.Max.String(), &m.scratch); err != nil {
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
		m.classes[c] = i
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
	k, ok := m.classes[label]
	if !ok {
		return 0, fmt.Errorf("%q: %w", label, ErrUnknownClass)
	}
	return k, nil
}

// Map quantizes, clamps to the declared bounds and clips one row given as
// the text of its features in schema order. dst must have length D. On error
// it names the feature (as a *RowError with Line 0) and dst is unspecified.
func (m *Mapper) Map(cells []string, dst []int64) (clipped bool, err error) {
	if len(cells) != len(m.quant) || len(dst) != len(m.quant) {
		return false, fmt.Errorf("row has %d values, schema %s has %d features", len(cells), m.s.ID, len(m.quant))
	}
	for i, c := range cells {
		v, err := m.quant[i].Quantize(c, &m.scratch)
		if err != nil {
			return false, &RowError{Column: m.s.Features[i].Name, Err: err}
		}
		v, c := m.bounds[i].clamp(v)
		if c {
			m.clamped++
		}
		dst[i] = v
	}
	return m.clip.Clip(dst)
}

// Clamped returns how many values Map has clamped to a declared bound so far.
func (m *Mapper) Clamped() int64 { return m.clamped }

// Reader streams the rows of a CSV file through the schema's row map.
// Not safe for concurrent use.
type Reader struct {
	m          *Mapper
	csv        *csv.Reader
	cols       []int // CSV column of each feature
	labelCol   int   // -1 when classes are not used
	useClasses bool
	cells      []string
	row        []int64
	line       int
	rows       int64
	clipped    int64
}

// readHeader reads a CSV file's header: its column names (a copy, safe with
// ReuseRecord) and the index of each, refusing a name that appears twice.
func readHeader(cr *csv.Reader) ([]string, map[string]int, error) {
	header, err := cr.Read()
	if err != nil {
		if err == io.EOF {
			return nil, nil, &RowError{Line: 1, Err: errors.New("empty file: no header")}
		}
		return nil, nil, &RowError{Line: 1, Err: err}
	}
	header = slices.Clone(header)
	index := make(map[string]int, len(header))
	for i, h := range header {
		if _, dup := index[h]; dup {
			return nil, nil, &RowError{Line: 1, Column: h, Err: errors.New("column appears twice in the header")}
		}
		index[h] = i
	}
	return header, index, nil
}

// NewReader reads the header of a CSV file and prepares to map its rows. The
// header must name every feature of the schema, and the label column when
// useClasses is set; other columns are ignored. Without useClasses every row
// is of class 0.
func (s *Schema) NewReader(r io.Reader, useClasses bool) (*Reader, error) {
	m, err := s.NewMapper()
	if err != nil {
		return nil, err
	}
	if useClasses && len(s.Classes) == 0 {
		return nil, fmt.Errorf("schema %s has no classes", s.ID)
	}
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = 0
	_, index, err := readHeader(cr)
	if err != nil {
		return nil, err
	}
	rd := &Reader{m: m, csv: cr, cols: make([]int, len(s.Features)), labelCol: -1, useClasses: useClasses, line: 1}
	for i, f := range s.Features {
		c, ok := index[f.Name]
		if !ok {
			return nil, &RowError{Line: 1, Column: f.Name, Err: errors.New("feature missing from the header")}
		}
		rd.cols[i] = c
	}
	if useClasses {
		c, ok := index[s.Label]
		if !ok {
			return nil, &RowError{Line: 1, Column: s.Label, Err: errors.New("label column missing from the header")}
		}
		rd.labelCol = c
	}
	rd.cells = make([]string, len(s.Features))
	rd.row = make([]int64, len(s.Features))
	return rd, nil
}

// Next returns the next row, quantized and clipped, and its class. The slice
// is reused by the following call. At the end it returns io.EOF. A row that
// cannot be read gives a *RowError naming its line and column, after which
// reading can go on with the next row; any other error (the file cannot be
// read) is final.
func (rd *Reader) Next() ([]int64, int, error) {
	rec, err := rd.read()
	if err != nil {
		return nil, 0, err
	}
	line := rd.line
	for i, c := range rd.cols {
		rd.cells[i] = rec[c]
	}
	class := 0
	if rd.useClasses {
		if class, err = rd.m.Class(rec[rd.labelCol]); err != nil {
			return nil, 0, &RowError{Line: line, Column: rd.m.s.Label, Err: err}
		}
	}
	clipped, err := rd.m.Map(rd.cells, rd.row)
	if err != nil {
		var re *RowError
		if errors.As(err, &re) {
			re.Line = line
			return nil, 0, re
		}
		return nil, 0, &RowError{Line: line, Err: err}
	}
	rd.rows++
	if clipped {
		rd.clipped++
	}
	return rd.row, class, nil
}

// read returns the next CSV record: io.EOF at the end, a *RowError for a
// record that does not parse (reading can go on), any other error as is.
func (rd *Reader) read() ([]string, error) {
	rec, err := rd.csv.Read()
	if err == io.EOF {
		return nil, io.EOF
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		rd.line = pe.Line
		return nil, &RowError{Line: pe.Line, Err: pe.Err}
	}
	if err != nil {
		return nil, fmt.Errorf("after line %d: %w", rd.line, err)
	}
	rd.line, _ = rd.csv.FieldPos(0)
	return rec, nil
}

// Skip reads the remaining records without mapping them and returns how
// many there were (records that do not parse included).
func (rd *Reader) Skip() (int64, error) {
	var n int64
	for {
		_, err := rd.read()
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

// Clamped returns how many values were clamped to a declared bound so far.
func (rd *Reader) Clamped() int64 { return rd.m.Clamped() }
