package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v3"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/profile"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/sim/chaos"
	"github.com/fedpca/fedpca/sim/procs"
	"github.com/fedpca/fedpca/user"
)

// cpuProfile writes a CPU profile of this process to
// $FEDPCA_CPUPROFILE_DIR/NAME.pprof until stop, when that variable is set
// (bench -cpuprofile sets it for the nodes it runs as processes; simulate
// profiles itself as simulate.pprof).
func cpuProfile(name string) (stop func(), err error) {
	dir := os.Getenv("FEDPCA_CPUPROFILE_DIR")
	if dir == "" {
		return func() {}, nil
	}
	f, err := os.Create(filepath.Join(dir, name+".pprof"))
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

func simulateFlags() []cli.Flag {
	return []cli.Flag{
		strFlag("data", "", "CSV file with a header (or --dataset for a bundled one)"),
		strFlag("dataset", "", "a bundled dataset: "+strings.Join(datasets.Names(), ", ")),
		strFlag("label", "label", "class column (empty: none)"),
		intFlag("owners", 10, "number of owners"),
		strFlag("analysis", "pca", "pca, dca, lda or scatter"),
		intFlag("k", 5, "components (0: all)"),
		floatFlag("epsilon", 1, "privacy: epsilon"),
		boolFlag("no-noise", "no DP noise: results equal the non-private ones"),
		floatFlag("delta", job.DefaultDelta, "privacy: delta"),
		noisePlanFlag(),
		intFlag("tolerate", 0, "colluding noise parties tolerated"),
		budgetSplitFlag(),
		intFlag("csp-nodes", job.DefaultMinCommitteeMembers, "committee members"),
		intFlag("csp-threshold", 0, "members needed for a key switch (0: a majority, 2 of 3)"),
		intFlag("committee-min-members", job.DefaultMinCommitteeMembers, "the simulated owners and user refuse a committee of fewer members (lower it to simulate a smaller committee)"),
		intFlag("committee-min-threshold", job.DefaultMinCommitteeThreshold, "the simulated owners and user refuse a committee whose key switch needs fewer members"),
		strFlag("partition", "iid", "how rows are dealt to the owners: iid, class, dirichlet=ALPHA or sizes=W1,W2,..."),
		intFlag("bits", 16, "fractional bits g of the fixed-point encoding"),
		&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the split and the cross-validation folds (DP noise always comes from crypto/rand)", Sources: env("seed")},
		strFlag("transport", "memory", "memory (bufconn) or tcp (loopback)"),
		boolFlag("insecure", "no TLS between the simulated nodes (faster; the default uses real mutual TLS)"),
		strFlag("json", "", "write the JSON report to this file"),
		strFlag("out", "", "directory for the result's files, as user run writes them (result.json, components.csv/.npy, ...)"),
		plotsFlag(),
		forceFlag(),
		boolFlag("components", "print the components"),
		&cli.DurationFlag{Name: "poll", Value: 0, Usage: "owners' poll interval when the proxy serves them no watch (0: 1 s, longer with many owners)", Sources: env("poll")},
		strFlag("log-level", "off", "log level of the simulated nodes"),
		boolFlag("proxy-process", "run the proxy as a separate process (with --transport tcp), to measure its peak memory"),
		intFlag("owner-farms", 0, "run the owners in this many child processes (with --transport tcp), for thousands of owners"),
		strFlag("synthetic", "", "synthetic data ROWSxDxK (e.g. 10000x50x5) instead of --data or --dataset"),
		boolFlag("standardize", "pca: the components of the release's correlation matrix (free post-processing; implied by --auto-schema)"),
		releaseFlag(), randomnessFlag(),
		boolFlag("auto-schema", "choose the schema privately: owners serve declared bounds (the observed range widened by a quarter on each side), a profile job picks centers, scales and C, then the main job runs under it, all within --epsilon"),
		floatFlag("profile-share", 0, "with --auto-schema: the profile's share of the total budget (of mu^2; 0: 0.1, or 0.02 with --keep-scales)"),
		floatFlag("quantile", 0, "with --auto-schema: C is set at this quantile of the row norms (0: 0.05, 0.5 or 0.9 by the rows per unit of noise, see docs/BENCHMARKS.md)"),
		boolFlag("keep-scales", "with --auto-schema: take the pooled mean and std as public centers and scales (standing in for a registry's) and choose only C privately"),
		strFlag("schema", "", "with --auto-schema: the schema the owners declare (min and max on every feature, no centers or scales needed), instead of the observed range widened by a quarter: what a real deployment's bounds give"),
		strFlag("profile-method", profile.Quantiles, "with --auto-schema: quantiles or moments (see user profile --method)"),
		boolFlag("cohort", "a synthetic clinical cohort (9 vital signs and lab values, --rows rows; see sim.ClinicalCohort) instead of --data or --dataset; with --auto-schema its hospitals' clinical ranges are the declared schema unless --schema says otherwise"),
		intFlag("rows", 6600, "with --cohort: its rows"),
		strFlag("genotypes", "", "a PCA of simulated genotypes, NxD (individuals x variants, e.g. 10000x10000), by the noisy power method (power-method job; see docs/PROTOCOL.md section 13): a Balding-Nichols cohort of --populations with --fst, dealt to --owners as PLINK filesets; in one process through the protocol's steps, or with --method power through the daemons (the owners read their filesets through the reference frequencies' genotype schema)"),
		intFlag("populations", 3, "with --genotypes: populations of equal size"),
		floatFlag("fst", 0.1, "with --genotypes: the Balding-Nichols F_ST"),
		floatFlag("missing", 0.01, "with --genotypes: the probability of a missing call"),
		intFlag("rounds", 3, "with --genotypes: power rounds T after round 0"),
		intFlag("oversample", 10, "with --genotypes: columns beyond k (p = k + oversample)"),
		floatFlag("clip-factor", 1, "with --genotypes: rows are clipped to C = clip-factor sqrt(D) (standardised genotypes have norms near sqrt(D))"),
		intFlag("down", 2, "with --genotypes or --method power: the committee member that is down (its point, 1 for csp-1; 0: none)"),
		intFlag("central-iterations", 200, "with --genotypes: at most this many iterations of the central PCA the job is compared with (evaluation only; the report prints its last relative change)"),
		intFlag("panel-populations", 0, "with --panel: how many of the populations the panel samples (0: all), for a cohort with a population its reference lacks"),
		strFlag("method", "release", "pca: release (the d x d statistics release, through the daemons) or power (the noisy power method, docs/PROTOCOL.md section 13, through the daemons: the parent job and a job per round; --rounds, --oversample, --down; with --genotypes, up to 2^20 variants)"),
		boolFlag("compare-release", "with --method power: run the statistics release on the same rows too, and compare both with the central PCA"),
		intFlag("panel", 0, "with --genotypes: individuals per population of a public reference panel (its allele frequencies standardise the variants and its top components start the power method; 0: the populations' mean frequencies and a start from the seed)"),
	}
}

func simulateCommand() *cli.Command {
	return &cli.Command{
		Name:  "simulate",
		Usage: "run a whole deployment in one process and measure a job",
		Description: `Starts a CSP committee, the proxy and N owners (the real role packages, over
in-memory gRPC with mutual TLS, or loopback TCP), splits a dataset among the owners,
runs one job as a user and reports the result, the privacy accounting, the utility
against the non-private result on the same rows, the time of each phase and the
bytes each role sent and received. The default preprocessing is the reference's:
standardise with the pooled mean and population std, clip rows to norm 1.

  fedpca simulate --dataset wdbc --owners 10 --analysis pca --epsilon 1 --json report.json
  fedpca simulate --dataset wine --owners 5 --analysis pca -k 3 --release components --no-noise
  fedpca simulate --dataset wine --owners 20 --analysis dca --noise-plan all --tolerate 2 \
    --csp-nodes 3 --csp-threshold 2 --partition dirichlet=0.5`,
		Flags: simulateFlags(),
		Commands: []*cli.Command{chaosCommand(), {
			Name:   "node",
			Usage:  "run a simulated node (the proxy or a farm of owners) from its configuration (started by --proxy-process, --owner-farms and chaos)",
			Hidden: true,
			Flags:  []cli.Flag{reqStr("config", "node configuration (JSON, procs.NodeConfig)")},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				b, err := os.ReadFile(cmd.String("config"))
				if err != nil {
					return err
				}
				var nc procs.NodeConfig
				if err := json.Unmarshal(b, &nc); err != nil {
					return err
				}
				stop, err := cpuProfile(strings.TrimSuffix(filepath.Base(cmd.String("config")), ".json"))
				if err != nil {
					return err
				}
				defer stop()
				return procs.RunNode(ctx, nc, os.Stderr)
			},
		}},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if !cmd.Bool("auto-schema") {
				for _, f := range []string{"profile-share", "quantile", "keep-scales", "schema", "profile-method"} {
					if cmd.IsSet(f) {
						return fmt.Errorf("--%s needs --auto-schema (it sets the profile job, which only --auto-schema runs)", f)
					}
				}
			}
			if cmd.IsSet("genotypes") {
				return simulateGenotypes(ctx, cmd)
			}
			opts, err := jobOptions(cmd)
			if err != nil {
				return err
			}
			if err := checkPlots(cmd, opts.Analysis); err != nil {
				return err
			}
			if cmd.String("out") != "" {
				if err := checkOutputs(cmd); err != nil {
					return err
				}
			}
			stop, err := cpuProfile("simulate")
			if err != nil {
				return err
			}
			defer stop()
			sm, name, err := newSimulator(ctx, cmd)
			if err != nil {
				return err
			}
			defer sm.Close()
			if err := checkPlotFiles(cmd, name, opts.Analysis); err != nil {
				return err
			}
			sch := sm.Schema()
			if opts.K, err = resolveK(cmd, opts.Analysis, len(sch.Features), len(sch.Classes)); err != nil {
				return err
			}
			if cmd.String("method") == "power" {
				po := sim.PowerOptions{Rounds: int(cmd.Int("rounds")), Oversample: int(cmd.Int("oversample")), Compare: cmd.Bool("compare-release")}
				if x := int(cmd.Int("down")); x > 0 {
					po.Down = []int{x - 1}
				}
				return printPower(cmd)(sm.RunPower(ctx, opts, po))
			}
			p := newProgress(cmd.Int("owners"), "uploads")
			opts.Progress = p.job
			if cmd.Bool("auto-schema") {
				return runAuto(ctx, cmd, sm, opts, p)
			}
			rep, err := sm.Run(ctx, opts)
			p.done()
			if err != nil {
				return err
			}
			rep.WriteText(os.Stdout, cmd.Bool("components"))
			if dir := cmd.String("out"); dir != "" {
				paths, err := user.WriteOutputs(dir, rep.Result)
				if err != nil {
					return err
				}
				fmt.Printf("\nwrote %s\n", strings.Join(paths, ", "))
			}
			if dir := cmd.String("plots"); dir != "" {
				if err := simPlots(sm, dir, rep.Result); err != nil {
					return err
				}
			}
			if path := cmd.String("json"); path != "" {
				if err := writeJSON(path, rep); err != nil {
					return err
				}
				fmt.Printf("\nreport written to %s (%s)\n", path, name)
			}
			return nil
		},
	}
}

