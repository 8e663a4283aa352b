package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedpca/fedpca/datasets"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// TestLongRunFlat: daemons that finish job after job keep no state per job
// in memory beyond the proxy's record of it. One process runs the proxy, a
// CSP and two owners (the harness's public API only) through
// LONGRUN_JOBS jobs (default 100); after job 20 and after the last, with a
// GC before each reading, it compares the goroutines, the shared response
// encodings (transport.SharedLen: a job's ticket used to stay there forever)
// and the live heap. The tolerances: a few goroutines (gRPC's transient
// ones), no shared encoding, and longrunHeapPerJob bytes of heap per job
// (the proxy keeps each job's record in memory for its status and listings:
// spec, signature, certificate, schema, owner tree: about 10 KiB measured).
// Reverting the release of finished jobs' tickets fails it (21 -> 101 shared
// encodings).
func TestLongRunFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("long-running: 100 jobs")
	}
	jobs := 100
	if s := os.Getenv("LONGRUN_JOBS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 20 {
			t.Fatalf("LONGRUN_JOBS=%q: want a number over 20", s)
		}
		jobs = n
	}
	const warm = 20
	data, err := datasets.CSV("wine")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Infer(bytes.NewReader(data), "wine", "label")
	if err != nil {
		t.Fatal(err)
	}
	parts, err := Split(data, "label", 2, "iid", 1)
	if err != nil {
		t.Fatal(err)
	}
	var owners []OwnerConfig
	var ids []string
	for i, p := range parts {
		id := fmt.Sprintf("owner-%d", i+1)
		owners = append(owners, OwnerConfig{ID: id, Schema: sch, CSV: p, Policy: OwnerPolicy(true)})
		ids = append(ids, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: 1, Threshold: 1, Owners: owners, Users: []string{"alice"},
		AllowNoNoise: true, Insecure: true, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	u, err := cl.User("alice")
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()

	type reading struct {
		goroutines, shared int
		heap               uint64
	}
	read := func() reading {
		runtime.GC()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return reading{goroutines: runtime.NumGoroutine(), shared: transport.SharedLen(), heap: ms.HeapAlloc}
	}
	var at reading
	for i := 1; i <= jobs; i++ {
		r := user.Request{Analysis: job.PCA, K: 2, NoNoise: true, Schema: sch, Owners: ids, Deadline: time.Now().Add(5 * time.Minute)}
		spec, err := u.Spec(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := u.Submit(ctx, spec, sch); err != nil {
			t.Fatal(err)
		}
		st, err := u.Wait(ctx, spec.ID(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
			t.Fatalf("job %d: %s: %s", i, st.GetState(), st.GetReason())
		}
		if _, err := u.Fetch(ctx, spec, sch); err != nil {
			t.Fatal(err)
		}
		if i == warm {
			at = read()
		}
	}
	end := read()
	perJob := (int64(end.heap) - int64(at.heap)) / int64(jobs-warm)
	t.Logf("after job %d: %d goroutines, %d shared encodings, heap %d KiB; after job %d: %d, %d, %d KiB (%d bytes per job)",
		warm, at.goroutines, at.shared, at.heap>>10, jobs, end.goroutines, end.shared, end.heap>>10, perJob)
	if end.goroutines > at.goroutines+longrunGoroutines {
		t.Errorf("goroutines grew from %d to %d over %d jobs", at.goroutines, end.goroutines, jobs-warm)
	}
	if end.shared > at.shared {
		t.Errorf("shared encodings grew from %d to %d over %d jobs (finished jobs' tickets kept)", at.shared, end.shared, jobs-warm)
	}
	if perJob > longrunHeapPerJob {
		t.Errorf("heap grew by %d bytes per job over %d jobs, more than %d", perJob, jobs-warm, longrunHeapPerJob)
	}
}

// The long run's tolerances (see TestLongRunFlat).
const (
	longrunGoroutines = 5
	longrunHeapPerJob = 32 << 10
)
