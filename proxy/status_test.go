package proxy

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fedpca/fedpca/transport"
)

// TestStatusListener runs a proxy whose status page listens on a
// non-loopback address: a client without a certificate from the
// deployment's CA is refused, a user's certificate gets 403; an operator's
// reads the page and its JSON, which show the unreachable committee member.
func TestStatusListener(t *testing.T) {
	dir := t.TempDir()
	ca, err := transport.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]*transport.Credentials{}
	for _, id := range []transport.Identity{{Role: transport.RoleProxy, ID: "proxy"}, {Role: transport.RoleOperator, ID: "ops"}, {Role: transport.RoleUser, ID: "alice"}} {
		d := filepath.Join(dir, "certs", id.Role)
		if _, err := ca.WriteNode(d, id, transport.NodeOptions{Validity: time.Hour}); err != nil {
			t.Fatal(err)
		}
		if creds[id.Role], err = transport.LoadCredentials(d); err != nil {
			t.Fatal(err)
		}
	}
	// A committee member nobody listens at.
	gone, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone.Close()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Listener: lis, Creds: creds["proxy"], Store: filepath.Join(dir, "state"), StatusListener: sl,
		Committee: []Member{{ID: "csp-1", Addr: gone.Addr().String()}}, Threshold: 1,
		RetryInterval: 50 * time.Millisecond, HealthInterval: 20 * time.Millisecond}

	insecure := cfg
	insecure.Creds, insecure.Insecure = nil, true
	if _, err := New(insecure); err == nil || !strings.Contains(err.Error(), "status page") {
		t.Fatalf("insecure proxy with a non-loopback status page: %v", err)
	}

	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	base := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(sl.Addr().(*net.TCPAddr).Port))
	get := func(path string, cfg *tls.Config) (string, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(base + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true} //nolint:gosec // the test checks the server's side
	if body, err := get("/status.json", noCert); err == nil {
		t.Fatalf("a client without a certificate read the status page: %.200s", body)
	}
	if body, err := get("/status.json", creds["user"].ClientTLS(transport.Identity{Role: transport.RoleProxy})); err != nil || !strings.Contains(body, "user/alice may not read the operator pages") {
		t.Fatalf("a user read the status page: %.200s %v", body, err)
	}
	operator := creds["operator"].ClientTLS(transport.Identity{Role: transport.RoleProxy})
	var st Status
	for deadline := time.Now().Add(30 * time.Second); ; {
		body, err := get("/status.json", operator)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatalf("status.json: %v: %.300s", err, body)
		}
		if len(st.Committee.Members) == 1 && !st.Committee.Members[0].LastCheck.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the member was never checked: %+v", st.Committee)
		}
		time.Sleep(20 * time.Millisecond)
	}
	m := st.Committee.Members[0]
	if st.Proxy != "proxy" || st.Committee.Ready || st.Committee.Threshold != 1 || st.Committee.Size != 1 || st.Committee.Healthy != 0 ||
		m.ID != "csp-1" || m.Point != 1 || m.Reachable || m.HoldsKey || m.Error == "" || !m.LastContact.IsZero() || len(st.Jobs) != 0 {
		t.Errorf("status of a proxy whose only member is down: %+v", st)
	}
	html, err := get("/", operator)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"committee key not established", "csp/csp-1", "unreachable", gone.Addr().String(), "No jobs yet."} {
		if !strings.Contains(html, want) {
			t.Errorf("the page does not say %q", want)
		}
	}
	if body, err := get("/jobs/0123", operator); err != nil || !strings.Contains(body, "no such job") {
		t.Errorf("an unknown job's page: %q, %v", body, err)
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		250 * time.Millisecond:                        "250ms",
		45 * time.Second:                              "45s",
		4*time.Minute + 10*time.Second:                "4m 10s",
		2*time.Hour + 5*time.Minute:                   "2h 05m",
		3*24*time.Hour + 4*time.Hour + 59*time.Minute: "3d 4h",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("%v: %q, want %q", d, got, want)
		}
	}
}
