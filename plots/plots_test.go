package plots

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

// wine returns the non-private result of an analysis of the bundled wine
// data, with the privacy of an epsilon-1 job so that titles have something
// to say, and its rows projected on the components.
func wine(t *testing.T, analysis string, k int) (*job.Result, Rows) {
	t.Helper()
	data, err := datasets.CSV("wine")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Infer(bytes.NewReader(data), "wine", "label")
	if err != nil {
		t.Fatal(err)
	}
	spec := &job.Spec{Analysis: analysis, K: k, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}
	res, _, err := job.Central(spec, sch, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	res.Privacy = job.Privacy{Plan: "servers", Epsilon: 1, Delta: 1e-5}
	res.Owners, res.NumOwners = []string{"a", "b", "c", "d", "e"}, 5
	var coords []float64
	var labels []string
	n, err := job.ProjectCSV(res, sch, bytes.NewReader(data), io.Discard, func(c []float64, class string) {
		coords = append(coords, c...)
		labels = append(labels, class)
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, Rows{Coords: mat.NewDense(n, len(coords)/n, coords), Labels: labels}
}

// svgText returns the text elements of an SVG document, failing on
// malformed XML.
func svgText(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := xml.NewDecoder(f)
	var texts []string
	inText := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return texts
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inText = tok.Name.Local == "text"
		case xml.CharData:
			if inText {
				texts = append(texts, string(tok))
			}
		case xml.EndElement:
			inText = false
		}
	}
}

// readPNG decodes a PNG file.
func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return img
}

// countColour counts the pixels of exactly the colour c (opaque).
func countColour(img image.Image, c color.NRGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.NRGBAModel.Convert(img.At(x, y)) == c {
				n++
			}
		}
	}
	return n
}

func containsAll(t *testing.T, what string, texts []string, want ...string) {
	t.Helper()
	all := strings.Join(texts, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("%s: no text %q in %q", what, w, texts)
		}
	}
}

func TestWritePCA(t *testing.T) {
	res, rows := wine(t, job.PCA, 3)
	dir := t.TempDir()
	paths, err := Write(dir, res, &rows)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	want := []string{"wine-pca-scree.svg", "wine-pca-scree.png", "wine-pca-scatter.svg", "wine-pca-scatter.png"}
	if !slices.Equal(names, want) {
		t.Fatalf("wrote %v, want %v", names, want)
	}
	scree := svgText(t, filepath.Join(dir, "wine-pca-scree.svg"))
	containsAll(t, "scree", scree, "wine: PCA scree plot, 3 of 13 components kept", "ε = 1, δ = 1e-05, noise plan servers, 5 owners",
		"cumulative explained variance", "kept (k = 3)", "not kept", "100%")
	// The label at the third component gives the cumulative ratio of the
	// top three eigenvalues, from the result itself.
	sum, top := 0.0, 0.0
	for i, v := range res.Components.AllEigenvalues {
		sum += v
		if i < 3 {
			top += v
		}
	}
	containsAll(t, "scree", scree, fmt.Sprintf("3 components: %.1f%%", 100*top/sum))

	scatter := svgText(t, filepath.Join(dir, "wine-pca-scatter.svg"))
	containsAll(t, "scatter", scatter, "wine: PCA projection of 178 rows on components 1 and 2", "class_0", "class_1", "class_2",
		fmt.Sprintf("PC1 (%.1f%% of the variance)", 100*res.Components.ExplainedVarianceRatio[0]))

	img := readPNG(t, filepath.Join(dir, "wine-pca-scree.png"))
	if b := img.Bounds(); b.Dx() != 7*DPI || b.Dy() != 960 {
		t.Errorf("scree PNG is %v, want 1050 x 960", b)
	}
	if n := countColour(img, palette[0]); n < 1000 {
		t.Errorf("scree PNG has %d pixels of the kept bars' colour", n)
	}
	if n := countColour(img, grey); n < 1000 {
		t.Errorf("scree PNG has %d pixels of the other bars' colour", n)
	}
	// Each class's points are drawn in its colour (translucent over white).
	img = readPNG(t, filepath.Join(dir, "wine-pca-scatter.png"))
	for i := range 3 {
		c := palette[i]
		over := color.NRGBA{blend(c.R), blend(c.G), blend(c.B), 0xff}
		if n := countColour(img, over); n < 50 {
			t.Errorf("scatter PNG: class %d colour %v on %d pixels", i, over, n)
		}
	}
}

