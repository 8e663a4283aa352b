package sim

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// TestNoUploadTimeReachesUser runs a deployment over TCP and mutual TLS
// whose proxy serves its status page and metrics on a non-loopback address,
// with owners whose uploads come at moments that differ by their rows (500
// and 40,000 rows) and by a hold (one owner sends 700 ms after it took the
// job up, between two progress ticks a second apart). While the job is open,
// what the user learns (its watch, GetJob, ListJobs) has no owner lists and
// no upload timings, counts only as the last tick found them, its last
// update at a tick, and the watch's messages arrive at ticks, never at an
// upload; the job is sealed at a tick. The status page, /status.json,
// /metrics and /debug/pprof refuse the user's certificate (and an owner's)
// with 403, and show an operator's certificate each owner's upload time.
func TestNoUploadTimeReachesUser(t *testing.T) {
	if testing.Short() {
		t.Skip("a deployment over TCP")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "0.0.0.0:0")
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	statusL, metricsL := listen(), listen()
	port := func(l net.Listener) string { return fmt.Sprint(l.Addr().(*net.TCPAddr).Port) }
	every := time.Second
	if raceEnabled {
		every = 2 * time.Second
	}
	var owners []OwnerConfig
	var sch *schema.Schema
	for i, rows := range []int{500, 40000, 500} {
		data := Synthetic(rows, 30, 2, uint64(i+1))
		if sch == nil {
			var err error
			if sch, err = schema.Infer(bytes.NewReader(data), "timing", "label"); err != nil {
				t.Fatal(err)
			}
		}
		oc := OwnerConfig{ID: fmt.Sprintf("hospital-%c", 'a'+i), Schema: sch, CSV: data}
		if i == 2 {
			oc.UploadHold = 700 * time.Millisecond
		}
		owners = append(owners, oc)
	}
	cl, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 2, Threshold: 2, Owners: owners, TCP: true, Identities: []string{"operator/ops"},
		ProxyStatusListener: statusL, ProxyMetricsListener: metricsL, ProgressInterval: every, Logger: testLogger(t)}, "alice")

	spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 3, Epsilon: 1, Owners: IDs(owners), Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		at time.Time
		st *fedpcav1.JobStatus
	}
	var mu sync.Mutex
	var msgs, polls []seen
	if _, err := u.Submit(ctx, spec, sch); err != nil {
		t.Fatal(err)
	}
	// GetJob and ListJobs while the job runs, every 50 ms.
	stopPolling := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stopPolling:
				return
			case <-time.After(50 * time.Millisecond):
			}
			info, err := u.Job(ctx, spec.ID())
			if err != nil {
				continue
			}
			list, _ := u.Jobs(ctx, false)
			mu.Lock()
			polls = append(polls, seen{time.Now(), info.GetStatus()})
			for _, st := range list {
				polls = append(polls, seen{time.Now(), st})
			}
			mu.Unlock()
		}
	}()
	final, err := u.Wait(ctx, spec.ID(), func(st *fedpcav1.JobStatus) {
		mu.Lock()
		msgs = append(msgs, seen{time.Now(), st})
		mu.Unlock()
	})
	close(stopPolling)
	<-polled
	if err != nil || final.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		t.Fatalf("job: %v %v", final, err)
	}

	// The operator's view: the precise creation and upload times.
	opTLS := cl.Creds("operator/ops").ClientTLS(transport.Identity{Role: transport.RoleProxy, ID: "proxy"})
	get := func(cfg *tls.Config, addr, path string) (int, string) {
		t.Helper()
		c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer c.CloseIdleConnections()
		resp, err := c.Get("https://127.0.0.1:" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get(opTLS, port(statusL), "/status.json?job="+spec.ID())
	var st proxy.Status
	if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil || len(st.Jobs) != 1 || len(st.Jobs[0].Owners) != 3 {
		t.Fatalf("the operator's /status.json: %d %.300s", code, body)
	}
	created := st.Jobs[0].Created
	// A message or the seal comes at a tick plus the proxy's work: 250 ms
	// of slack, 600 ms under the race detector (where a seal's noise and
	// store commit alone take a few hundred milliseconds).
	slack := 250 * time.Millisecond
	if raceEnabled {
		slack = 600 * time.Millisecond
	}
	onTick := func(at time.Time) bool {
		off := at.Sub(created) % every
		return off >= 0 && off < slack
	}
	var uploads []time.Time
	for _, o := range st.Jobs[0].Owners {
		if o.At.IsZero() {
			t.Fatalf("the operator sees no upload time for %s", o.ID)
		}
		uploads = append(uploads, o.At)
	}
	// At least one upload between ticks: a watch that sent at uploads
	// would show it.
	offGrid := false
	for _, at := range uploads {
		offGrid = offGrid || !onTick(at)
	}
	if !offGrid && raceEnabled {
		t.Skipf("every upload came within %v after a tick (%v after %v): the test shows nothing this time", slack, uploads, created)
	}
	if !offGrid {
		t.Fatalf("every upload came within %v after a tick (%v after %v): the test shows nothing", slack, uploads, created)
	}

	mu.Lock()
	defer mu.Unlock()
	check := func(what string, s seen, arrival bool) {
		st := s.st
		if st.GetState() != fedpcav1.JobState_JOB_STATE_OPEN {
			return
		}
		if len(st.GetUploadedOwners()) > 0 || len(st.GetDeclinedOwners()) > 0 || st.GetTimings().GetAggregateSeconds() != 0 {
			t.Errorf("%s while open shows who uploaded or the uploads' timing: %v", what, st)
		}
		// The tick the status was computed at: the last before it arrived,
		// or the one before.
		k := int64(s.at.Sub(created) / every)
		if time.Unix(st.GetUpdatedUnix(), 0).Unix() != created.Add(time.Duration(k)*every).Unix() {
			k--
		}
		tick := created.Add(time.Duration(k) * every)
		if k < 0 || tick.Unix() != st.GetUpdatedUnix() {
			t.Errorf("%s at %v: last update %v, not a tick", what, s.at.Sub(created), time.Unix(st.GetUpdatedUnix(), 0))
			return
		}
		want := 0
		for _, at := range uploads {
			if !at.After(tick) {
				want++
			}
		}
		if int(st.GetOwnersUploaded()) != want {
			t.Errorf("%s: %d uploads shown, %d by its tick at %v", what, st.GetOwnersUploaded(), want, tick.Sub(created))
		}
		if arrival && s.at.Sub(created) > 50*time.Millisecond && !onTick(s.at) {
			t.Errorf("%s arrived %v after the job's creation: between ticks: %v", what, s.at.Sub(created), st)
		}
	}
	for i, s := range msgs {
		check(fmt.Sprintf("watch message %d", i), s, true)
	}
	for i, s := range polls {
		check(fmt.Sprintf("GetJob/ListJobs answer %d", i), s, false)
	}
	if n := len(msgs); n < 3 {
		t.Errorf("%d watch messages", n)
	}
	if sealed := created.Add(time.Duration(st.Jobs[0].Timings.UploadWindow * float64(time.Second))); !onTick(sealed) {
		t.Errorf("sealed %v after creation: not at a tick", sealed.Sub(created))
	}

	// The operator pages refuse the user and an owner; an operator reads
	// them.
	for _, who := range []string{"user/alice", "owner/hospital-a"} {
		cfg := cl.Creds(who).ClientTLS(transport.Identity{Role: transport.RoleProxy, ID: "proxy"})
		for _, page := range []struct{ addr, path string }{{port(statusL), "/"}, {port(statusL), "/status.json"}, {port(statusL), "/jobs/" + spec.ID()},
			{port(metricsL), "/metrics"}, {port(metricsL), "/debug/pprof/"}, {port(metricsL), "/debug/pprof/goroutine?debug=1"}} {
			if code, body := get(cfg, page.addr, page.path); code != http.StatusForbidden || !strings.Contains(body, who+" may not read the operator pages") {
				t.Errorf("%s reading %s: %d %.200q", who, page.path, code, body)
			}
		}
	}
	for _, path := range []string{"/metrics", "/debug/pprof/"} {
		if code, body := get(opTLS, port(metricsL), path); code != http.StatusOK || len(body) == 0 {
			t.Errorf("the operator reading %s: %d", path, code)
		}
	}
	t.Logf("created %v; uploads at %v; %d watch messages at %v", created.Format(time.StampMilli), offsets(uploads, created), len(msgs), func() []time.Duration {
		var out []time.Duration
		for _, m := range msgs {
			out = append(out, m.at.Sub(created).Round(time.Millisecond))
		}
		return out
	}())
}

func offsets(ts []time.Time, from time.Time) []time.Duration {
	var out []time.Duration
	for _, t := range ts {
		out = append(out, t.Sub(from).Round(time.Millisecond))
	}
	return out
}
