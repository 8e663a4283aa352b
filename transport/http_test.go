package transport

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// TestServeOperator checks the operator pages' access rule: plain HTTP on a
// loopback address only; elsewhere HTTPS, only clients with a certificate
// from the deployment's CA get an answer, and only an operator's is the
// page: any other role (a user, an owner) gets 403 with the reason.
func TestServeOperator(t *testing.T) {
	creds := pki(t, "proxy/p", "owner/o1", "user/u1", "operator/ops")
	foreign := pki(t, "owner/o1")["owner/o1"]
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "page") })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	get := func(url string, cfg *tls.Config) (string, error) {
		c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		defer c.CloseIdleConnections()
		resp, err := c.Get(url)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return string(b), &statusError{resp.Status}
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: Content-Security-Policy %q", url, csp)
		}
		return string(b), err
	}

	lo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ServeOperator(ctx, lo, nil, h, hclog.NewNullLogger())
	if body, err := get("http://"+lo.Addr().String()+"/", nil); err != nil || body != "page" {
		t.Fatalf("loopback, plain HTTP: %q, %v", body, err)
	}

	wide, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Close()
	if Loopback(wide.Addr()) {
		t.Fatalf("%s taken for loopback", wide.Addr())
	}
	if err := ServeOperator(ctx, wide, nil, h, hclog.NewNullLogger()); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Fatalf("non-loopback without credentials: %v", err)
	}
	go ServeOperator(ctx, wide, creds["proxy/p"], h, hclog.NewNullLogger())
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(wide.Addr().(*net.TCPAddr).Port))

	if body, err := get("http://"+addr+"/", nil); err == nil || body == "page" {
		t.Errorf("plain HTTP on a non-loopback listener: %q, %v", body, err)
	}
	noCert := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true} //nolint:gosec // the test checks the server's side
	if body, err := get("https://"+addr+"/", noCert); err == nil || body == "page" {
		t.Errorf("without a client certificate: %q, %v", body, err)
	}
	otherCA := &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true, Certificates: []tls.Certificate{foreign.Cert}} //nolint:gosec
	if body, err := get("https://"+addr+"/", otherCA); err == nil || body == "page" {
		t.Errorf("with a certificate from another CA: %q, %v", body, err)
	}
	for _, who := range []string{"owner/o1", "user/u1", "proxy/p"} {
		body, err := get("https://"+addr+"/", creds[who].ClientTLS(Identity{Role: RoleProxy, ID: "p"}))
		if err == nil || body == "page" || !strings.Contains(body, who+" may not read the operator pages") || !strings.Contains(err.Error(), "403") {
			t.Errorf("%s: %q, %v; want 403 naming it", who, body, err)
		}
	}
	if body, err := get("https://"+addr+"/", creds["operator/ops"].ClientTLS(Identity{Role: RoleProxy, ID: "p"})); err != nil || body != "page" {
		t.Errorf("with an operator certificate from the deployment's CA: %q, %v", body, err)
	}
}

type statusError struct{ status string }

func (e *statusError) Error() string { return "status " + e.status }
