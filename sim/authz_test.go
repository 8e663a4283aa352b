package sim

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/transport/transporttest"
)

// TestAuthorizationRealDaemons calls every RPC of the running proxy and CSP
// member (and their health services) with the certificate of every role and
// with one from another CA: each call is allowed or denied exactly as
// transport.Authorization says.
func TestAuthorizationRealDaemons(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := Start(ctx, Config{Dir: t.TempDir(), CSPs: 1, Users: []string{"alice"}, Identities: []string{"owner/o1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	ca, _ := transport.NewCA("another CA", time.Hour)
	fdir := filepath.Join(t.TempDir(), "foreign")
	if _, err := ca.WriteNode(fdir, transport.Identity{Role: transport.RoleProxy, ID: "proxy"}, transport.NodeOptions{Validity: time.Hour}); err != nil {
		t.Fatal(err)
	}
	foreign, err := transport.LoadCredentials(fdir)
	if err != nil {
		t.Fatal(err)
	}
	servers := []struct {
		addr  string
		id    transport.Identity
		descs []grpc.ServiceDesc
	}{
		{cl.ProxyAddr(), transport.Identity{Role: transport.RoleProxy, ID: "proxy"}, []grpc.ServiceDesc{fedpcav1.ProxyService_ServiceDesc, healthpb.Health_ServiceDesc}},
		{cl.CSPAddr(0), transport.Identity{Role: transport.RoleCSP, ID: "csp-1"}, []grpc.ServiceDesc{fedpcav1.CspService_ServiceDesc, healthpb.Health_ServiceDesc}},
	}
	callers := []string{"proxy/proxy", "csp/csp-1", "owner/o1", "user/alice"}
	calls := 0
	for _, srv := range servers {
		for _, who := range append(callers, "foreign") {
			var d transport.Dialer
			if who == "foreign" {
				d, _ = cl.Dialer("proxy/proxy")
				d.Creds = foreign
			} else {
				d, _ = cl.Dialer(who)
			}
			conn, err := d.Dial(srv.addr, srv.id)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range transporttest.Methods(srv.descs...) {
				cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
				err := transporttest.Call(cctx, conn, m)
				ccancel()
				calls++
				msg := status.Convert(err).Message()
				denied := status.Code(err) == codes.PermissionDenied && strings.Contains(msg, "may not call")
				switch {
				case who == "foreign":
					if status.Code(err) != codes.Unavailable {
						t.Errorf("foreign CA -> %s: %v, want the handshake refused", m.Name, err)
					}
				case transport.Allowed(m.Name, strings.Split(who, "/")[0]):
					if denied || status.Code(err) == codes.Unauthenticated {
						t.Errorf("%s -> %s: %v, want allowed", who, m.Name, err)
					}
				case !denied:
					t.Errorf("%s -> %s: %v, want PermissionDenied by the table", who, m.Name, err)
				}
			}
			conn.Close()
		}
	}
	t.Logf("%d calls checked", calls)
}
