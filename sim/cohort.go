package sim

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"

	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/schema"
)

// A synthetic clinical cohort: adults' vital signs and lab values, for
// measuring the profile under the wide clinical ranges that hospitals
// declare (docs/BENCHMARKS.md, "Profile job").
//
// Model: a Gaussian copula. A latent z ~ N(0, P) with the correlation
// matrix P below; each feature is a monotone map of its z: normal
// (mean + sd z) or log-normal (median exp(sd z)), rounded as a record
// holds it. The marginals and correlations follow typical values of adult
// cohorts (NHANES-like summaries: systolic pressure 130 +- 17 mmHg rising
// with age, fasting glucose and triglycerides right-skewed, HDL falling
// with BMI and triglycerides); the declared ranges are what a clinician
// would write, each at least five standard deviations on either side of
// its middle, and most far from centred on the data.

// CohortFeature is one feature of the cohort: its marginal and the
// declared clinical range.
type CohortFeature struct {
	Name string
	// Log: log-normal with median Center and log-sd Spread; else normal
	// with mean Center and sd Spread. Digits are the decimals kept.
	Log            bool
	Center, Spread float64
	Digits         int
	Min, Max       float64
}

// Cohort is the cohort's features in order.
var Cohort = []CohortFeature{
	{Name: "age", Center: 58, Spread: 12, Min: 0, Max: 130},
	{Name: "systolic_bp", Center: 131, Spread: 17, Min: 60, Max: 260},
	{Name: "diastolic_bp", Center: 79, Spread: 10.5, Min: 30, Max: 150},
	{Name: "heart_rate", Center: 73, Spread: 11, Min: 25, Max: 220},
	{Name: "bmi", Log: true, Center: 27.8, Spread: 0.19, Digits: 1, Min: 10, Max: 80},
	{Name: "glucose", Log: true, Center: 101, Spread: 0.19, Min: 40, Max: 400},
	{Name: "cholesterol", Center: 198, Spread: 38, Min: 60, Max: 500},
	{Name: "hdl", Log: true, Center: 51, Spread: 0.27, Min: 5, Max: 160},
	{Name: "triglycerides", Log: true, Center: 128, Spread: 0.5, Min: 20, Max: 1000},
}

// cohortCorrelation is P over the latent z, in Cohort's order.
var cohortCorrelation = [][]float64{
	//  age   sbp   dbp   hr    bmi   glu   chol  hdl   tg
	{1.00, 0.42, 0.08, -0.10, 0.10, 0.28, 0.20, 0.05, 0.12},
	{0.42, 1.00, 0.65, 0.12, 0.30, 0.22, 0.18, -0.08, 0.20},
	{0.08, 0.65, 1.00, 0.22, 0.30, 0.12, 0.15, -0.10, 0.18},
	{-0.10, 0.12, 0.22, 1.00, 0.15, 0.12, 0.05, -0.10, 0.12},
	{0.10, 0.30, 0.30, 0.15, 1.00, 0.32, 0.12, -0.38, 0.38},
	{0.28, 0.22, 0.12, 0.12, 0.32, 1.00, 0.10, -0.22, 0.32},
	{0.20, 0.18, 0.15, 0.05, 0.12, 0.10, 1.00, 0.15, 0.38},
	{0.05, -0.08, -0.10, -0.10, -0.38, -0.22, 0.15, 1.00, -0.45},
	{0.12, 0.20, 0.18, 0.12, 0.38, 0.32, 0.38, -0.45, 1.00},
}

// ClinicalCohort returns a CSV (a header, no label) of rows patients,
// deterministic in its arguments.
func ClinicalCohort(rows int, seed uint64) []byte {
	d := len(Cohort)
	var chol mat.Cholesky
	p := mat.NewSymDense(d, nil)
	for i := range d {
		for j := range d {
			p.SetSym(i, j, cohortCorrelation[i][j])
		}
	}
	if !chol.Factorize(p) {
		panic("sim: the cohort's correlation matrix is not positive definite")
	}
	var l mat.TriDense
	chol.LTo(&l)
	rng := rand.New(rand.NewPCG(seed, 0x636f686f7274))
	var b bytes.Buffer
	for i, f := range Cohort {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(f.Name)
	}
	b.WriteByte('\n')
	e, z := make([]float64, d), make([]float64, d)
	buf := make([]byte, 0, 16)
	for range rows {
		for i := range e {
			e[i] = rng.NormFloat64()
		}
		for i := range z {
			z[i] = 0
			for j := 0; j <= i; j++ {
				z[i] += l.At(i, j) * e[j]
			}
		}
		for i, f := range Cohort {
			x := f.Center + f.Spread*z[i]
			if f.Log {
				x = f.Center * math.Exp(f.Spread*z[i])
			}
			x = math.Max(f.Min, math.Min(f.Max, x))
			if i > 0 {
				b.WriteByte(',')
			}
			buf = strconv.AppendFloat(buf[:0], x, 'f', f.Digits, 64)
			b.Write(buf)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// CohortSchema returns the schema the cohort's hospitals declare: the
// clinical ranges, no centers or scales (a schema of bounds only: each
// feature's map is its bounds' onto [-1, 1] until a profile chooses one).
func CohortSchema(id string) (*schema.Schema, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%q,"features":[`, id)
	for i, f := range Cohort {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":%q,"min":%s,"max":%s}`, f.Name, strconv.FormatFloat(f.Min, 'f', -1, 64), strconv.FormatFloat(f.Max, 'f', -1, 64))
	}
	b.WriteString(`]}`)
	return schema.Parse(b.Bytes())
}
