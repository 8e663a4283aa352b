package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/source"
)

// pipelineScript times numpy.loadtxt and scikit-learn's PCA (k = 5) on the
// file, reps times, and prints the seconds of each run (imports and
// interpreter start-up are not timed).
const pipelineScript = `
import sys, time
import numpy as np
from sklearn.decomposition import PCA
path, d, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for _ in range(reps):
    t = time.perf_counter()
    x = np.loadtxt(path, delimiter=",", skiprows=1, usecols=range(d))
    PCA(n_components=5).fit(x)
    print(time.perf_counter() - t, flush=True)
`

// pipeline measures one owner's share of a PCA job on a large CSV file
// (issue 17): the CSV is written once; a child process (this binary,
// -suite pipeline-child) opens it as an owner does, reads, quantizes,
// clips and accumulates the rows (job.ReadRows, on every core), adds its
// noise share and encrypts (job.OwnerCiphertexts), reps times; in the same
// run python3 times numpy.loadtxt + sklearn PCA on the same file. It
// prints the medians and their ratio.
func pipeline(ctx context.Context, n, d, reps int, pythons []string) {
	dir, err := os.MkdirTemp("", "fedpca-bench-pipeline-")
	check(err)
	defer os.RemoveAll(dir)
	data, schPath, csvPath := writeSynthetic(dir, n, d)
	size := len(data)
	data = nil // the child reads the file

	self, err := os.Executable()
	check(err)
	cmd := exec.CommandContext(ctx, self, "-suite", "pipeline-child", "-source", csvPath, "-schema", schPath, "-reps", strconv.Itoa(reps))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	check(err)
	f := strings.Fields(string(out))
	if len(f) != reps+3 {
		check(fmt.Errorf("pipeline-child printed %q", out))
	}
	owner := make([]float64, reps)
	for i := range owner {
		owner[i], err = strconv.ParseFloat(f[i], 64)
		check(err)
	}
	oneCore, err := strconv.ParseFloat(f[reps], 64)
	check(err)
	hwm, err := strconv.ParseInt(f[reps+1], 10, 64)
	check(err)
	procs := f[reps+2]

	py, pyTimes, pyErr := numpyTimes(ctx, pythons, csvPath, d, reps)
	fmt.Printf("| rows | d | CSV | owner share (median of %d, %s cores) | µs/row | one core (ReadRows) | owner peak RSS | numpy loadtxt + sklearn PCA (median) | owner / numpy |\n", reps, procs)
	fmt.Println("|---|---|---|---|---|---|---|---|---|")
	o := median(owner)
	numpy, ratio := "not run: "+pyErr, "n/a"
	if pyErr == "" {
		numpy = dur(median(pyTimes)) + " (" + py + ")"
		ratio = fmt.Sprintf("%.2fx", o/median(pyTimes))
	}
	fmt.Printf("| %d | %d | %s | %s | %.1f | %s | %s | %s | %s |\n", n, d, mib(float64(size)), dur(o), o/float64(n)*1e6, dur(oneCore), mib(float64(hwm*1024)), numpy, ratio)
}

// numpyTimes runs pipelineScript with the first of pythons that imports
// numpy and scikit-learn, or says why none could.
func numpyTimes(ctx context.Context, pythons []string, path string, d, reps int) (string, []float64, string) {
	for _, py := range pythons {
		if exec.CommandContext(ctx, py, "-c", "import numpy, sklearn").Run() != nil {
			continue
		}
		out, err := exec.CommandContext(ctx, py, "-c", pipelineScript, path, strconv.Itoa(d), strconv.Itoa(reps)).Output()
		if err != nil {
			return py, nil, fmt.Sprintf("%s failed: %v", py, err)
		}
		var times []float64
		for _, f := range strings.Fields(string(out)) {
			t, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return py, nil, fmt.Sprintf("%s printed %q", py, out)
			}
			times = append(times, t)
		}
		if len(times) == 0 {
			return py, nil, fmt.Sprintf("%s printed nothing", py)
		}
		return py, times, ""
	}
	return "", nil, fmt.Sprintf("no python with numpy and scikit-learn among %s (apt-get install python3-numpy python3-sklearn)", strings.Join(pythons, ", "))
}

// pipelineChild computes an owner's share of a PCA job reps times, as the
// owner does (owner/jobs.go: open the source, job.ReadRows,
// job.OwnerCiphertexts with the owners noise plan, so that the owner draws
// noise), and prints the seconds of each, the seconds of one ReadRows on
// one goroutine, its peak RSS in KiB and GOMAXPROCS.
func pipelineChild(ctx context.Context, spec, schemaPath string, reps int) {
	b, err := os.ReadFile(schemaPath)
	check(err)
	sch, err := schema.Parse(b)
	check(err)
	p, err := he.NewDefaultParams()
	check(err)
	committee := he.GenerateKeyPair(p).Public // encrypting under it costs what the committee key costs
	js := &job.Spec{Analysis: job.PCA, K: 5, Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanOwners, Split: dp.DefaultSplitFor(job.PCA),
		NumOwners: 10, CommitteeN: 3, CommitteeThreshold: 2,
		MaxRows: 1 << 40, MaxOwnerRows: 1 << 40}
	for range reps {
		start := time.Now()
		rows, err := source.Open(ctx, spec)
		check(err)
		acc, _, err := job.ReadRows(js, sch, rows)
		check(err)
		rows.Close()
		_, _, err = job.OwnerCiphertexts(js, sch, p, committee, acc, nil)
		check(err)
		fmt.Println(time.Since(start).Seconds())
	}
	rows, err := source.Open(ctx, spec)
	check(err)
	start := time.Now()
	_, _, err = job.ReadRowsWorkers(js, sch, rows, 1)
	check(err)
	fmt.Println(time.Since(start).Seconds())
	rows.Close()
	fmt.Println(peakRSSKiB(), runtime.GOMAXPROCS(0))
}

// peakRSSKiB returns VmHWM, the peak RSS of this process's own address
// space (getrusage's maxrss would include the parent's RSS at the fork).
func peakRSSKiB() int64 {
	st, err := os.ReadFile("/proc/self/status")
	check(err)
	var hwm int64
	for _, l := range strings.Split(string(st), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmHWM:" {
			_, err = fmt.Sscan(f[1], &hwm)
			check(err)
		}
	}
	return hwm
}
