package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/sim/procs"
)

func main() {
	suite := flag.String("suite", "owners", "owners, dims, utility, profile, load, conns, sources, pipeline, timing, seal, split-sweep or dca-sweep")
	owners := flag.String("owners", "10,100,1000,10000", "owner counts (suite owners)")
	dims := flag.String("dims", "8,50,100,784", "feature counts (suite dims)")
	reps := flag.Int("reps", 3, "jobs per configuration (medians are reported)")
	names := flag.String("datasets", strings.Join(datasets.Names(), ","), "datasets (suite utility)")
	epsilons := flag.String("epsilons", "0.1,0.5,1,2,5", "epsilons (suite utility)")
	splitFlag := flag.String("split", "", "budget split R/V/N of the jobs (suite utility; default: the analysis's); suites split-sweep and dca-sweep: the splits to measure, comma-separated (default: their grids)")
	holdsFlag := flag.String("holds", "0s,250ms,1s", "owners' upload holds (suites timing, seal)")
	intervalsFlag := flag.String("intervals", "1s,1500ms,2s,5s", "the proxy's progress intervals (suite seal)")
	flag.BoolVar(&addOne, "add-one", false, "suites split-sweep and dca-sweep: noise calibrated for adding one row alone, as if the row cap never replaced a row (dp.Neighbours), for comparison: not a valid guarantee")
	plansFlag := flag.String("plans", strings.Join(dp.Plans, ","), "noise plans (suite utility)")
	seedsFlag := flag.Int("gauss-seeds", 200, "Analyze Gauss draws per cell (suite utility)")
	jsonOut := flag.String("json", "", "append every run's report (JSON lines) to this file")
	rowsFlag := flag.String("rows", "10000,100000,1000000", "row counts (suite sources)")
	srcFlag := flag.String("source", "", "source spec (suite sources-child)")
	schemaFlag := flag.String("schema", "", "schema file (suite sources-child)")
	pythonFlag := flag.String("python", "python3,/usr/bin/python3", "interpreters to try for numpy and scikit-learn (suite pipeline)")
	flag.StringVar(&cpuProfileDir, "cpuprofile", "", "write CPU profiles to this directory (suites owners and dims): bench.pprof of this process (the committee and the user) while jobs run, and one per node run as a process (proxy.pprof, farm-N.pprof) over its life; profile one configuration at a time, a later one overwrites them")
	flag.Parse()
	if cpuProfileDir != "" {
		check(os.MkdirAll(cpuProfileDir, 0o755))
		check(os.Setenv("FEDPCA_CPUPROFILE_DIR", cpuProfileDir)) // read by the nodes run as processes
	}
	ctx := context.Background()
	var raw io.Writer = io.Discard
	if *jsonOut != "" {
		f, err := os.OpenFile(*jsonOut, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		check(err)
		defer f.Close()
		raw = f
	}
	switch *suite {
	case "owners":
		bin := buildBinary()
		fmt.Println("| owners | rows | owner share (median) | proxy aggregate | upload window | seal | key switch | user decrypt+analysis | total | central non-private | overhead | proxy peak RSS | bytes owner / proxy / csp / user (sent) |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, n := range ints(*owners) {
			rows := max(2000, 10*n)
			r := runScale(ctx, bin, n, rows, 50, *reps, raw)
			r.print(strconv.Itoa(n), rows)
		}
	case "dims":
		bin := buildBinary()
		fmt.Println("| d | ciphertexts | owner share (median) | proxy aggregate | upload window | seal | key switch | user decrypt+analysis | total | central non-private | overhead | proxy peak RSS | bytes owner / proxy / csp / user (sent) |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		n := 10
		if isSet("owners") {
			n = ints(*owners)[0]
		}
		for _, d := range ints(*dims) {
			r := runScale(ctx, bin, n, max(2000, 10*n), d, *reps, raw)
			r.print(strconv.Itoa(d), 0)
		}
	case "utility":
		split, err := dp.ParseSplit(*splitFlag)
		check(err)
		utility(ctx, utilityConfig{names: strings.Split(*names, ","), epsilons: floats(*epsilons), split: split,
			plans: strings.Split(*plansFlag, ","), seeds: *seedsFlag, reps: *reps}, raw)
	case "profile":
		profileSuite(ctx, strings.Split(*names, ","), *reps)
	case "load":
		load(ctx, ints(*owners)[0], raw)
	case "conns":
		conns(ctx, ints(*owners), raw)
	case "sources":
		d := 10
		if isSet("dims") {
			d = ints(*dims)[0]
		}
		sources(ctx, ints(*rowsFlag), d)
	case "sources-child":
		sourcesChild(ctx, *srcFlag, *schemaFlag)
	case "timing":
		timing(ctx, durations(*holdsFlag), *reps)
	case "seal":
		rows := []int{1000, 1000000}
		if isSet("rows") {
			rows = ints(*rowsFlag)
		}
		seal(ctx, durations(*holdsFlag), durations(*intervalsFlag), rows[0], rows[1], *reps)
	case "split-sweep":
		splitSweep(sweepSplits(*splitFlag))
	case "dca-sweep":
		dcaSweep(sweepSplits(*splitFlag))
	case "pipeline":
		n, d := 200000, 100
		if isSet("rows") {
			n = ints(*rowsFlag)[0]
		}
		if isSet("dims") {
			d = ints(*dims)[0]
		}
		pipeline(ctx, n, d, *reps, strings.Split(*pythonFlag, ","))
	case "pipeline-child":
		pipelineChild(ctx, *srcFlag, *schemaFlag, *reps)
	case "probe":
		probe(ctx, ints(*owners)[0])
	default:
		check(fmt.Errorf("unknown suite %q", *suite))
	}
}

// durations reads a comma-separated list of durations.
func durations(s string) []time.Duration {
	var out []time.Duration
	for _, h := range strings.Split(s, ",") {
		d, err := time.ParseDuration(h)
		check(err)
		out = append(out, d)
	}
	return out
}

func isSet(name string) bool {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		check(err)
		out = append(out, n)
	}
	return out
}

// buildBinary builds fedpca for the nodes run as processes.
func buildBinary() string {
	dir, err := os.MkdirTemp("", "fedpca-bench-")
	check(err)
	bin := filepath.Join(dir, "fedpca")
	out, err := exec.Command("go", "build", "-o", bin, "./cmd/fedpca").CombinedOutput()
	if err != nil {
		check(fmt.Errorf("build: %v\n%s", err, out))
	}
	return bin
}

// cpuProfileDir is where -cpuprofile writes (empty: no profiles).
var cpuProfileDir string

// newLauncher runs nodes as processes of bin, the proxy with
// BENCH_PROXY_GOMEMLIMIT as its GOMEMLIMIT if set.
func newLauncher(bin string) *procs.Launcher {
	return &procs.Launcher{Binary: bin, ProxyMemoryLimit: os.Getenv("BENCH_PROXY_GOMEMLIMIT")}
}

type scaleResult struct {
	reports []*sim.Report
	peakRSS int64
	cts     int
	setup   time.Duration
}

// runScale runs reps PCA jobs at epsilon 1 (servers plan, committee 2-of-3)
// on synthetic data.
func runScale(ctx context.Context, bin string, owners, rows, d, reps int, raw io.Writer) *scaleResult {
	start := time.Now()
	launcher := newLauncher(bin)
	s, err := sim.NewSimulator(ctx, sim.Simulation{Data: sim.Synthetic(rows, d, 5, 1), Name: fmt.Sprintf("synthetic-d%d", d), Label: "label",
		Owners: owners, How: "iid", Seed: 1, CSPs: 3, Threshold: 2, TCP: true, Processes: launcher, ProxyProcess: true,
		OwnerFarms: (owners + 2499) / 2500})
	check(err)
	defer s.Close()
	r := &scaleResult{setup: time.Since(start)}
	if cpuProfileDir != "" {
		f, err := os.Create(filepath.Join(cpuProfileDir, "bench.pprof"))
		check(err)
		check(pprof.StartCPUProfile(f))
		defer func() { pprof.StopCPUProfile(); f.Close() }()
		stop := heapPeaks(filepath.Join(cpuProfileDir, "bench-heap.pprof"))
		defer stop()
	}
	for i := range reps {
		if i > 0 {
			check(s.Settle(ctx, time.Minute)) // the owners prepare between jobs, as in a deployment
		}
		rep, err := s.Run(ctx, sim.JobOptions{Analysis: job.PCA, K: 5, Epsilon: 1, Plan: dp.PlanServers})
		check(err)
		fmt.Fprintf(os.Stderr, "owners %d d %d rep %d: total %.2fs\n", owners, d, i+1, rep.Timings.Total)
		r.reports = append(r.reports, rep)
		b, _ := json.Marshal(rep)
		fmt.Fprintf(raw, "%s\n", b)
	}
	r.peakRSS, err = launcher.ProxyPeakRSS()
	check(err)
	if peak, farms, err := launcher.FarmsPeakRSS(); err == nil {
		perFarm := (owners + farms - 1) / farms
		fmt.Fprintf(os.Stderr, "owners %d: %d farms, largest farm peak RSS %s, %.0f KiB per farm owner\n", owners, farms, mib(float64(peak)), float64(peak)/1024/float64(perFarm))
	}
	r.cts = (d*(d+1)/2 + d + 1 + 8191) / 8192
	return r
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	sort.Float64s(s)
	return s[len(s)/2]
}

func (r *scaleResult) med(f func(*sim.Report) float64) float64 {
	var v []float64
	for _, rep := range r.reports {
		v = append(v, f(rep))
	}
	return median(v)
}

func dur(s float64) string {
	switch {
	case s < 1e-3:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.1f ms", s*1e3)
	}
	return fmt.Sprintf("%.2f s", s)
}

func mib(b float64) string {
	if b < 1<<20 {
		return fmt.Sprintf("%.0f KiB", b/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", b/(1<<20))
}

func (r *scaleResult) print(key string, rows int) {
	t := func(f func(sim.Timings) float64) string {
		return dur(r.med(func(rep *sim.Report) float64 { return f(rep.Timings) }))
	}
	b := func(role string) string {
		return mib(r.med(func(rep *sim.Report) float64 { return float64(rep.Bytes[role].Sent) }))
	}
	second := key
	if rows > 0 {
		second = strconv.Itoa(rows)
	} else {
		second = strconv.Itoa(r.cts)
	}
	overhead := r.med(func(rep *sim.Report) float64 { return rep.Timings.Total / rep.Timings.Central })
	fmt.Printf("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0fx | %s | %s / %s / %s / %s |\n", key, second,
		t(func(x sim.Timings) float64 { return x.OwnerShare }), t(func(x sim.Timings) float64 { return x.Aggregate }),
		t(func(x sim.Timings) float64 { return x.UploadWindow }), t(func(x sim.Timings) float64 { return x.Seal }),
		t(func(x sim.Timings) float64 { return x.KeySwitch }), t(func(x sim.Timings) float64 { return x.UserAnalysis }),
		t(func(x sim.Timings) float64 { return x.Total }), t(func(x sim.Timings) float64 { return x.Central }), overhead,
		mib(float64(r.peakRSS)), b("owner"), b("proxy"), b("csp"), b("user"))
}

// utility prints, per dataset and epsilon, the mean PCA q/q0 of every noise
// plan (tolerate 0, the default delta 1e-6) next to Analyze Gauss on the
// same rows at the same epsilon and delta, with the classical and the
// analytic calibration. The classical baseline is checked against
// reference.json's Analyze Gauss (numpy, delta = 1/N) in a second table.
// pairedDraws is how many common-random-number draws the utility suite's
// paired comparison with Analyze Gauss takes.
const pairedDraws = 2000

// utilityConfig selects the utility suite's cells.
type utilityConfig struct {
	names    []string
	epsilons []float64
	split    dp.Split
	plans    []string
	seeds    int // Analyze Gauss draws per cell
	reps     int // jobs per plan and cell
}

func utility(ctx context.Context, cfg utilityConfig, raw io.Writer) {
	names, epsilons, split, plans, seeds, reps := cfg.names, cfg.epsilons, cfg.split, cfg.plans, cfg.seeds, cfg.reps
	delta := job.DefaultDelta
	fmt.Printf("| dataset | epsilon | Analyze Gauss classical | Analyze Gauss analytic | %s | servers - analytic | centred: analytic AG, servers, difference | paired, %d draws: fedpca - analytic AG ± se, uncentred; centred |\n", strings.Join(plans, " | "), pairedDraws)
	fmt.Println("|---|---|---|---|" + strings.Repeat("---|", len(plans)+3))
	worst := math.Inf(1)
	var checks []string
	classical := func(e, delta float64) float64 { return math.Sqrt(2*math.Log(1.25/delta)) / e }
	analytic := func(e, delta float64) float64 { return 1 / dp.GaussMu(e, delta) }
	for _, name := range names {
		ref, err := datasets.LoadReference(name)
		check(err)
		data, err := datasets.CSV(name)
		check(err)
		s, err := sim.NewSimulator(ctx, sim.Simulation{Data: data, Name: name, Label: "label", Owners: 10, How: "iid", Seed: 1, CSPs: 3, Threshold: 2})
		check(err)
		gaussBoth := func(sigma float64) (u, c []float64) {
			for seed := range seeds {
				qu, qc := s.AnalyzeGauss(sigma, uint64(seed))
				u, c = append(u, qu), append(c, qc)
			}
			return u, c
		}
		gauss := func(sigma float64) (float64, float64) {
			u, _ := gaussBoth(sigma)
			return meanStd(u)
		}
		for _, e := range epsilons {
			row := []string{name, fmt.Sprint(e)}
			cm, cs := gauss(classical(e, delta))
			au, ac := gaussBoth(analytic(e, delta))
			am, as := meanStd(au)
			acm, _ := meanStd(ac)
			var centred []float64
			row = append(row, fmt.Sprintf("%.4f ± %.4f", cm, cs), fmt.Sprintf("%.4f ± %.4f", am, as))
			var servers float64
			var sigma *job.BlockValues
			for _, plan := range plans {
				var qs []float64
				for range reps {
					rep, err := s.Run(ctx, sim.JobOptions{Analysis: job.PCA, K: min(5, ref.D), Epsilon: e, Plan: plan, Split: split})
					check(err)
					qs = append(qs, *rep.Utility.CapturedVarianceRatioUncentred)
					if plan == dp.PlanServers {
						centred = append(centred, *rep.Utility.CapturedVarianceRatio)
						sigma = &rep.Result.Privacy.SigmaTotal
					}
					b, _ := json.Marshal(rep)
					fmt.Fprintf(raw, "%s\n", b)
				}
				m, sd := meanStd(qs)
				if plan == dp.PlanServers {
					servers = m
				}
				row = append(row, fmt.Sprintf("%.4f ± %.4f", m, sd))
			}
			diff := servers - am
			if e >= 0.5 {
				worst = math.Min(worst, diff)
			}
			row = append(row, fmt.Sprintf("%+.4f", diff))
			if len(centred) > 0 {
				scm, _ := meanStd(centred)
				row = append(row, fmt.Sprintf("%.4f, %.4f, %+.4f", acm, scm, scm-acm))
			}
			if sigma != nil {
				p := s.PairedGauss(analytic(e, delta), float64(sigma.R), float64(sigma.V), float64(sigma.N), min(5, ref.D), pairedDraws)
				du, su := p.Diff(false)
				dc, scc := p.Diff(true)
				row = append(row, fmt.Sprintf("%+.4f ± %.4f; centred %+.4f ± %.4f", du, su, dc, scc))
			}
			fmt.Println("| " + strings.Join(row, " | ") + " |")
			fmt.Fprintf(os.Stderr, "%s eps %v done\n", name, e)
			key := strconv.FormatFloat(e, 'f', -1, 64)
			if key == "1" || key == "2" || key == "5" {
				key += ".0"
			}
			if rq, ok := ref.AnalyzeGauss[key]; ok {
				m, sd := gauss(classical(e, ref.AnalyzeGaussDelta))
				checks = append(checks, fmt.Sprintf("| %s | %v | %.4g | %.4f ± %.4f | %.4f ± %.4f |", name, e, ref.AnalyzeGaussDelta, m, sd, rq.Mean, rq.Std))
			}
		}
		s.Close()
	}
	fmt.Printf("\nWorst servers - analytic Analyze Gauss at epsilon >= 0.5: %+.4f\n", worst)
	fmt.Printf("\nThe classical baseline against reference.json (numpy's Analyze Gauss at its delta = 1/N over 10 seeds; here %d; the same rows up to the 2^-16 quantisation):\n", seeds)
	fmt.Println("\n| dataset | epsilon | delta | this baseline | reference.json |")
	fmt.Println("|---|---|---|---|---|")
	for _, c := range checks {
		fmt.Println(c)
	}
}

func floats(s string) []float64 {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		check(err)
		out = append(out, x)
	}
	return out
}

func meanStd(v []float64) (float64, float64) {
	m := 0.0
	for _, x := range v {
		m += x
	}
	m /= float64(len(v))
	s := 0.0
	for _, x := range v {
		s += (x - m) * (x - m)
	}
	return m, math.Sqrt(s / float64(len(v)))
}

// probe runs one job with many owners while sampling the proxy's memory
// every second, and prints the peak samples and the heap profile taken at the
// highest heap (suite probe).
func probe(ctx context.Context, owners int) {
	launcher := newLauncher(buildBinary())
	s, err := sim.NewSimulator(ctx, sim.Simulation{Data: sim.Synthetic(max(2000, 10*owners), 50, 5, 1), Name: "probe", Label: "label",
		Owners: owners, How: "iid", Seed: 1, CSPs: 3, Threshold: 2, TCP: true, Processes: launcher, ProxyProcess: true, OwnerFarms: (owners + 2499) / 2500})
	check(err)
	defer s.Close()
	addr := "http://" + s.Cluster().ProxyMetricsAddr()
	done := make(chan struct{})
	sampled := make(chan string)
	go func() {
		var peak float64
		var best string
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				sampled <- best
				return
			case <-tick.C:
			}
			metrics := fetch(addr + "/metrics")
			heap := metricValue(metrics, "go_memstats_heap_inuse_bytes")
			if heap <= peak {
				continue
			}
			peak = heap
			var keep []string
			for _, line := range strings.Split(metrics, "\n") {
				if strings.HasPrefix(line, "go_memstats_heap_") || strings.HasPrefix(line, "process_resident") || strings.HasPrefix(line, "go_goroutines") {
					keep = append(keep, line)
				}
			}
			prof := filepath.Join(os.TempDir(), "fedpca-probe-heap.pb.gz")
			if err := os.WriteFile(prof, []byte(fetch(addr+"/debug/pprof/heap")), 0o644); err == nil {
				top, _ := exec.Command("go", "tool", "pprof", "-top", "-inuse_space", prof).CombinedOutput()
				keep = append(keep, string(top))
			}
			best = strings.Join(keep, "\n")
		}
	}()
	_, err = s.Run(ctx, sim.JobOptions{Analysis: job.PCA, K: 5, Epsilon: 1, Plan: dp.PlanServers})
	close(done)
	check(err)
	fmt.Println(<-sampled)
	peakRSS, _ := launcher.ProxyPeakRSS()
	fmt.Println("peak RSS", peakRSS>>20, "MiB")
}