// newSimulator starts the simulated deployment the flags describe.
func newSimulator(ctx context.Context, cmd *cli.Command) (*sim.Simulator, string, error) {
	data, name, err := simData(cmd.String("data"), cmd.String("dataset"), cmd.String("synthetic"), cmd.Uint64("seed"))
	var declared *schema.Schema
	if cmd.Bool("cohort") {
		if err == nil || cmd.String("data")+cmd.String("dataset")+cmd.String("synthetic") != "" {
			return nil, "", errors.New("give one of --data, --dataset, --synthetic and --cohort")
		}
		data, name = sim.ClinicalCohort(cmd.Int("rows"), cmd.Uint64("seed")), "cohort"
		if cmd.Bool("auto-schema") && !cmd.Bool("keep-scales") {
			if declared, err = sim.CohortSchema(name); err != nil {
				return nil, "", err
			}
		}
	} else if err != nil {
		return nil, "", err
	}
	label := cmd.String("label")
	if cmd.Bool("cohort") && !cmd.IsSet("label") {
		label = ""
	}
	log := simLogger(cmd)
	switch path := cmd.String("schema"); {
	case path != "" && cmd.Bool("keep-scales"):
		return nil, "", errors.New("--schema declares bounds for the profile to choose centers and scales; --keep-scales takes the pooled ones: give one")
	case path != "":
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, "", err
		}
		if declared, err = schema.Parse(b); err != nil {
			return nil, "", fmt.Errorf("--schema %s: %w", path, err)
		}
		name = declared.ID
	case declared == nil && cmd.Bool("auto-schema") && !cmd.Bool("keep-scales"):
		if declared, err = sim.DeclareBounds(data, name, label, sim.DefaultWiden); err != nil {
			return nil, "", err
		}
	}
	// Owners take part in a components job without noise only when their
	// policy allows exact components: the simulated ones do when asked
	// for one.
	exact := cmd.String("release") == job.ReleaseComponents && cmd.Bool("no-noise")
	s := sim.Simulation{Data: data, Name: name, Label: label, Schema: declared, Owners: cmd.Int("owners"), How: cmd.String("partition"), AllowExactComponents: exact,
		Seed: cmd.Uint64("seed"), CSPs: cmd.Int("csp-nodes"), Threshold: cmd.Int("csp-threshold"),
		MinCommitteeMembers: cmd.Int("committee-min-members"), MinCommitteeThreshold: cmd.Int("committee-min-threshold"), TCP: cmd.String("transport") == "tcp",
		Insecure: cmd.Bool("insecure"), Poll: cmd.Duration("poll"), Logger: log, Bits: uint(cmd.Int("bits")),
		ProxyProcess: cmd.Bool("proxy-process"), OwnerFarms: cmd.Int("owner-farms")}
	if s.ProxyProcess || s.OwnerFarms > 0 {
		bin, err := os.Executable()
		if err != nil {
			return nil, "", err
		}
		s.Processes = &procs.Launcher{Binary: bin}
	}
	if tr := cmd.String("transport"); tr != "memory" && tr != "tcp" {
		return nil, "", fmt.Errorf("--transport %q: want memory or tcp", tr)
	}
	sm, err := startSimulator(ctx, s)
	return sm, name, err
}

