package schema

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

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
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, index, err := readHeader(cr)
	if err != nil {
		return nil, err
	}
	labelCol := -1
	if label != "" {
		c, ok := index[label]
		if !ok {
			return nil, &RowError{Line: 1, Column: label, Err: errors.New("label column missing from the header")}
		}
		labelCol = c
	}
	var featCols []int
	for i := range header {
		if i != labelCol {
			featCols = append(featCols, i)
		}
	}
	d := len(featCols)
	mean := make([]float64, d)
	m2 := make([]float64, d)
	labels := map[string]bool{}
	n := 0.0
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, &RowError{Line: int(n) + 2, Err: err}
		}
		line, _ := cr.FieldPos(0)
		n++
		for j, c := range featCols {
			x, err := fixedpoint.ParseFloat(rec[c])
			if err != nil {
				return nil, &RowError{Line: line, Column: header[c], Err: err}
			}
			delta := x - mean[j]
			mean[j] += delta / n
			m2[j] += delta * (x - mean[j])
		}
		if labelCol >= 0 && !labels[rec[labelCol]] {
			if len(labels) >= MaxClasses {
				return nil, &RowError{Line: line, Column: label, Err: fmt.Errorf("more than %d distinct labels", MaxClasses)}
			}
			labels[rec[labelCol]] = true
		}
	}
	if n == 0 {
		return nil, errors.New("infer schema: no rows")
	}
	s := &Schema{ID: id, Label: label, ClipNorm: fixedpoint.MustDecimal(DefaultClipNorm), Bits: DefaultBits}
	for j, c := range featCols {
		sd := math.Sqrt(m2[j] / n)
		if sd <= 1e-12*(math.Abs(mean[j])+1) {
			// Constant: scale 1 as in the reference, unless the values are
			// so large that the float64 center is off by more than the
			// quantization range allows (1e28 with a center 4e11 away).
			sd = max(1, 1e-12*math.Abs(mean[j]))
		}
		center, err := fixedpoint.FromFloat(mean[j])
		if err != nil {
			return nil, err
		}
		scale, err := fixedpoint.FromFloat(sd)
		if err != nil {
			return nil, err
		}
		s.Features = append(s.Features, Feature{Name: header[c], Center: center, Scale: scale})
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
