package sim

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fedpca/fedpca/datasets"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/source"
	"github.com/fedpca/fedpca/source/pgtest"
	"github.com/fedpca/fedpca/user"
)

// TestCSVAndPostgresOwners: a real job (noise off) between two owners of
// wdbc, one reading a spreadsheet export (BOM, CRLF, ';', a file of its
// own) and one reading a real PostgreSQL table through a server-side
// cursor. The release equals the exact integer sum of both owners'
// statistics, and the PCA matches reference.json.
func TestCSVAndPostgresOwners(t *testing.T) {
	srv := pgtest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ref, err := datasets.LoadReference("wdbc")
	if err != nil {
		t.Fatal(err)
	}
	data, err := datasets.CSV("wdbc")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Infer(bytes.NewReader(data), "wdbc", "label")
	if err != nil {
		t.Fatal(err)
	}
	sch.Bits = 22
	parts, err := Split(data, "label", 2, "iid", 3)
	if err != nil {
		t.Fatal(err)
	}
	// Owner a: the first part as Excel writes it.
	excel := "\ufeff" + strings.ReplaceAll(strings.ReplaceAll(string(parts[0]), ",", ";"), "\n", "\r\n")
	csvPath := filepath.Join(t.TempDir(), "hospital-a.csv")
	if err := os.WriteFile(csvPath, []byte(excel), 0o600); err != nil {
		t.Fatal(err)
	}
	// Owner b: the second part in a PostgreSQL table.
	conn, err := srv.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := pgtest.LoadCSV(ctx, conn, "wdbc_b", parts[1]); err != nil || n == 0 {
		t.Fatalf("load: %d, %v", n, err)
	}
	conn.Close(ctx)
	pgURL := srv.URL("table=wdbc_b&fetch=50")
	owners := []OwnerConfig{
		{ID: "hospital-a", Schema: sch, Source: csvPath, Policy: OwnerPolicy(true)},
		{ID: "hospital-b", Schema: sch, Source: pgURL, Policy: OwnerPolicy(true)},
	}
	logs := &syncWriter{}
	cl, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 1, Threshold: 1, Owners: owners, AllowNoNoise: true,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "sim", Level: hclog.Trace, Output: logs})}, "alice")
	_ = cl
	r := user.Request{Analysis: job.PCA, K: 5, NoNoise: true, Owners: []string{"hospital-a", "hospital-b"}}
	spec, st := submitWait(ctx, t, u, sch, r)
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		t.Fatalf("job %s: %s", st.GetState(), st.GetReason())
	}
	res, err := u.Fetch(ctx, spec, sch)
	if err != nil {
		t.Fatal(err)
	}
	// The exact integer sum of both owners' statistics, read here.
	var want []int64
	for _, src := range []string{csvPath, pgURL} {
		rows, err := source.Open(ctx, src)
		if err != nil {
			t.Fatal(err)
		}
		acc, rep, err := job.ReadRows(spec, sch, rows)
		rows.Close()
		if err != nil || rep.Skipped != 0 {
			t.Fatalf("%s: %+v %v", source.Redact(src), rep, err)
		}
		p := acc.Pack()
		if want == nil {
			want = make([]int64, len(p))
		}
		for i, v := range p {
			want[i] += v
		}
	}
	rel, err := res.Release.Release()
	if err != nil {
		t.Fatal(err)
	}
	if got := rel.Pack(); !slices.Equal(got, want) {
		t.Fatalf("the release is not the exact sum of the two owners' statistics")
	}
	if rel.N[0] != int64(ref.N)<<sch.Bits {
		t.Errorf("n = %d, want %d << %d", rel.N[0], ref.N, sch.Bits)
	}
	checkEigen(t, "pca", res.Components.AllEigenvalues, ref.PCAEigenvalues, 1e-6)
	for j, w := range ref.PCATopK {
		for i := range w {
			if got := res.Components.W.At(i, j); math.Abs(got-w[i]) > 1e-6 {
				t.Fatalf("pca component %d entry %d: %.9f, reference %.9f", j, i, got, w[i])
			}
		}
	}
	if !strings.Contains(logs.String(), res.JobID[:16]) {
		t.Error("the owners' logs say nothing of the job")
	}
	if strings.Contains(logs.String(), pgtest.Password) {
		t.Error("a log line holds the database password")
	}
}

// syncWriter collects log lines from every goroutine of a cluster.
type syncWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}