// startSimulator starts a simulated deployment, with a spinner on a
// terminal (the key ceremony and the owners take a while).
func startSimulator(ctx context.Context, s sim.Simulation) (*sim.Simulator, error) {
	p := newProgress(-1, "starting the deployment (certificates, key ceremony, owners)")
	defer p.done()
	return sim.NewSimulator(ctx, s)
}

func simData(path, bundled, synthetic string, seed uint64) ([]byte, string, error) {
	given := 0
	for _, s := range []string{path, bundled, synthetic} {
		if s != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, "", errors.New("give one of --data, --dataset and --synthetic")
	case synthetic != "":
		var rows, d, k int
		if _, err := fmt.Sscanf(synthetic, "%dx%dx%d", &rows, &d, &k); err != nil || rows < 1 || d < 1 || k < 1 {
			return nil, "", fmt.Errorf("--synthetic %q: want ROWSxDxK, e.g. 10000x50x5", synthetic)
		}
		return sim.Synthetic(rows, d, k, seed), fmt.Sprintf("synthetic-%dx%d", rows, d), nil
	case bundled != "":
		b, err := datasets.CSV(bundled)
		return b, bundled, err
	case path != "":
		b, err := os.ReadFile(path)
		name := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(path), ".csv"), ".CSV")
		return b, name, err
	}
	return nil, "", errors.New("name the data with --data FILE.csv or --dataset " + strings.Join(datasets.Names(), "|"))
}

