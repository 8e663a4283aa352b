package plots

import (
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/fedpca/fedpca/protocol/job"
)

// Scree draws every eigenvalue of a result as a bar, the k components kept
// in colour. For PCA a second panel shows the cumulative explained variance
// ratio; DCA and LDA have generalised eigenvalues, which explain no
// variance, and the title says so.
func Scree(res *job.Result) (*Figure, error) {
	c := res.Components
	if c == nil {
		return nil, errNoComponents
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("plots: %w", err)
	}
	d, k := c.Dims()
	title := fmt.Sprintf("%s: %s scree plot, %d of %d components kept", res.Dataset, analysisName(res), k, d)
	ylabel := "eigenvalue of the total scatter S_T"
	if res.Standardized {
		// The PCA of the release's correlation matrix (user run --standardize).
		ylabel = "eigenvalue of the correlation matrix"
		title += "\nPCA of the release's correlation matrix: explained variance out of its trace d"
	}
	if res.Analysis != job.PCA {
		title = fmt.Sprintf("%s: %s generalised eigenvalues, %d of %d components kept", res.Dataset, analysisName(res), k, d)
		ylabel = "generalised eigenvalue λ"
		problem := "(S_B + ρ'I) w = λ (S_T + ρI) w"
		if res.Analysis == job.LDA {
			problem = "S_B w = λ (S_W + ρI) w"
		}
		title += fmt.Sprintf("\n%s: %s; no explained variance for %s", analysisName(res), problem, analysisName(res))
	}
	title += "\n" + privacyLine(res)

	top := newPlot()
	top.Title.Text = title
	top.Y.Label.Text = ylabel
	top.X.Label.Text = "component"
	setComponentAxis(top, d)
	addGrid(top, false)
	kept := &bars{first: 1, values: c.AllEigenvalues[:k], color: palette[0]}
	rest := &bars{first: k + 1, values: c.AllEigenvalues[k:], color: grey}
	_, _, ymin, ymax := kept.DataRange()
	if _, _, lo, hi := rest.DataRange(); d > k {
		ymin, ymax = math.Min(ymin, lo), math.Max(ymax, hi)
	}
	top.Y.Min, top.Y.Max = ymin, ymax+0.1*(ymax-ymin) // room for the legend
	top.Add(kept)
	top.Legend.Add(fmt.Sprintf("kept (k = %d)", k), kept)
	if d > k {
		top.Add(rest)
		top.Legend.Add("not kept", rest)
	}
	top.Legend.Top = true
	top.Legend.ThumbnailWidth = vg.Points(12)

	if res.Analysis != job.PCA {
		return &Figure{w: 7 * vg.Inch, h: 4.6 * vg.Inch, draw: top.Draw}, nil
	}
	bottom, err := cumulativePanel(job.VarianceShares(res), k)
	if err != nil {
		return nil, err
	}
	top.X.Label.Text = ""
	panels := [][]*plot.Plot{{top}, {bottom}}
	tiles := draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(10)}
	return &Figure{w: 7 * vg.Inch, h: 6.4 * vg.Inch, draw: func(dc draw.Canvas) {
		cs := plot.Align(panels, tiles, dc)
		top.Draw(cs[0][0])
		bottom.Draw(cs[1][0])
	}}, nil
}

// cumulativePanel draws the cumulative explained variance ratio of the
// components' shares (job.VarianceShares), marking the k kept.
func cumulativePanel(shares []float64, k int) (*plot.Plot, error) {
	d := len(shares)
	cum := make(plotter.XYs, d)
	run := 0.0
	for i, v := range shares {
		run += v
		cum[i] = plotter.XY{X: float64(i + 1), Y: math.Min(run, 1)}
	}
	p := newPlot()
	p.X.Label.Text = "component"
	p.Y.Label.Text = "cumulative explained variance"
	setComponentAxis(p, d)
	p.Y.Min, p.Y.Max = 0, 1.04
	var pct plot.ConstantTicks
	for v := 0; v <= 100; v += 20 {
		pct = append(pct, plot.Tick{Value: float64(v) / 100, Label: fmt.Sprintf("%d%%", v)})
	}
	p.Y.Tick.Marker = pct
	addGrid(p, false)
	line, err := plotter.NewLine(cum)
	if err != nil {
		return nil, err
	}
	line.Color = color.NRGBA{0x60, 0x60, 0x60, 0xff}
	line.Width = vg.Points(1.2)
	keptPts, err := plotter.NewScatter(cum[:k])
	if err != nil {
		return nil, err
	}
	// Points shrink with the spacing of the components (about 430 points
	// of axis between them).
	r := vg.Points(math.Min(3, math.Max(0.8, 0.3*430/float64(d))))
	keptPts.GlyphStyle = draw.GlyphStyle{Color: palette[0], Radius: r * 7 / 6, Shape: draw.CircleGlyph{}}
	p.Add(line, keptPts)
	if d > k {
		restPts, err := plotter.NewScatter(cum[k:])
		if err != nil {
			return nil, err
		}
		restPts.GlyphStyle = draw.GlyphStyle{Color: grey, Radius: r, Shape: draw.CircleGlyph{}}
		p.Add(restPts)
	}
	label, err := plotter.NewLabels(plotter.XYLabels{XYs: cum[k-1 : k], Labels: []string{fmt.Sprintf("%d components: %.1f%%", k, 100*cum[k-1].Y)}})
	if err != nil {
		return nil, err
	}
	label.TextStyle[0].Font = p.X.Label.TextStyle.Font
	label.TextStyle[0].Font.Size = 9.5
	label.TextStyle[0].YAlign = draw.YTop
	label.Offset = vg.Point{X: vg.Points(7), Y: vg.Points(-5)}
	p.Add(label)
	return p, nil
}

// setComponentAxis makes the x axis run over components 1..d.
func setComponentAxis(p *plot.Plot, d int) {
	p.X.Min, p.X.Max = 0.4, float64(d)+0.6
	p.X.Tick.Marker = componentTicks(d)
}

// bars draws one bar per value at x = first, first+1, ..., 0.7 wide in data
// units (gonum's BarChart takes widths in points, which does not scale with
// the number of components).
type bars struct {
	first  int
	values []float64
	color  color.Color
}

// Plot implements plot.Plotter.
func (b *bars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, v := range b.values {
		x := float64(b.first + i)
		x0, x1 := trX(x-0.35), trX(x+0.35)
		y0, y1 := trY(math.Min(v, 0)), trY(math.Max(v, 0))
		c.FillPolygon(b.color, c.ClipPolygonXY(rect(vg.Point{X: x0, Y: y0}, vg.Point{X: x1, Y: y1})))
	}
}

// DataRange implements plot.DataRanger.
func (b *bars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, xmax = float64(b.first)-0.5, float64(b.first+len(b.values))-0.5
	for _, v := range b.values {
		ymin, ymax = math.Min(ymin, v), math.Max(ymax, v)
	}
	return xmin, xmax, ymin, ymax
}

// Thumbnail implements plot.Thumbnailer (the legend).
func (b *bars) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(b.color, rect(c.Min, c.Max))
}
