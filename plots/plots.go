package plots

import (
	"bytes"
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/fedpca/fedpca/protocol/job"
)

// Rows are rows projected on a result's components, (z - mean) W, for the
// scatter plot.
type Rows struct {
	// Coords is n x k, k >= 2: one row per data row.
	Coords *mat.Dense
	// Labels are the rows' class names (nil: no classes).
	Labels []string
}

// MaxScatterRows bounds the points drawn: larger sets are thinned to an
// evenly spaced subset, and the title says so.
const MaxScatterRows = 5000

// DPI is the resolution of the PNG files.
const DPI = 150

// Write draws the scree plot of res and, when rows is not nil, the scatter
// of the rows into dir as DATASET-ANALYSIS-scree.{svg,png} and
// DATASET-ANALYSIS-scatter.{svg,png}, and returns the paths written.
func Write(dir string, res *job.Result, rows *Rows) ([]string, error) {
	type named struct {
		kind string
		fig  *Figure
	}
	scree, err := Scree(res)
	if err != nil {
		return nil, err
	}
	figs := []named{{"scree", scree}}
	if rows != nil {
		scatter, err := Scatter(res, *rows)
		if err != nil {
			return nil, err
		}
		figs = append(figs, named{"scatter", scatter})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, f := range figs {
		base := filepath.Join(dir, FileBase(res)+"-"+f.kind)
		for _, ext := range []string{".svg", ".png"} {
			if err := f.fig.save(base + ext); err != nil {
				return written, err
			}
			written = append(written, base+ext)
		}
	}
	return written, nil
}

// FileBase is the start of a result's figure file names: its dataset and
// analysis, e.g. "wine-pca", with characters unsafe in file names replaced.
func FileBase(res *job.Result) string { return fileBase(res.Dataset, res.Analysis) }

// Paths are the files Write may write into dir for a result of dataset
// and analysis (the scree plot and the scatter, SVG and PNG), so that a
// command can refuse, before any work, to replace an earlier run's.
func Paths(dir, dataset, analysis string) []string {
	var ps []string
	for _, kind := range []string{"scree", "scatter"} {
		for _, ext := range []string{".svg", ".png"} {
			ps = append(ps, filepath.Join(dir, fileBase(dataset, analysis)+"-"+kind+ext))
		}
	}
	return ps
}

func fileBase(dataset, analysis string) string {
	safe := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
				return r
			}
			return '_'
		}, s)
	}
	return safe(dataset) + "-" + safe(analysis)
}

// Figure is a drawing of a given size, written as SVG or PNG.
type Figure struct {
	w, h vg.Length
	draw func(draw.Canvas)
}

// WriteSVG writes the figure as SVG. Text is laid out with Liberation
// Sans, which the SVG names with the metric-compatible Arial and Helvetica
// as fallbacks (embedding the font would add about 400 KB per file).
func (f *Figure) WriteSVG(w io.Writer) error {
	c := vgsvg.New(f.w, f.h)
	f.paint(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return err
	}
	_, err := w.Write(bytes.ReplaceAll(buf.Bytes(), []byte("font-family:Liberation Sans;"), []byte("font-family:'Liberation Sans',Arial,Helvetica,sans-serif;")))
	return err
}

// WritePNG writes the figure as PNG at DPI dots per inch.
func (f *Figure) WritePNG(w io.Writer) error {
	c := vgimg.NewWith(vgimg.UseWH(f.w, f.h), vgimg.UseDPI(DPI), vgimg.UseBackgroundColor(color.White))
	f.paint(draw.New(c))
	_, err := vgimg.PngCanvas{Canvas: c}.WriteTo(w)
	return err
}

func (f *Figure) paint(c draw.Canvas) {
	c.FillPolygon(color.White, rect(c.Min, c.Max))
	f.draw(draw.Crop(c, vg.Points(6), -vg.Points(12), vg.Points(6), -vg.Points(6)))
}

// rect is the rectangle with corners lo and hi.
func rect(lo, hi vg.Point) []vg.Point {
	return []vg.Point{lo, {X: hi.X, Y: lo.Y}, hi, {X: lo.X, Y: hi.Y}}
}

