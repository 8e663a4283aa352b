package transport_test

import (
	"context"
	"net"
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
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/transport/transporttest"
)

func newCA(t *testing.T) *transport.CA {
	t.Helper()
	ca, err := transport.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestAuthorizationTable calls every RPC of both services and the health
// service with every role's certificate, and with a certificate from another
// CA, over bufconn with real mutual TLS.
func TestAuthorizationTable(t *testing.T) {
	ca, other := newCA(t), newCA(t)
	creds := map[string]*transport.Credentials{}
	for _, s := range []string{"proxy/p", "csp/c1", "owner/o1", "user/u1", "operator/ops"} {
		id, err := transport.ParseIdentity(s)
		if err != nil {
			t.Fatal(err)
		}
		creds[s] = transporttest.Credentials(t, ca, id)
	}
	foreign := transporttest.Credentials(t, other, transport.Identity{Role: transport.RoleOwner, ID: "o1"})

	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(transport.ServerOptions(creds["proxy/p"], false, hclog.NewNullLogger(), nil)...)
	fedpcav1.RegisterProxyServiceServer(srv, fedpcav1.UnimplementedProxyServiceServer{})
	fedpcav1.RegisterCspServiceServer(srv, fedpcav1.UnimplementedCspServiceServer{})
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	dialOpt := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })

	methods := transporttest.Methods(fedpcav1.ProxyService_ServiceDesc, fedpcav1.CspService_ServiceDesc, healthpb.Health_ServiceDesc)
	if len(methods) != len(transport.Authorization)-1 { // the operator pages are not an RPC
		t.Fatalf("%d methods in the services, %d in the table", len(methods), len(transport.Authorization))
	}
	for who, c := range creds {
		d := transport.Dialer{Creds: c, Options: []grpc.DialOption{dialOpt}}
		conn, err := d.Dial("passthrough:///bufnet", transport.Identity{Role: transport.RoleProxy, ID: "p"})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range methods {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := transporttest.Call(ctx, conn, m)
			cancel()
			code := status.Code(err)
			if transport.Allowed(m.Name, c.Identity.Role) {
				if code == codes.PermissionDenied || code == codes.Unauthenticated || code == codes.Unavailable {
					t.Errorf("%s calling %s: %v, want allowed", who, m.Name, err)
				}
			} else if code != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), c.Identity.Short()) {
				t.Errorf("%s calling %s: %v, want PermissionDenied naming the caller", who, m.Name, err)
			}
		}
		conn.Close()
	}
	// A certificate from another CA does not get through the handshake.
	d := transport.Dialer{Creds: foreign, Options: []grpc.DialOption{dialOpt}}
	conn, err := d.Dial("passthrough:///bufnet", transport.Identity{Role: transport.RoleProxy})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, m := range methods {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := transporttest.Call(ctx, conn, m)
		cancel()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("foreign CA calling %s: %v, want Unavailable (handshake refused)", m.Name, err)
		}
	}
}
