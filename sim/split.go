package sim

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Split deals the rows of a CSV file (with a header) among n owners and
// returns one CSV per owner. how is one of
//
//	iid            shuffled, dealt round robin (equal sizes)
//	class          each owner holds whole classes: class c goes to owner
//	               c mod n (with more owners than classes, the owners of a
//	               class share its rows)
//	dirichlet=A    each class's rows are split by proportions drawn from a
//	               symmetric Dirichlet(A) over the owners (small A: skewed)
//	sizes=a,b,...  shuffled, owner i gets a share proportional to its weight
//
// The split is a deterministic function of the data, n, how and seed (the
// simulator's randomness is seeded; the protocol's is not).
func Split(data []byte, label string, n int, how string, seed uint64) ([][]byte, error) {
	if n < 1 {
		return nil, fmt.Errorf("split: %d owners", n)
	}
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("split: %w", err)
	}
	if len(recs) < 2 {
		return nil, fmt.Errorf("split: no rows")
	}
	header, rows := recs[0], recs[1:]
	labelCol := slices.Index(header, label)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	parts := make([][][]string, n)
	kind, arg, _ := strings.Cut(how, "=")
	switch kind {
	case "iid":
		for i, j := range rng.Perm(len(rows)) {
			parts[i%n] = append(parts[i%n], rows[j])
		}
	case "sizes":
		w, err := parseWeights(arg, n)
		if err != nil {
			return nil, err
		}
		perm := rng.Perm(len(rows))
		cuts := cumulative(w, len(rows))
		for o := range n {
			for _, j := range perm[cuts[o]:cuts[o+1]] {
				parts[o] = append(parts[o], rows[j])
			}
		}
	case "class", "dirichlet":
		if labelCol < 0 {
			return nil, fmt.Errorf("split %s: no label column %q", how, label)
		}
		byClass := map[string][][]string{}
		var classes []string
		for _, r := range rows {
			if _, ok := byClass[r[labelCol]]; !ok {
				classes = append(classes, r[labelCol])
			}
			byClass[r[labelCol]] = append(byClass[r[labelCol]], r)
		}
		slices.Sort(classes)
		alpha := 0.0
		if kind == "dirichlet" {
			if alpha, err = strconv.ParseFloat(arg, 64); err != nil || !(alpha > 0) {
				return nil, fmt.Errorf("split %s: want dirichlet=ALPHA with ALPHA > 0", how)
			}
		}
		for c, name := range classes {
			rs := byClass[name]
			rng.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
			if kind == "class" {
				var holders []int
				for o := c % n; o < n; o += len(classes) {
					holders = append(holders, o)
				}
				for i, r := range rs {
					o := holders[i%len(holders)]
					parts[o] = append(parts[o], r)
				}
				continue
			}
			cuts := cumulative(dirichlet(rng, alpha, n), len(rs))
			for o := range n {
				parts[o] = append(parts[o], rs[cuts[o]:cuts[o+1]]...)
			}
		}
	default:
		return nil, fmt.Errorf("split %q: want iid, class, dirichlet=ALPHA or sizes=W1,W2 (one weight per owner)", how)
	}
	out := make([][]byte, n)
	for i, p := range parts {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		_ = w.Write(header)
		_ = w.WriteAll(p)
		out[i] = b.Bytes()
	}
	return out, nil
}

func parseWeights(arg string, n int) ([]float64, error) {
	fs := strings.Split(arg, ",")
	if len(fs) != n {
		return nil, fmt.Errorf("split sizes=%s: %d weights for %d owners", arg, len(fs), n)
	}
	w := make([]float64, n)
	for i, f := range fs {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 || math.IsInf(v, 0) {
			return nil, fmt.Errorf("split sizes=%s: bad weight %q", arg, f)
		}
		w[i] = v
	}
	return w, nil
}

// cumulative turns weights into cut points over m items.
func cumulative(w []float64, m int) []int {
	total := 0.0
	for _, x := range w {
		total += x
	}
	cuts := make([]int, len(w)+1)
	acc := 0.0
	for i, x := range w {
		acc += x
		cuts[i+1] = int(math.Round(acc / total * float64(m)))
	}
	cuts[len(w)] = m
	return cuts
}

// dirichlet draws from a symmetric Dirichlet(alpha) over n components
// (normalised Gamma draws, Marsaglia-Tsang).
func dirichlet(rng *rand.Rand, alpha float64, n int) []float64 {
	g := make([]float64, n)
	for i := range g {
		g[i] = gamma(rng, alpha)
	}
	return g
}

func gamma(rng *rand.Rand, a float64) float64 {
	if a < 1 {
		return gamma(rng, a+1) * math.Pow(rng.Float64(), 1/a)
	}
	d := a - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}
