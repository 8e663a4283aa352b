package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
)

// pki makes a CA and credentials for the given identities in a temp dir.
func pki(t *testing.T, ids ...string) map[string]*Credentials {
	t.Helper()
	dir := t.TempDir()
	ca, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Credentials{}
	for _, s := range ids {
		id, err := ParseIdentity(s)
		if err != nil {
			t.Fatal(err)
		}
		nd := filepath.Join(dir, id.Role+"-"+id.ID)
		if _, err := ca.WriteNode(nd, id, NodeOptions{Validity: time.Hour}); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(filepath.Join(nd, KeyFile))
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file mode %v", fi.Mode().Perm())
		}
		c, err := LoadCredentials(nd)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Identity.Matches(id) {
			t.Fatalf("identity %v, want %v", c.Identity, id)
		}
		out[s] = c
	}
	return out
}

// TestClientChecksServerIdentity: a client expecting a CSP refuses to talk to
// a server whose certificate says owner.
func TestClientChecksServerIdentity(t *testing.T) {
	creds := pki(t, "owner/o1", "proxy/p")
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(ServerOptions(creds["owner/o1"], false, hclog.NewNullLogger(), nil)...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	d := Dialer{Creds: creds["proxy/p"], Options: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })}}
	for _, tc := range []struct {
		expect Identity
		ok     bool
	}{{Identity{Role: RoleCSP, ID: ""}, false}, {Identity{Role: RoleOwner, ID: "o2"}, false}, {Identity{Role: RoleOwner, ID: "o1"}, true}, {Identity{Role: RoleOwner, ID: ""}, true}} {
		conn, _ := d.Dial("passthrough:///bufnet", tc.expect)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		cancel()
		conn.Close()
		if (err == nil) != tc.ok {
			t.Errorf("expecting %v: %v", tc.expect, err)
		}
	}
}

// TestWrongServerNotRetried: a client dialing a server of another role (the
// wrong address) fails at its first attempt, naming the server it found,
// instead of retrying as if the server were unreachable.
func TestWrongServerNotRetried(t *testing.T) {
	creds := pki(t, "csp/csp-1", "user/alice")
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(ServerOptions(creds["csp/csp-1"], false, hclog.NewNullLogger(), nil)...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	d := Dialer{Creds: creds["user/alice"], Options: []grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })}}
	conn, err := d.Dial("passthrough:///bufnet", Identity{Role: RoleProxy})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	attempts := 0
	start := time.Now()
	err = Retry(context.Background(), Call{What: "get the committee from the proxy", Timeout: 5 * time.Second, Attempts: 10}, func(ctx context.Context) error {
		attempts++
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	})
	if attempts != 1 || err == nil || !strings.Contains(err.Error(), "server is spiffe://fedpca/csp/csp-1, expected proxy/*") || strings.Contains(err.Error(), "rpc error") {
		t.Fatalf("%d attempts in %s: %v", attempts, time.Since(start), err)
	}
	t.Logf("%s", err)
}

func TestInsecureModeIdentityHeader(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(ServerOptions(nil, true, hclog.NewNullLogger(), nil)...)
	fedpcav1.RegisterProxyServiceServer(srv, fedpcav1.UnimplementedProxyServiceServer{})
	go srv.Serve(lis)
	defer srv.Stop()
	dialOpt := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })
	for _, tc := range []struct {
		self Identity
		want codes.Code
	}{{Identity{Role: RoleOwner, ID: "o"}, codes.Unimplemented}, {Identity{Role: RoleCSP, ID: "c"}, codes.PermissionDenied}} {
		conn, err := Dialer{Insecure: true, Self: tc.self, Options: []grpc.DialOption{dialOpt}}.Dial("passthrough:///bufnet", Identity{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = fedpcav1.NewProxyServiceClient(conn).Decline(context.Background(), &fedpcav1.DeclineRequest{})
		conn.Close()
		if status.Code(err) != tc.want {
			t.Errorf("%v: %v, want %v", tc.self, err, tc.want)
		}
	}
}

func TestIdentity(t *testing.T) {
	for _, s := range []string{"owner/hospital-a", "spiffe://fedpca/csp/csp-1", "user/alice.b", "spiffe://hospital-a/owner/x"} {
		if _, err := ParseIdentity(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, s := range []string{"admin/x", "owner/", "owner", "spiffe://Other/owner/x", "spiffe://other/owner", "owner/a/b", "owner/-x", "spiffe://x/owner/a/b"} {
		if _, err := ParseIdentity(s); err == nil {
			t.Errorf("%s accepted", s)
		}
	}
	if got := (Identity{Role: RoleOwner, ID: "h"}).String(); got != "spiffe://fedpca/owner/h" {
		t.Error(got)
	}
}

func TestLoadCredentialsRefusesOpenKey(t *testing.T) {
	dir := t.TempDir()
	ca, _ := NewCA("ca", time.Hour)
	nd := filepath.Join(dir, "n")
	if _, err := ca.WriteNode(nd, Identity{Role: RoleOwner, ID: "o"}, NodeOptions{Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(nd, KeyFile), 0o644)
	if _, err := LoadCredentials(nd); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable key: %v", err)
	}
}

func TestContextStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{context.Canceled, codes.Canceled},
		{fmt.Errorf("watch: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{status.Error(codes.NotFound, "x"), codes.NotFound},
		{errors.New("other"), codes.Unknown},
		{nil, codes.OK},
	} {
		if got := status.Code(contextStatus(tc.err)); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestReconnectResumes: a client that reconnects with the same config
// resumes its TLS session (no certificate signature or chain verification
// again), and both sides still see each other's identity.
func TestReconnectResumes(t *testing.T) {
	ca, err := NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Credentials(Identity{Role: RoleProxy, ID: "proxy"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cli, err := ca.Credentials(Identity{Role: RoleOwner, ID: "hospital-a"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	client, server := cli.ClientTLS(Identity{Role: RoleProxy}), srv.ServerTLS()
	// Loopback TCP, not net.Pipe: both sides write at once (tickets,
	// close_notify), which an unbuffered pipe would deadlock.
	lis, err := tls.Listen("tcp", "127.0.0.1:0", server)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	for i, wantResumed := range []bool{false, true, true} {
		done := make(chan tls.ConnectionState, 1)
		go func() {
			conn, err := lis.Accept()
			if err != nil {
				t.Error(err)
				done <- tls.ConnectionState{}
				return
			}
			defer conn.Close()
			s := conn.(*tls.Conn)
			if err := s.Handshake(); err != nil {
				t.Error(err)
			}
			// The client reads the session ticket with its first read.
			s.Write([]byte{1})
			done <- s.ConnectionState()
		}()
		c, err := tls.Dial("tcp", lis.Addr().String(), client)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Read(make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		cs, ss := c.ConnectionState(), <-done
		c.Close()
		if cs.DidResume != wantResumed || ss.DidResume != wantResumed {
			t.Fatalf("connection %d: resumed %v (server %v), want %v", i, cs.DidResume, ss.DidResume, wantResumed)
		}
		if len(ss.PeerCertificates) == 0 {
			t.Fatalf("connection %d: the server sees no client certificate", i)
		}
		if id, err := srv.Verify(ss.PeerCertificates[0]); err != nil || id.ID != "hospital-a" {
			t.Fatalf("connection %d: the server sees %v, %v", i, id, err)
		}
	}
}