func fetch(url string) string {
	resp, err := http.Get(url)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func metricValue(metrics, name string) float64 {
	for _, line := range strings.Split(metrics, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// load measures owners uploading at once to one proxy process over loopback
// TCP with mutual TLS (procs.RunLoad) and prints the upload figures of
// docs/RELIABILITY.md; it fails unless every upload was acknowledged and is
// in the job's result.
func load(ctx context.Context, owners int, raw io.Writer) {
	rep, err := procs.RunLoad(ctx, procs.LoadConfig{Owners: owners, Rows: 10, D: 50, Launcher: newLauncher(buildBinary()), Seed: 1})
	if rep != nil {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(raw, "%s\n", b)
		fmt.Println("| owners | acknowledged | failed | busy answers | retries after errors | window (release to last ack) | throughput | upload latency p50 / p99 / max | proxy CPU | proxy peak RSS | in the result | key switch |")
		fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|")
		fmt.Printf("| %d | %d | %d | %d | %d | %s | %.0f uploads/s, %s/s | %s / %s / %s | %.2f s (%.1f ms an upload, %.0f%% of one core) | %s | %d | %s |\n",
			rep.Owners, rep.Acknowledged, rep.Failed, rep.Busy, rep.Retries, dur(rep.Window), float64(rep.Acknowledged)/rep.Window,
			mib(float64(rep.UploadBytes)/rep.Window), dur(rep.LatencyP50), dur(rep.LatencyP99), dur(rep.LatencyMax),
			rep.ProxyCPU, 1000*rep.ProxyCPU/float64(max(rep.Acknowledged, 1)), 100*rep.ProxyCPU/rep.Window, mib(float64(rep.ProxyPeakRSS)), rep.Included, dur(rep.KeySwitch))
		fmt.Fprintf(os.Stderr, "prepared %d owners' shares and connections in %.1f s\n", rep.Owners, rep.Prepare)
		for _, e := range rep.Errors[:min(len(rep.Errors), 10)] {
			fmt.Fprintln(os.Stderr, "upload failed:", e)
		}
	}
	check(err)
	if rep.Failed > 0 || rep.Included != owners {
		check(fmt.Errorf("%d of %d uploads failed; %d owners in the result", rep.Failed, owners, rep.Included))
	}
}

// conns measures what an owner's connection costs the proxy process, idle
// and watching, at each count of -owners (procs.RunConns), and prints the
// top of the proxy's heap profile with every watch open.
func conns(ctx context.Context, counts []int, raw io.Writer) {
	bin := buildBinary()
	fmt.Println("| connections | watching | proxy heap in use / conn | stacks / conn | RSS / conn | goroutines / conn | proxy RSS (base, loaded) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	var tops []string
	for _, n := range counts {
		for _, watch := range []bool{false, true} {
			prof := filepath.Join(os.TempDir(), fmt.Sprintf("fedpca-conns-%d-%v.pb.gz", n, watch))
			rep, err := procs.RunConns(ctx, procs.ConnsConfig{Conns: n, Watch: watch, Launcher: newLauncher(bin), HeapProfile: prof})
			check(err)
			b, _ := json.Marshal(rep)
			fmt.Fprintf(raw, "%s\n", b)
			fmt.Printf("| %d | %v | %.1f KiB | %.1f KiB | %.1f KiB | %.2f | %s, %s |\n", n, watch, rep.PerConn.HeapInuse/1024, rep.PerConn.StackInuse/1024,
				rep.PerConn.RSS/1024, rep.PerConn.Goroutines, mib(rep.Base.RSS), mib(rep.Loaded.RSS))
			if watch {
				top, _ := exec.Command("go", "tool", "pprof", "-top", "-inuse_space", "-nodecount", "25", prof).CombinedOutput()
				tops = append(tops, fmt.Sprintf("%d watching connections (%s):\n%s", n, prof, top))
			}
		}
	}
	fmt.Fprintln(os.Stderr, strings.Join(tops, "\n"))
}

// heapPeaks writes this process's heap profile to path each time its live
// heap passes a new peak by a tenth (sampled every second), so that the
// profile left shows what the peak held; stop ends the sampling.
func heapPeaks(path string) (stop func()) {
	done := make(chan struct{})
	go func() {
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak+peak/10 {
				peak = v
				if f, err := os.Create(path); err == nil {
					_ = pprof.WriteHeapProfile(f)
					f.Close()
				}
			}
		}
	}()
	return func() { close(done) }
}