func (f *Figure) save(path string) error {
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	write := f.WritePNG
	if strings.HasSuffix(path, ".svg") {
		write = f.WriteSVG
	}
	if err := write(out); err != nil {
		out.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return out.Close()
}

var errNoComponents = errors.New("plots: the result has no components (analysis scatter has nothing to plot)")

// Okabe-Ito colours, distinguishable with the common colour-vision
// deficiencies.
var palette = []color.NRGBA{
	{0x00, 0x72, 0xB2, 0xff}, // blue
	{0xE6, 0x9F, 0x00, 0xff}, // orange
	{0x00, 0x9E, 0x73, 0xff}, // bluish green
	{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	{0x00, 0x00, 0x00, 0xff}, // black
	{0xF0, 0xE4, 0x42, 0xff}, // yellow
}

var (
	grey      = color.NRGBA{0xb0, 0xb0, 0xb0, 0xff}
	gridColor = color.NRGBA{0xe4, 0xe4, 0xe4, 0xff}
)

// newPlot returns a plot in the package's style: a sans-serif face, sizes
// readable when the figure is shown at column width.
func newPlot() *plot.Plot {
	p := plot.New()
	sans := func(f *font.Font, size vg.Length) {
		f.Variant = "Sans"
		f.Size = size
	}
	sans(&p.Title.TextStyle.Font, 12)
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Tick.Marker = niceTicks{}
		sans(&a.Label.TextStyle.Font, 11)
		sans(&a.Tick.Label.Font, 9.5)
		a.Padding = vg.Points(2)
	}
	sans(&p.Legend.TextStyle.Font, 9.5)
	return p
}

// addGrid adds horizontal (and, if both, vertical) grid lines.
func addGrid(p *plot.Plot, vertical bool) {
	g := plotter.NewGrid()
	g.Horizontal.Color = gridColor
	g.Vertical.Color = gridColor
	if !vertical {
		g.Vertical.Color = nil
	}
	p.Add(g)
}

// privacyLine describes the privacy of a result's release.
func privacyLine(res *job.Result) string {
	pr := res.Privacy
	owners := fmt.Sprintf("%d owners", res.NumOwners)
	if res.NumOwners == 1 {
		owners = "1 owner"
	}
	if res.NumOwners == 0 {
		owners = "non-private reference"
	}
	if pr.NoNoise {
		return "no DP noise (test run), " + owners
	}
	s := fmt.Sprintf("ε = %.3g, δ = %.2g, noise plan %s", float64(pr.Epsilon), pr.Delta, pr.Plan)
	if pr.Tolerate > 0 {
		s += fmt.Sprintf(" tolerating %d colluders", pr.Tolerate)
	}
	return s + ", " + owners
}

// analysisName is the analysis as written in titles.
func analysisName(res *job.Result) string { return strings.ToUpper(res.Analysis) }

// componentName is the name of component j (0-based) on an axis.
func componentName(res *job.Result, j int) string {
	c := res.Components
	switch res.Analysis {
	case job.PCA:
		s := fmt.Sprintf("PC%d", j+1)
		if j < len(c.ExplainedVarianceRatio) {
			s += fmt.Sprintf(" (%.1f%% of the variance)", 100*c.ExplainedVarianceRatio[j])
		}
		return s
	case job.LDA:
		return fmt.Sprintf("LD%d (eigenvalue %.3g)", j+1, c.Eigenvalues[j])
	default:
		return fmt.Sprintf("DC%d (eigenvalue %.3g)", j+1, c.Eigenvalues[j])
	}
}

// componentTicks labels component 1 (unless the step is 2) and every multiple of a round step
// (1, 2, 5, 10, 20, ...) that leaves at most 15 labels, with unlabelled
// ticks at the other components when there are not too many.
func componentTicks(d int) plot.Ticker {
	step := 1
	for i := 0; d/step > 15; i++ {
		step = []int{2, 5, 10}[i%3] * int(math.Pow10(i/3))
	}
	return plot.TickerFunc(func(float64, float64) []plot.Tick {
		var ts []plot.Tick
		for c := 1; c <= d; c++ {
			switch {
			case c%step == 0 || c == 1 && step != 2:
				ts = append(ts, plot.Tick{Value: float64(c), Label: strconv.Itoa(c)})
			case d <= 60:
				ts = append(ts, plot.Tick{Value: float64(c)})
			}
		}
		return ts
	})
}

// niceTicks labels five to eight round values (1, 2, 2.5 or 5 times a power of
// ten) in [lo, hi]: gonum's default asks for three, too few to read values
// off a figure.
type niceTicks struct{}

// Ticks implements plot.Ticker.
func (niceTicks) Ticks(lo, hi float64) []plot.Tick {
	if !(hi > lo) || math.IsInf(hi-lo, 0) {
		return (plot.DefaultTicks{}).Ticks(lo, math.Max(hi, lo+1))
	}
	// The smallest round step that leaves at most 8 labels.
	raw := (hi - lo) / 8
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	mant := 10.0
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw {
			mant = m
			break
		}
	}
	step := mant * mag
	decimals := max(0, int(math.Ceil(-math.Log10(step)-1e-9)))
	if mant == 2.5 && step < 10 {
		decimals++
	}
	var ts []plot.Tick
	first := math.Ceil(lo/step - 1e-9)
	for i := 0.0; ; i++ {
		v := (first + i) * step
		if v > hi+step*1e-9 {
			break
		}
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v+0, 'f', decimals, 64)})
		if mid := v + step/2; mid <= hi {
			ts = append(ts, plot.Tick{Value: mid})
		}
	}
	return ts
}
