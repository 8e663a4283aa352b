// Command pima writes and measures the clinical trial of issue 43
// (docs/trial/pima/README.md): a synthetic cohort of 768 women written up
// from the published summary statistics of the Pima Indians Diabetes
// Database (Smith et al. 1988, UCI), split among three hospitals whose
// exports differ as real ones do, and the utility of a job's result against
// the central, non-private analysis of the same rows.
//
//	go run ./docs/trial/pima gen -out docs/trial/pima/data
//	go run ./docs/trial/pima measure -data docs/trial/pima/data -result out/pca/result.json
//
// It is a write-up tool, not part of fedpca: nothing here is in the
// privacy path.
package main

import (
	"bytes"
	"encoding/csv"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat/distuv"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/user"
)

// The published summary of the UCI file (768 rows; pandas describe(), in
// which a missing value is a 0): each column's mean and standard deviation
// (ddof 1) over all rows, its maximum, and how many zeros stand for a
// missing value. The generator matches the values that are not missing,
// whose mean and deviation follow exactly from these (nonMissing).
type column struct {
	name, header string // the feature's name; its header in the exports (with units)
	mean, sd     float64
	min, max     float64 // clamps of the generated values (min: the smallest recorded)
	zeros        int     // zeros standing for a missing value
	decimals     int
	kind         string // normal, lognormal, shifted (21 + lognormal), count
}

var columns = []column{
	{"pregnancies", "Pregnancies", 3.845052, 3.369578, 0, 17, 0, 0, "count"},
	{"glucose", "Glucose 2h OGTT (mg/dL)", 120.894531, 31.972618, 44, 199, 5, 0, "normal"},
	{"bp", "Diastolic BP (mm Hg)", 69.105469, 19.355807, 24, 122, 35, 0, "normal"},
	{"skin", "Triceps skinfold (mm)", 20.536458, 15.952218, 7, 99, 227, 0, "normal"},
	{"insulin", "Insulin 2h (uU/mL)", 79.799479, 115.244002, 14, 846, 374, 0, "lognormal"},
	{"bmi", "BMI (kg/m2)", 31.992578, 7.884160, 18.2, 67.1, 11, 1, "normal"},
	{"dpf", "Diabetes pedigree function", 0.471876, 0.331329, 0.078, 2.42, 0, 3, "lognormal"},
	{"age", "Age (years)", 33.240885, 11.760232, 21, 81, 0, 0, "shifted"},
}

// correlation is the published correlation matrix of the UCI file
// (pandas corr(), the eight columns then Outcome), taken as the
// correlation of the values that are recorded.
var correlation = [][]float64{
	{1, 0.129459, 0.141282, -0.081672, -0.073535, 0.017683, -0.033523, 0.544341, 0.221898},
	{0.129459, 1, 0.152590, 0.057328, 0.331357, 0.221071, 0.137337, 0.263514, 0.466581},
	{0.141282, 0.152590, 1, 0.207371, 0.088933, 0.281805, 0.041265, 0.239528, 0.065068},
	{-0.081672, 0.057328, 0.207371, 1, 0.436783, 0.392573, 0.183928, -0.113970, 0.074752},
	{-0.073535, 0.331357, 0.088933, 0.436783, 1, 0.197859, 0.185071, -0.042163, 0.130548},
	{0.017683, 0.221071, 0.281805, 0.392573, 0.197859, 1, 0.140647, 0.036242, 0.292695},
	{-0.033523, 0.137337, 0.041265, 0.183928, 0.185071, 0.140647, 1, 0.033561, 0.173844},
	{0.544341, 0.263514, 0.239528, -0.113970, -0.042163, 0.036242, 0.033561, 1, 0.238356},
	{0.221898, 0.466581, 0.065068, 0.074752, 0.130548, 0.292695, 0.173844, 0.238356, 1},
}

const (
	rows      = 768
	positives = 268 // Outcome = 1
)

// hospitals split the rows and write them each their own way.
var hospitals = []struct {
	name            string
	rows            int
	comma           rune
	decimalComma    bool
	missing         string
	negative, posit string
}{
	{"hospital-a", 300, ',', false, "", "negative", "positive"},   // an EHR export: empty cells
	{"hospital-b", 250, ',', false, "NA", "Negative", "Positive"}, // R's write.csv: NA, capitalised labels
	{"hospital-c", 218, ';', true, "NA", "negative", "positive"},  // a European spreadsheet: ';' and decimal commas
}

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: pima gen -out DIR | pima measure -data DIR -result RESULT.json"))
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	out := fs.String("out", "docs/trial/pima/data", "directory to write (gen)")
	seed := fs.Uint64("seed", 43, "generator seed (gen)")
	data := fs.String("data", "docs/trial/pima/data", "the generated data (measure)")
	result := fs.String("result", "", "a job's result.json (measure)")
	jobSchema := fs.String("schema", "", "the schema the job ran under (measure; default the reference schema)")
	fail(fs.Parse(os.Args[2:]))
	switch os.Args[1] {
	case "gen":
		fail(generate(*out, *seed))
	case "measure":
		fail(measure(*data, *result, *jobSchema))
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

func fail(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "pima:", err)
		os.Exit(1)
	}
}