func jobOptions(cmd *cli.Command) (sim.JobOptions, error) {
	split, err := dp.ParseSplit(cmd.String("budget-split"))
	if err != nil {
		return sim.JobOptions{}, fmt.Errorf("--budget-split: %w", err)
	}
	if err := checkPrivacy(cmd); err != nil {
		return sim.JobOptions{}, err
	}
	o := sim.JobOptions{Analysis: cmd.String("analysis"), K: cmd.Int("k"), Epsilon: cmd.Float64("epsilon"), Delta: cmd.Float64("delta"),
		NoNoise: cmd.Bool("no-noise"), Plan: cmd.String("noise-plan"), Tolerate: cmd.Int("tolerate"), Split: split,
		Standardize: cmd.Bool("standardize")}
	if o.Release, err = parseRelease(cmd, o.Analysis); err != nil {
		return o, err
	}
	if o.Randomness, err = parseRandomness(cmd, o.Release); err != nil {
		return o, err
	}
	if o.Release == job.ReleaseComponents && cmd.Bool("auto-schema") {
		return o, errors.New("--release components: not with --auto-schema (its main job is the PCA of the release's correlation matrix)")
	}
	if o.Standardize && o.Analysis != job.PCA {
		return o, fmt.Errorf("--standardize is for pca, not %s", o.Analysis)
	}
	if o.NoNoise {
		o.Epsilon = 0
	}
	switch o.Analysis {
	case job.PCA, job.DCA, job.LDA, job.Scatter:
	default:
		return o, fmt.Errorf("--analysis %q: want pca, dca, lda or scatter", o.Analysis)
	}
	return o, nil
}

