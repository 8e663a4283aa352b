package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/sim/faultnet"
)

// chaosDatasets are the bundled datasets the episodes draw from (small,
// with classes, in reference.json).
var chaosDatasets = []string{"wine", "iris", "glass", "wdbc"}

// episodePlan is an episode's deployment.
type episodePlan struct {
	Index        int
	Seed         uint64
	Dataset      string
	Owners       int
	CSPs, T      int
	TCP, Process bool
	// Tight is the owner with a small budget (exhausted after a few noisy
	// jobs), or -1.
	Tight int
	// CeremonyFaults runs the key ceremony under message faults.
	CeremonyFaults bool
	// Deviation, if set, is how the proxy deviates in one job of the
	// episode (deviate.go): in the first job for DevSwapKey (owners have
	// not cached the committee key yet), in the last for the others.
	Deviation string
}

type jobPlan struct {
	Analysis  string
	NoNoise   bool
	Epsilon   float64
	Plan      string
	Tolerate  int
	MinOwners int
}

type trigger struct {
	kind    string // "time", "uploads", "switching"
	after   time.Duration
	uploads int
}

type event struct {
	kind   string
	target int // member or owner index
	when   trigger
	down   time.Duration
}

type stepPlan struct {
	jobs   []jobPlan
	rates  faultnet.Rates
	events []event
	// deviate: the proxy deviates in the step's job.
	deviate bool
}

// EpisodeSeed is the seed of episode e of a run.
func EpisodeSeed(seed uint64, e int) uint64 { return faultnet.Mix(seed ^ faultnet.Mix(uint64(e)+1)) }

func planEpisode(cfg Config, e int) (episodePlan, *rand.Rand) {
	seed := EpisodeSeed(cfg.Seed, e)
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	p := episodePlan{Index: e, Seed: seed, Dataset: chaosDatasets[rng.IntN(len(chaosDatasets))], Owners: 3 + rng.IntN(3), CSPs: 1, T: 1, Tight: -1}
	if rng.IntN(2) == 0 {
		p.CSPs, p.T = 3, 2
	}
	p.TCP = rng.Float64() < 0.25
	if cfg.Processes != nil && e%4 == 3 {
		p.TCP, p.Process = true, true
	}
	if rng.IntN(2) == 0 {
		p.Tight = rng.IntN(p.Owners)
	}
	// Drawn apart from rng, so that the draws above and the steps' stay
	// what they were for a seed.
	p.CeremonyFaults = faultnet.Mix(seed^0xce7e)&1 == 1
	// One episode in two has a deviating proxy (an in-process one).
	switch h := faultnet.Mix(seed ^ 0xde71a7e); {
	case p.Process:
	case len(cfg.Deviations) > 0:
		p.Deviation = cfg.Deviations[e%len(cfg.Deviations)]
	case h%2 == 0:
		p.Deviation = AllDeviations[h>>8%uint64(len(AllDeviations))]
	}
	return p, rng
}

// Message fault rates of a step.
var (
	lightRates = faultnet.Rates{DropRequest: 0.02, DropResponse: 0.02, Duplicate: 0.03, Delay: 0.05, MaxDelay: 100 * time.Millisecond}
	heavyRates = faultnet.Rates{DropRequest: 0.06, DropResponse: 0.06, Duplicate: 0.06, Delay: 0.1, MaxDelay: 300 * time.Millisecond}
)

func planStep(rng *rand.Rand, ep episodePlan, step int, disk bool, remaining int) stepPlan {
	var s stepPlan
	n := 1
	if remaining > 1 && rng.Float64() < 0.25 {
		n = 2
	}
	for range n {
		j := jobPlan{Analysis: job.PCA, Epsilon: []float64{0.5, 1, 2}[rng.IntN(3)], MinOwners: ep.Owners}
		if rng.Float64() < 0.4 {
			j.Analysis = job.DCA
		}
		j.NoNoise = rng.IntN(2) == 0
		j.Plan = []string{dp.PlanServers, dp.PlanCentral, dp.PlanOwners, dp.PlanAll}[rng.IntN(4)]
		if j.Plan != dp.PlanCentral && rng.Float64() < 0.3 {
			j.Tolerate = 1
		}
		if rng.Float64() < 0.3 {
			j.MinOwners = ep.Owners - 1
		}
		s.jobs = append(s.jobs, j)
	}
	switch u := rng.Float64(); {
	case u < 0.3:
	case u < 0.7:
		s.rates = lightRates
	default:
		s.rates = heavyRates
	}
	events := []int{0, 1, 1, 1, 2, 2, 3}[rng.IntN(7)]
	kinds := []struct {
		kind   string
		weight int
	}{{FaultCrashProxy, 25}, {FaultCrashCSP, 20}, {FaultCrashOwner, 20}, {FaultPartitionCommittee, 15}, {FaultPartitionOwner, 10}, {FaultPartitionUser, 10}}
	seen := map[string]bool{}
	for range events {
		w := rng.IntN(100)
		var kind string
		for _, k := range kinds {
			if w < k.weight {
				kind = k.kind
				break
			}
			w -= k.weight
		}
		e := event{kind: kind}
		switch kind {
		case FaultCrashCSP:
			e.target = rng.IntN(ep.CSPs)
		case FaultCrashOwner, FaultPartitionOwner:
			e.target = rng.IntN(ep.Owners)
		}
		switch u := rng.Float64(); {
		case u < 0.4:
			e.when = trigger{kind: "time", after: time.Duration(rng.IntN(600)) * time.Millisecond}
		case u < 0.7:
			e.when = trigger{kind: "uploads", uploads: 1 + rng.IntN(ep.Owners)}
		default:
			e.when = trigger{kind: "switching"}
		}
		e.down = time.Duration(50+rng.IntN(1450)) * time.Millisecond
		if strings.HasPrefix(kind, "partition") {
			e.down = time.Duration(200+rng.IntN(2800)) * time.Millisecond
		}
		if kind == FaultCrashOwner && rng.Float64() < 0.15 {
			e.down = chaosDeadline + time.Second // the job goes on without it
		}
		key := fmt.Sprint(kind, e.target)
		if kind == FaultCrashProxy {
			key = kind // one proxy
		}
		if !seen[key] {
			seen[key] = true
			s.events = append(s.events, e)
		}
	}
	// One step in six fills the proxy's disk for a while (when it can be
	// filled), drawn apart from rng so that the rest of a seed's plan does
	// not depend on it.
	if h := faultnet.Mix(ep.Seed ^ faultnet.Mix(uint64(step)+0xd15c)); disk && h%6 == 0 {
		s.events = append(s.events, event{kind: FaultDiskFull, when: trigger{kind: "time", after: time.Duration(h>>8%600) * time.Millisecond},
			down: time.Duration(200+h>>20%1800) * time.Millisecond})
	}
	return s
}

func (e event) String() string {
	what := e.kind
	switch e.kind {
	case FaultCrashCSP:
		what += "(" + sim.CSPID(e.target) + ")"
	case FaultCrashOwner, FaultPartitionOwner:
		what += "(" + ownerName(e.target) + ")"
	}
	switch e.when.kind {
	case "time":
		what += fmt.Sprintf("@%dms", e.when.after.Milliseconds())
	case "uploads":
		what += fmt.Sprintf("@%d-uploads", e.when.uploads)
	default:
		what += "@switching"
	}
	return what + fmt.Sprintf("/%dms", e.down.Milliseconds())
}

func ownerName(i int) string { return fmt.Sprintf("owner-%c", 'a'+i) }
