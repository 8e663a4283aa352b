package sim

import (
	"fmt"
	"math/big"
	"math/rand/v2"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/fedpca/fedpca/source"
)

// GenotypeCohort is a simulated genotype study: individuals of several populations
// under the Balding-Nichols model, dealt to owners, with the public
// reference frequencies a job standardises with.
type GenotypeCohort struct {
	// Owners' filesets, in owner order; Pops[o][i] is the population of
	// owner o's individual i (for the evaluation only: no owner sends it).
	Owners []*source.Genotypes
	Pops   [][]int
	// Reference is the public frequency of allele 1 of each variant (see
	// BaldingNichols); Ancestral the model's ancestral frequencies.
	Reference []*big.Rat
	Ancestral []float64
	Params    GenotypeParams
	// PanelRows are the public panel's dosages (Params.Panel per
	// population), nil without a panel.
	PanelRows [][]int8
}

// GenotypeParams describe a Balding-Nichols cohort.
type GenotypeParams struct {
	// N individuals, D variants, Populations of equal size (individual i
	// belongs to population i mod Populations), Owners of equal size
	// (individual i goes to owner i mod Owners).
	N, D, Populations, Owners int
	// FST is the model's F_ST (Wright's fixation index of each population
	// against the ancestral one), Missing the probability of a missing
	// call.
	FST, Missing float64
	Seed         uint64
	// Panel is the number of individuals per population of a public
	// reference panel drawn from the same populations (0: none). With a
	// panel the reference frequencies are the panel's allele frequencies
	// and a power job may start from the panel's components.
	// PanelPopulations is how many of the populations (the first ones) the
	// panel samples (0: all): a cohort with a population its reference
	// lacks.
	Panel, PanelPopulations int
}

// BaldingNichols simulates a cohort (Balding and Nichols 1995, the model of
// population structure used to test genotype PCA, e.g. by Patterson, Price
// and Reich 2006): each variant j has an ancestral frequency p_j ~ U(0.05,
// 0.95); population k's frequency is p_kj ~ Beta(p_j (1 - F) / F, (1 - p_j)
// (1 - F) / F), which has mean p_j and variance F p_j (1 - p_j); an
// individual of population k has dosage ~ Binomial(2, p_kj) of allele 1
// (Hardy-Weinberg), missing with probability Missing. The reference
// frequencies are those of a public panel of Panel individuals per
// population drawn from the same model (as 1000 Genomes serves real
// studies), or without a panel the populations' mean frequencies (what an
// infinite balanced panel estimates), rounded to 6 decimals. Deterministic
// in its parameters.
func BaldingNichols(cp GenotypeParams) (*GenotypeCohort, error) {
	switch {
	case cp.N < 1 || cp.D < 1 || cp.Populations < 1 || cp.Owners < 1 || cp.Owners > cp.N:
		return nil, fmt.Errorf("genotypes: %d individuals, %d variants, %d populations, %d owners", cp.N, cp.D, cp.Populations, cp.Owners)
	case !(cp.FST > 0 && cp.FST < 1):
		return nil, fmt.Errorf("genotypes: F_ST = %v must be in (0, 1)", cp.FST)
	case !(cp.Missing >= 0 && cp.Missing < 1):
		return nil, fmt.Errorf("genotypes: missing rate %v must be in [0, 1)", cp.Missing)
	}
	rng := rand.New(rand.NewPCG(cp.Seed, 0x42))
	c := &GenotypeCohort{Params: cp, Ancestral: make([]float64, cp.D), Reference: make([]*big.Rat, cp.D)}
	freq := make([][]float64, cp.Populations) // population x variant
	for k := range freq {
		freq[k] = make([]float64, cp.D)
	}
	variants := make([]source.Variant, cp.D)
	for j := range cp.D {
		p := 0.05 + 0.9*rng.Float64()
		c.Ancestral[j] = p
		beta := distuv.Beta{Alpha: p * (1 - cp.FST) / cp.FST, Beta: (1 - p) * (1 - cp.FST) / cp.FST, Src: rng}
		mean := 0.0
		for k := range freq {
			freq[k][j] = beta.Rand()
			mean += freq[k][j] / float64(cp.Populations)
		}
		c.Reference[j] = new(big.Rat).SetFrac64(int64(mean*1e6+0.5), 1e6)
		variants[j] = source.Variant{Chrom: fmt.Sprint(1 + j*22/cp.D), ID: fmt.Sprintf("snp%d", j+1), Position: int64(1000 + 100*j), Allele1: "A", Allele2: "G"}
	}
	draw := func(k int) []int8 {
		row := make([]int8, cp.D)
		for j, p := range freq[k] {
			if cp.Missing > 0 && rng.Float64() < cp.Missing {
				row[j] = source.Missing
				continue
			}
			var x int8
			if rng.Float64() < p {
				x++
			}
			if rng.Float64() < p {
				x++
			}
			row[j] = x
		}
		return row
	}
	if cp.Panel > 0 {
		// The panel's allele frequencies are the public reference.
		pp := cp.Populations
		if cp.PanelPopulations > 0 {
			pp = min(cp.PanelPopulations, pp)
		}
		for i := range cp.Panel * pp {
			c.PanelRows = append(c.PanelRows, draw(i%pp))
		}
		for j := range cp.D {
			a, calls := 0, 0
			for _, row := range c.PanelRows {
				if row[j] >= 0 {
					a += int(row[j])
					calls += 2
				}
			}
			c.Reference[j] = big.NewRat(0, 1)
			if calls > 0 {
				f := float64(a) / float64(calls)
				c.Reference[j] = new(big.Rat).SetFrac64(int64(f*1e6+0.5), 1e6)
			}
		}
	}
	rows := make([][][]int8, cp.Owners)
	ids := make([][]string, cp.Owners)
	c.Pops = make([][]int, cp.Owners)
	for i := range cp.N {
		o, k := i%cp.Owners, i%cp.Populations
		row := draw(k)
		rows[o] = append(rows[o], row)
		ids[o] = append(ids[o], fmt.Sprintf("pop%d ind%d", k, i))
		c.Pops[o] = append(c.Pops[o], k)
	}
	for o := range rows {
		g, err := source.NewGenotypes(ids[o], variants, rows[o])
		if err != nil {
			return nil, err
		}
		c.Owners = append(c.Owners, g)
	}
	return c, nil
}