func chaosCommand() *cli.Command {
	return &cli.Command{
		Name:  "chaos",
		Usage: "run many jobs under random faults and check the invariants",
		Description: `Runs --jobs jobs in episodes of --jobs-per-episode, each episode a fresh simulated
deployment (a bundled dataset split among 3-5 owners, a committee of 1 or 2-of-3,
in-memory or TCP transport, and in every fourth episode the proxy as a separate
process). Every job gets random faults from the seed: dropped, delayed and
duplicated messages; crashes and restarts of the proxy (SIGKILL for the process),
a committee member or an owner at random points; the proxy cut from the committee,
an owner or the user cut from the proxy for a while. After every job it checks the
invariants (no acknowledged upload lost, noise-off results exact, no budget
overspent, no job stuck, state consistent after restart, ...) and prints them
with their checks and violations. It exits non-zero on any violation; each one is
reproduced with the command it prints.

  fedpca simulate chaos --seed 1 --jobs 200`,
		Flags: []cli.Flag{
			&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of everything random but the DP noise and the keys", Sources: env("seed")},
			intFlag("jobs", 200, "jobs to run"),
			intFlag("jobs-per-episode", 10, "jobs on one deployment"),
			intFlag("parallel", 2, "episodes run at once"),
			&cli.IntSliceFlag{Name: "episode", Usage: "run only this episode (repeat; reproduces a violation)"},
			boolFlag("no-processes", "never run the proxy as a separate process"),
			intFlag("load-cores", 0, "keep this many cores busy during the run (the suite must pass on a loaded machine)"),
			&cli.DurationFlag{Name: "load-for", Value: 30 * time.Minute, Usage: "stop the --load-cores load after this long", Sources: env("load-for")},
			strFlag("dir", "", "keep the deployments (certificates, state, logs) here"),
			strFlag("json", "", "write the JSON report to this file"),
			strFlag("log-level", "off", "log level of the simulated nodes (to stderr)"),
			boolFlag("quiet", "no line per job"),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			cfg := chaos.Config{Seed: cmd.Uint64("seed"), Jobs: cmd.Int("jobs"), JobsPerEpisode: cmd.Int("jobs-per-episode"),
				Episodes: cmd.IntSlice("episode"), Parallel: cmd.Int("parallel"), Dir: cmd.String("dir"), Progress: os.Stdout,
				LoadCores: cmd.Int("load-cores"), LoadFor: cmd.Duration("load-for")}
			if cmd.Bool("quiet") {
				cfg.Progress = nil
			}
			if lvl := cmd.String("log-level"); lvl != "off" {
				cfg.Logger = hclog.New(&hclog.LoggerOptions{Name: "chaos", Level: hclog.LevelFromString(lvl), Output: os.Stderr})
			}
			if !cmd.Bool("no-processes") {
				bin, err := os.Executable()
				if err != nil {
					return err
				}
				cfg.Processes = &procs.Launcher{Binary: bin}
			}
			rep, err := chaos.Run(ctx, cfg)
			if rep != nil {
				fmt.Println()
				rep.WriteText(os.Stdout)
				if path := cmd.String("json"); path != "" {
					if jerr := writeJSON(path, rep); jerr != nil {
						return jerr
					}
				}
			}
			if err != nil {
				return err
			}
			if !rep.OK() {
				return fmt.Errorf("%d invariant violations", len(rep.Violations))
			}
			return nil
		},
	}
}

// runAuto runs simulate --auto-schema: the profile, then the main job under
// the schema it chose, and reports the total privacy spent and the utility
// against the standardised, unclipped rows.
func runAuto(ctx context.Context, cmd *cli.Command, sm *sim.Simulator, opts sim.JobOptions, p *progress) error {
	rep, err := sm.RunAuto(ctx, sim.AutoOptions{JobOptions: opts, Share: cmd.Float64("profile-share"), Quantile: cmd.Float64("quantile"),
		Method: cmd.String("profile-method"), KeepScales: cmd.Bool("keep-scales")})
	p.done()
	if err != nil {
		return err
	}
	rep.Main.WriteText(os.Stdout, cmd.Bool("components"))
	fmt.Println()
	if len(rep.Profile.Features) > 0 {
		writeProfile(os.Stdout, rep.Profile)
		for _, w := range rep.Profile.Warnings {
			fmt.Printf("warning: %s\n", w)
		}
	} else {
		fmt.Printf("profile: the norms round alone (public centers and scales)\n")
	}
	fmt.Printf("chosen schema: C = %s (quantile %g of the noisy norm histogram), clips %.1f%% of the rows\n",
		rep.Schema.ClipNorm, rep.Profile.Quantile, 100*rep.Utility.ClippedFraction)
	fmt.Printf("total privacy of the %d jobs: epsilon %.4f at delta %g (mu %.4f, rho %.5f)\n",
		rep.Jobs(), float64(rep.Total.Epsilon), rep.Total.Delta, float64(rep.Total.Mu), float64(rep.Total.Rho))
	fmt.Printf("utility against the standardised, unclipped rows: q/q0 %.4f (k = %d)\n", rep.Utility.CapturedVarianceRatio, rep.Utility.K)
	if path := cmd.String("json"); path != "" {
		if err := writeJSON(path, rep); err != nil {
			return err
		}
		fmt.Printf("\nreport written to %s\n", path)
	}
	return nil
}

