package plots

import (
	"errors"
	"fmt"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fedpca/fedpca/protocol/job"
)

// shapes mark the classes as well as the colours do (for print in grey);
// seven shapes and eight colours give 56 distinct markers.
var shapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.PyramidGlyph{}, draw.BoxGlyph{}, draw.CrossGlyph{},
	draw.RingGlyph{}, draw.TriangleGlyph{}, draw.PlusGlyph{}}

// Scatter draws the rows on the first two components of a result, one
// colour and marker per class with a legend. More than MaxScatterRows rows
// are thinned to an evenly spaced subset.
func Scatter(res *job.Result, rows Rows) (*Figure, error) {
	c := res.Components
	if c == nil {
		return nil, errNoComponents
	}
	if rows.Coords == nil || rows.Coords.IsEmpty() {
		return nil, errors.New("plots: scatter: no rows")
	}
	n, k := rows.Coords.Dims()
	if k < 2 || len(c.Eigenvalues) < 2 {
		return nil, fmt.Errorf("plots: scatter: needs two components, the rows have %d and the result %d", k, len(c.Eigenvalues))
	}
	if rows.Labels != nil && len(rows.Labels) != n {
		return nil, fmt.Errorf("plots: scatter: %d labels for %d rows", len(rows.Labels), n)
	}
	step := (n + MaxScatterRows - 1) / MaxScatterRows
	classes, groups := group(rows, res.Classes, step)

	p := newPlot()
	what := fmt.Sprintf("%d rows", n)
	if step > 1 {
		what = fmt.Sprintf("every %d%s of %d rows", step, ordinal(step), n)
	}
	p.Title.Text = fmt.Sprintf("%s: %s projection of %s on components 1 and 2\n%s", res.Dataset, analysisName(res), what, privacyLine(res))
	p.X.Label.Text = componentName(res, 0)
	p.Y.Label.Text = componentName(res, 1)
	addGrid(p, true)
	leg := plot.NewLegend()
	leg.TextStyle = p.Legend.TextStyle
	leg.Top, leg.Left = true, true
	leg.ThumbnailWidth = vg.Points(10)
	radius := vg.Points(3)
	if n/step > 1000 {
		radius = vg.Points(2)
	}
	for i, xys := range groups {
		if len(xys) == 0 {
			continue
		}
		s, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, err
		}
		col := palette[i%len(palette)]
		col.A = 0xd0
		s.GlyphStyle = draw.GlyphStyle{Color: col, Radius: radius, Shape: shapes[i%len(shapes)]}
		p.Add(s)
		if classes[i] != "" {
			leg.Add(classes[i], s)
		}
	}
	return &Figure{w: 7 * vg.Inch, h: 5.2 * vg.Inch, draw: func(dc draw.Canvas) {
		if rows.Labels == nil {
			p.Draw(dc)
			return
		}
		lw := leg.Rectangle(dc).Size().X + vg.Points(12)
		main := draw.Crop(dc, 0, -lw, 0, 0)
		p.Draw(main)
		data := p.DataCanvas(main)
		strip := draw.Crop(dc, dc.Max.X-dc.Min.X-lw+vg.Points(12), 0, 0, 0)
		strip.Max.Y = data.Max.Y
		leg.Draw(strip)
	}}, nil
}

// group splits every step-th row by class, the classes in the result's
// order (then any others in order of appearance); "" is the one class of
// unlabelled rows.
func group(rows Rows, known []string, step int) ([]string, []plotter.XYs) {
	classes := []string{""}
	if rows.Labels != nil {
		classes = slices.Clone(known)
		for _, l := range rows.Labels {
			if !slices.Contains(classes, l) {
				classes = append(classes, l)
			}
		}
	}
	groups := make([]plotter.XYs, len(classes))
	n, _ := rows.Coords.Dims()
	for i := 0; i < n; i += step {
		g := 0
		if rows.Labels != nil {
			g = slices.Index(classes, rows.Labels[i])
		}
		groups[g] = append(groups[g], plotter.XY{X: rows.Coords.At(i, 0), Y: rows.Coords.At(i, 1)})
	}
	return classes, groups
}

func ordinal(n int) string {
	switch {
	case n%100 >= 11 && n%100 <= 13:
		return "th"
	case n%10 == 1:
		return "st"
	case n%10 == 2:
		return "nd"
	case n%10 == 3:
		return "rd"
	}
	return "th"
}