// nonMissing returns the mean and standard deviation (ddof 1) of a
// column's values that are not missing, from the published ones over all
// rows (the zeros included).
func (c column) nonMissing() (mean, sd float64) {
	n, m := float64(rows), float64(rows-c.zeros)
	sumSq := c.sd*c.sd*(n-1) + n*c.mean*c.mean // sum of x^2 over every row
	mean = c.mean * n / m
	return mean, math.Sqrt((sumSq - m*mean*mean) / (m - 1))
}

// generate writes the hospitals' exports, the pooled complete rows (for
// measuring) and the schemas.
func generate(dir string, seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 1988))
	d := len(columns)
	// The latent Gaussian copula: the point-biserial correlations with
	// Outcome become latent ones (divided by phi(c)/sqrt(p(1-p)), c the
	// threshold of prevalence p), then the matrix is made positive definite.
	p := float64(positives) / rows
	c := distuv.UnitNormal.Quantile(1 - p)
	factor := distuv.UnitNormal.Prob(c) / math.Sqrt(p*(1-p))
	sigma := mat.NewSymDense(d+1, nil)
	for i := range d + 1 {
		for j := i; j < d+1; j++ {
			r := correlation[i][j]
			if i != j && j == d {
				r /= factor
			}
			sigma.SetSym(i, j, r)
		}
	}
	var chol mat.Cholesky
	if !chol.Factorize(sigma) {
		return fmt.Errorf("the latent correlation is not positive definite")
	}
	var l mat.TriDense
	chol.LTo(&l)
	latent := mat.NewDense(rows, d+1, nil)
	for i := range rows {
		e := make([]float64, d+1)
		for j := range e {
			e[j] = rng.NormFloat64()
		}
		var z mat.VecDense
		z.MulVec(&l, mat.NewVecDense(d+1, e))
		latent.SetRow(i, z.RawVector().Data)
	}
	// Exactly the published number of positives: the largest latents.
	order := make([]int, rows)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return -cmpF(latent.At(a, d), latent.At(b, d)) })
	positive := make([]bool, rows)
	for _, i := range order[:positives] {
		positive[i] = true
	}
	values := make([][]float64, rows)
	for i := range rows {
		values[i] = make([]float64, d)
		for j, col := range columns {
			values[i][j] = col.value(distuv.UnitNormal.CDF(latent.At(i, j)))
		}
	}
	// Missing cells at the published counts; a row without its skinfold has
	// no insulin either (as in the file: the 227 rows without a skinfold
	// are among the 374 without insulin).
	missing := make([][]bool, rows)
	for i := range missing {
		missing[i] = make([]bool, d)
	}
	skin, insulin := 3, 4
	for j, col := range columns {
		if j == insulin {
			continue
		}
		for _, i := range rng.Perm(rows)[:col.zeros] {
			missing[i][j] = true
			if j == skin {
				missing[i][insulin] = true
			}
		}
	}
	for _, i := range rng.Perm(rows) {
		if count(missing, insulin) == columns[insulin].zeros {
			break
		}
		missing[i][insulin] = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The exports: the rows dealt out in a random order.
	deal := rng.Perm(rows)
	at := 0
	for _, h := range hospitals {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		w.Comma = h.comma
		header := []string{"record_id"}
		for _, col := range columns {
			header = append(header, col.header)
		}
		w.Write(append(header, "Outcome"))
		for _, i := range deal[at : at+h.rows] {
			rec := []string{fmt.Sprintf("%s-%04d", strings.ToUpper(h.name[len(h.name)-1:]), i)}
			for j, col := range columns {
				v := h.missing
				if !missing[i][j] {
					v = strconv.FormatFloat(values[i][j], 'f', col.decimals, 64)
					if h.decimalComma {
						v = strings.Replace(v, ".", ",", 1)
					}
				}
				rec = append(rec, v)
			}
			label := h.negative
			if positive[i] {
				label = h.posit
			}
			w.Write(append(rec, label))
		}
		w.Flush()
		if err := os.WriteFile(filepath.Join(dir, h.name+".csv"), b.Bytes(), 0o644); err != nil {
			return err
		}
		at += h.rows
	}
	// The pooled rows with every value recorded, under the features'
	// names: what the central analysis reads (measure).
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	var names []string
	for _, col := range columns {
		names = append(names, col.name)
	}
	w.Write(append(names, "label"))
	complete := 0
	for i := range rows {
		if slices.Contains(missing[i], true) {
			continue
		}
		var rec []string
		for j, col := range columns {
			rec = append(rec, strconv.FormatFloat(values[i][j], 'f', col.decimals, 64))
		}
		w.Write(append(rec, map[bool]string{false: "negative", true: "positive"}[positive[i]]))
		complete++
	}
	w.Flush()
	if err := os.WriteFile(filepath.Join(dir, "complete.csv"), b.Bytes(), 0o644); err != nil {
		return err
	}
	for name, withScales := range map[string]bool{"bounds.schema.json": false, "reference.schema.json": true} {
		if err := os.WriteFile(filepath.Join(dir, name), schemaJSON(withScales), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("wrote %d rows (%d positive, %d with every value) to %s\n", rows, positives, complete, dir)
	return nil
}

// bounds are public clinical bounds of each feature (what an owner
// declares: physiological ranges, not the data's).
var bounds = map[string][2]string{
	"pregnancies": {"0", "20"}, "glucose": {"40", "300"}, "bp": {"30", "140"}, "skin": {"0", "100"},
	"insulin": {"0", "900"}, "bmi": {"15", "70"}, "dpf": {"0", "2.5"}, "age": {"18", "90"},
}

// schemaJSON is the trial's schema: the exports' columns, NA and empty
// cells missing (the row dropped), labels compared without case, public
// bounds; with withScales the published means and deviations as public
// reference centers and scales (--keep-scales), without them bounds only
// (the profile chooses).
func schemaJSON(withScales bool) []byte {
	var fs []string
	for _, col := range columns {
		f := fmt.Sprintf(`{"name":%q,"column":%q,"min":%s,"max":%s`, col.name, col.header, bounds[col.name][0], bounds[col.name][1])
		if withScales {
			mean, sd := col.nonMissing()
			f += fmt.Sprintf(`,"center":"%.4g","scale":"%.4g"`, mean, sd)
		}
		fs = append(fs, f+"}")
	}
	return fmt.Appendf(nil, `{"id":"pima","label":"Outcome","classes":["negative","positive"],"ignore_case":true,"trim":true,
 "missing":{"policy":"drop","values":["","NA"]},
 "features":[
  %s]}
`, strings.Join(fs, ",\n  "))
}

// value maps a uniform u to the column's marginal (matching its mean and
// deviation over the values recorded), clamped and rounded.
func (c column) value(u float64) float64 {
	mean, sd := c.nonMissing()
	var v float64
	switch c.kind {
	case "normal":
		v = mean + sd*distuv.UnitNormal.Quantile(u)
	case "lognormal", "shifted":
		shift := 0.0
		if c.kind == "shifted" {
			shift = c.min
		}
		m := mean - shift
		s2 := math.Log(1 + sd*sd/(m*m))
		v = shift + math.Exp(math.Log(m)-s2/2+math.Sqrt(s2)*distuv.UnitNormal.Quantile(u))
	case "count":
		// A negative binomial of the mean and variance.
		r := mean * mean / (sd*sd - mean)
		q := r / (r + mean)
		k, cdf, pk := 0.0, 0.0, math.Pow(q, r)
		for cdf+pk < u && k < c.max {
			cdf += pk
			pk *= (k + r) / (k + 1) * (1 - q)
			k++
		}
		v = k
	}
	v = math.Max(c.min, math.Min(c.max, v))
	scale := math.Pow(10, float64(c.decimals))
	return math.Round(v*scale) / scale
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// measure compares a result with the central analysis of the pooled
// complete rows: for PCA, q/q0 of its top components on the rows
// standardised with their own mean and deviation, unclipped (1 for the
// central PCA); for DCA and LDA, the angle of each direction to the
// central one (in standardised units) and the nearest-class-centroid
// accuracy (5-fold) of the rows projected on the result's components and
// on the central ones.
func measure(dir, resultPath, schemaPath string) error {
	res, err := user.LoadResult(resultPath)
	if err != nil {
		return err
	}
	if res.Components == nil {
		return fmt.Errorf("%s has no components", resultPath)
	}
	data, err := os.ReadFile(filepath.Join(dir, "complete.csv"))
	if err != nil {
		return err
	}
	// The complete rows are read under the reference schema's map, with
	// the features' names as columns.
	ref, err := schema.Parse(schemaJSON(true))
	if err != nil {
		return err
	}
	plain := *ref
	plain.Missing, plain.Label = nil, "label"
	plain.Features = slices.Clone(ref.Features)
	for i := range plain.Features {
		plain.Features[i].Column = ""
	}
	x, err := sim.RawRows(data, &plain)
	if err != nil {
		return err
	}
	cov, std := sim.Standardized(x)
	// The components were made in the units of the job's schema, z =
	// (x - center) / scale: component j is the direction w_ij std_i /
	// scale_i in standardised units, and w_ij scale'_i / scale_i in the
	// reference schema's (scale').
	sch := ref
	if schemaPath != "" {
		b, err := os.ReadFile(schemaPath)
		if err != nil {
			return err
		}
		if sch, err = schema.Parse(b); err != nil {
			return err
		}
	}
	if res.SchemaHash != sch.HashHex() {
		return fmt.Errorf("the result was made under schema %s…, not %s's: give the job's schema with -schema", res.SchemaHash[:12], sch.ID)
	}
	scales := make([]float64, sch.D())
	for i := range scales {
		scales[i] = scaleOf(sch, i)
	}
	d, k := res.Components.W.Dims()
	w := mat.NewDense(d, k, nil)
	for i := range d {
		for j := range k {
			w.Set(i, j, res.Components.W.At(i, j)*std[i]/scales[i])
		}
	}
	if res.Analysis == job.PCA {
		var q mat.QR
		q.Factorize(w)
		var o mat.Dense
		q.QTo(&o)
		qq, ok := sim.CapturedVariance(cov, o.Slice(0, d, 0, min(k, d)))
		if !ok {
			return fmt.Errorf("eigendecomposition failed")
		}
		// As shares of the correlation's trace d: what the result claims
		// (its explained variance ratio), what its subspace captures, and
		// what the central PCA's does.
		var eig mat.EigenSym
		eig.Factorize(cov, false)
		vals := eig.Values(nil)
		slices.Sort(vals)
		top := 0.0
		for _, v := range vals[d-k:] {
			top += v
		}
		claimed := 0.0
		for _, r := range res.Components.ExplainedVarianceRatio {
			claimed += r
		}
		fmt.Printf("%s, %d owners, noisy n %.1f: q/q0 of its top %d components on the standardised complete rows (central PCA: 1) = %.4f\n",
			res.Analysis, res.NumOwners, res.NoisyN, k, qq)
		fmt.Printf("  of the correlation's trace d = %d: captured %.3f, claimed %.3f (%s), central PCA %.3f\n", d, qq*top/float64(d), claimed, job.VarianceOf(res), top/float64(d))
		return nil
	}
	spec := &job.Spec{Analysis: res.Analysis, K: k, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}
	central, _, err := job.Central(spec, &plain, bytes.NewReader(data))
	if err != nil {
		return err
	}
	mapped, err := sim.MapRows(&plain, data)
	if err != nil {
		return err
	}
	cw := central.Components.W
	for j := range k {
		a, b := mat.Col(nil, j, w), make([]float64, d)
		for i := range d {
			b[i] = cw.At(i, j) * std[i] / scaleOf(ref, i)
		}
		cos := math.Abs(floats.Dot(a, b)) / (floats.Norm(a, 2) * floats.Norm(b, 2))
		fmt.Printf("%s component %d: %.1f degrees from the central %s's (standardised units)\n", res.Analysis, j+1, math.Acos(math.Min(1, cos))*180/math.Pi, res.Analysis)
	}
	// Accuracy: the result's components in the reference schema's units.
	wr := mat.NewDense(d, k, nil)
	for i := range d {
		for j := range k {
			wr.Set(i, j, res.Components.W.At(i, j)*scaleOf(ref, i)/scales[i])
		}
	}
	mean := make([]float64, d) // projections are compared, centring does not matter
	fmt.Printf("%s: nearest-centroid accuracy (5-fold) on its %d components %.3f, on the central %s's %.3f\n",
		res.Analysis, k, mapped.Accuracy(mean, wr, 43), res.Analysis, mapped.Accuracy(central.Components.Mean, central.Components.W, 43))
	return nil
}

func scaleOf(sch *schema.Schema, i int) float64 {
	v, _ := sch.Features[i].Scale.Rat().Float64()
	return v
}

// count is how many rows miss column j.
func count(missing [][]bool, j int) int {
	n := 0
	for _, m := range missing {
		if m[j] {
			n++
		}
	}
	return n
}