// TestScreeStandardized (issue 43): the scree plot of a standardised PCA
// names the correlation matrix on its axis, not S_T, and its cumulative
// share is out of d (the result's TotalVariance): here three of wine's
// features shrunk below the floor, whose diagonal entries fall short of 1.
func TestScreeStandardized(t *testing.T) {
	data, _ := datasets.CSV("wine")
	sch, err := schema.Infer(bytes.NewReader(data), "wine", "label")
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := job.Central(&job.Spec{Analysis: job.PCA, K: 3, Standardize: true, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}, sch, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// As if the noise floor had taken some of the diagonal: the matrix's
	// own trace is half of d.
	c := res.Components
	for i := range c.AllEigenvalues {
		c.AllEigenvalues[i] /= 2
	}
	for i := range c.Eigenvalues {
		c.Eigenvalues[i] /= 2
		c.ExplainedVarianceRatio[i] = c.Eigenvalues[i] / c.TotalVariance
	}
	top := 0.0
	for _, v := range c.AllEigenvalues[:3] {
		top += v
	}
	if !res.Standardized || c.TotalVariance != 13 {
		t.Fatalf("standardised %v, total variance %v", res.Standardized, c.TotalVariance)
	}
	dir := t.TempDir()
	if _, err := Write(dir, res, nil); err != nil {
		t.Fatal(err)
	}
	scree := svgText(t, filepath.Join(dir, "wine-pca-scree.svg"))
	containsAll(t, "standardised scree", scree, "eigenvalue of the correlation matrix", "explained variance out of its trace d",
		fmt.Sprintf("3 components: %.1f%%", 100*top/c.TotalVariance))
	for _, s := range scree {
		if strings.Contains(s, "S_T") {
			t.Errorf("standardised scree shows %q", s)
		}
	}
}

// blend is a colour channel at the scatter's opacity over white.
func blend(v uint8) uint8 { return uint8((int(v)*0xd0 + 0xff*(0xff-0xd0) + 127) / 0xff) }

func TestScreeDCA(t *testing.T) {
	res, rows := wine(t, job.DCA, 2)
	dir := t.TempDir()
	if _, err := Write(dir, res, &rows); err != nil {
		t.Fatal(err)
	}
	scree := svgText(t, filepath.Join(dir, "wine-dca-scree.svg"))
	containsAll(t, "dca scree", scree, "wine: DCA generalised eigenvalues, 2 of 13 components kept", "no explained variance for DCA", "generalised eigenvalue λ")
	for _, s := range scree {
		if strings.Contains(s, "cumulative") {
			t.Errorf("DCA scree shows %q", s)
		}
	}
	scatter := svgText(t, filepath.Join(dir, "wine-dca-scatter.svg"))
	containsAll(t, "dca scatter", scatter, "DC1 (eigenvalue ", "DC2 (eigenvalue ")
	if b := readPNG(t, filepath.Join(dir, "wine-dca-scree.png")).Bounds(); b.Dy() >= 960 {
		t.Errorf("DCA scree PNG is %v: one panel expected", b)
	}
}

func TestScatterThinsLargeSets(t *testing.T) {
	res, rows := wine(t, job.PCA, 2)
	n := 3*MaxScatterRows + 1
	big := mat.NewDense(n, 2, nil)
	labels := make([]string, n)
	for i := range n {
		big.SetRow(i, rows.Coords.RawRowView(i%178))
		labels[i] = rows.Labels[i%178]
	}
	containsAll(t, "thinned scatter", scatterSVG(t, res, Rows{Coords: big, Labels: labels}), "every 4th of 15001 rows")
}

// scatterSVG draws a scatter as SVG only (PNGs are slow under the race
// detector) and returns its texts.
func scatterSVG(t *testing.T, res *job.Result, rows Rows) []string {
	t.Helper()
	f, err := Scatter(res, rows)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "scatter.svg")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WriteSVG(out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return svgText(t, path)
}

func TestUnlabelledScatter(t *testing.T) {
	res, rows := wine(t, job.PCA, 2)
	for _, s := range scatterSVG(t, res, Rows{Coords: rows.Coords}) {
		if strings.Contains(s, "class_") {
			t.Errorf("unlabelled scatter has a legend entry %q", s)
		}
	}
}

func TestErrors(t *testing.T) {
	res, rows := wine(t, job.PCA, 2)
	dir := t.TempDir()
	noComponents := *res
	noComponents.Components = nil
	if _, err := Write(dir, &noComponents, nil); !errors.Is(err, errNoComponents) {
		t.Errorf("no components: %v", err)
	}
	one := mat.DenseCopyOf(rows.Coords.Slice(0, 178, 0, 1))
	for name, r := range map[string]Rows{
		"one component": {Coords: one},
		"labels":        {Coords: rows.Coords, Labels: rows.Labels[:10]},
		"no rows":       {},
	} {
		if _, err := Write(dir, res, &r); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Errorf("failed calls wrote %d files", len(files))
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 250, []string{"0", "50", "100", "150", "200", "250"}},
		{-0.87, 1.03, []string{"-0.75", "-0.50", "-0.25", "0.00", "0.25", "0.50", "0.75", "1.00"}},
		{-0.09, 0.065, []string{"-0.08", "-0.06", "-0.04", "-0.02", "0.00", "0.02", "0.04", "0.06"}},
		{0, 0.5, []string{"0.0", "0.1", "0.2", "0.3", "0.4", "0.5"}},
	} {
		var got []string
		for _, tk := range (niceTicks{}).Ticks(c.lo, c.hi) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("ticks of [%g, %g] = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
}

func TestComponentTicks(t *testing.T) {
	for _, c := range []struct {
		d    int
		want string
	}{
		{13, "1 2 3 4 5 6 7 8 9 10 11 12 13"},
		{30, "2 4 6 8 10 12 14 16 18 20 22 24 26 28 30"},
		{60, "1 5 10 15 20 25 30 35 40 45 50 55 60"},
		{784, "1 50 100 150 200 250 300 350 400 450 500 550 600 650 700 750"},
	} {
		var got []string
		for _, tk := range componentTicks(c.d).Ticks(0, float64(c.d)) {
			if tk.Label != "" {
				got = append(got, tk.Label)
			}
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("d = %d: ticks %v, want %s", c.d, got, c.want)
		}
	}
}

func TestFileBase(t *testing.T) {
	if got := FileBase(&job.Result{Dataset: "my data/v2", Analysis: "pca"}); got != "my_data_v2-pca" {
		t.Errorf("FileBase = %q", got)
	}
}