// writeJSON writes v as indented JSON with a final newline.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// printPower prints a power-method job's comparison and writes it to
// --json when given.
func printPower(cmd *cli.Command) func(*sim.PowerComparison, error) error {
	return func(cmp *sim.PowerComparison, err error) error {
		if err != nil {
			return err
		}
		cmp.WriteText(os.Stdout)
		if path := cmd.String("json"); path != "" {
			return writeJSON(path, cmp)
		}
		return nil
	}
}

// simLogger is the simulated nodes' logger (--log-level; off: none).
func simLogger(cmd *cli.Command) hclog.Logger {
	if lvl := cmd.String("log-level"); lvl != "off" {
		return hclog.New(&hclog.LoggerOptions{Name: "sim", Level: hclog.LevelFromString(lvl), Output: os.Stderr})
	}
	return hclog.NewNullLogger()
}

// simulateGenotypes runs `simulate --genotypes NxD`: a power-method job on
// a simulated genotype cohort (sim.GenotypeRun), in one process through
// the protocol's steps, or with --method power through the daemons, the
// owners reading their PLINK filesets through the reference panel's
// genotype schema.
func simulateGenotypes(ctx context.Context, cmd *cli.Command) error {
	var n, d int
	if _, err := fmt.Sscanf(strings.ReplaceAll(cmd.String("genotypes"), " ", ""), "%dx%d", &n, &d); err != nil || n < 1 || d < 1 {
		return fmt.Errorf("--genotypes %q: want NxD, individuals x variants (e.g. 10000x10000)", cmd.String("genotypes"))
	}
	if err := checkPrivacy(cmd); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "fedpca-genotypes-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var down []int
	if x := int(cmd.Int("down")); x > 0 {
		down = []int{x}
	}
	gr := sim.GenotypeRun{
		Cohort: sim.GenotypeParams{N: n, D: d, Populations: int(cmd.Int("populations")), Owners: int(cmd.Int("owners")),
			FST: cmd.Float("fst"), Missing: cmd.Float("missing"), Seed: cmd.Uint64("seed"), Panel: int(cmd.Int("panel")), PanelPopulations: int(cmd.Int("panel-populations"))},
		Job: sim.PowerJob{K: int(cmd.Int("k")), Oversample: int(cmd.Int("oversample")), Rounds: int(cmd.Int("rounds")),
			Epsilon: cmd.Float("epsilon"), Delta: cmd.Float("delta"), NoNoise: cmd.Bool("no-noise"),
			Plan: cmd.String("noise-plan"), Tolerate: int(cmd.Int("tolerate")),
			CSPs: int(cmd.Int("csp-nodes")), Threshold: int(cmd.Int("csp-threshold")), Down: down,
			Seed: fmt.Sprintf("simulate-%d", cmd.Uint64("seed"))},
		ClipFactor:   cmd.Float("clip-factor"),
		Dir:          dir,
		CentralIters: int(cmd.Int("central-iterations")),
	}
	if gr.Job.Threshold == 0 {
		gr.Job.Threshold = gr.Job.CSPs/2 + 1
	}
	if cmd.String("method") == "power" {
		return printPower(cmd)(gr.RunDaemons(ctx, simLogger(cmd)))
	}
	rep, err := gr.Run()
	if err != nil {
		return err
	}
	rep.WriteText(os.Stdout)
	if path := cmd.String("json"); path != "" {
		if err := writeJSON(path, rep); err != nil {
			return err
		}
		fmt.Printf("\nreport written to %s\n", path)
	}
	return nil
}
