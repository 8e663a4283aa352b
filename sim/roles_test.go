package sim

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/fedpca/fedpca/csp"
	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// TestCertificatesOfTheWrongRole: every daemon refuses to start with a
// certificate of another role; a node that reaches a server of the wrong
// role refuses it in the handshake; a committee member refuses a job spec
// signed with a certificate of the wrong role. (Every RPC called with every
// role's certificate: TestAuthorizationRealDaemons; exchange keys certified
// for the wrong role: TestReplayedAndReorderedCeremony; an owner's ticket
// signed with one: owner.TestCheckTicket.)
func TestCertificatesOfTheWrongRole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e := newHostileEnv(t, ctx)
	cl := e.cl
	lis := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	dialer := func(id string) transport.Dialer { return transport.Dialer{Creds: cl.Creds(id)} }
	p := cl.Params()
	_, err := proxy.New(proxy.Config{Listener: lis(), Creds: cl.Creds("csp/csp-1"), Store: filepath.Join(t.TempDir(), "p"),
		Committee: []proxy.Member{{ID: "csp-1", Addr: "x"}}, Threshold: 1, Params: &p})
	wantErr(t, "proxy with a csp certificate", err, "certificate is for csp/csp-1, not the proxy")
	_, err = csp.New(csp.Config{Listener: lis(), Creds: cl.Creds("owner/hospital-a"), Store: filepath.Join(t.TempDir(), "c"), Params: &p})
	wantErr(t, "csp with an owner certificate", err, "certificate is for owner/hospital-a, not a csp")
	_, err = owner.New(owner.Config{Dialer: dialer("user/alice"), ProxyAddr: "x", Store: filepath.Join(t.TempDir(), "o"), Params: &p,
		Datasets: []*owner.Dataset{{Schema: e.sch, Epsilon: 1, Delta: 1e-6, Open: func() (io.ReadCloser, error) { return nil, io.EOF }}}})
	wantErr(t, "owner with a user certificate", err, "identity user/alice is not an owner")
	_, err = user.NewClient(user.Config{Dialer: dialer("owner/hospital-a"), ProxyAddr: "x", Keys: he.GenerateKeyPair(p), Params: &p})
	wantErr(t, "user with an owner certificate", err, "identity owner/hospital-a is not a user")

	// An owner that reaches a committee member where it expects the proxy.
	od, _ := cl.Dialer("owner/hospital-a")
	conn, err := od.Dial(cl.CSPAddr(0), transport.Identity{Role: transport.RoleProxy})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, err = fedpcav1.NewProxyServiceClient(conn).ListJobs(ctx, &fedpcav1.ListJobsRequest{})
	wantCode(t, "owner reaches a csp as the proxy", err, codes.Unavailable, "server is spiffe://fedpca/csp/csp-1, expected proxy/*")

	// A job spec signed with an owner's certificate, sent to a member.
	spec, err := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, Epsilon: 1, Owners: []string{"hospital-a"},
		Deadline: time.Now().Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	outsider := cl.Creds("owner/outsider")
	kp, _ := user.LoadKeys(filepath.Join(cl.cfg.Dir, "state", "user-alice"), p)
	pd, _ := cl.Dialer("proxy/proxy")
	mconn, err := pd.Dial(cl.CSPAddr(0), transport.Identity{Role: transport.RoleCSP, ID: "csp-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer mconn.Close()
	enc, _ := he.NewEncryptor(p, e.cpk)
	ct, _ := enc.EncryptVector([]int64{1})
	hd := &fedpcav1.KeySwitchHeader{JobId: spec.ID(), Spec: spec.Canonical(), Signature: mustSign(t, spec, outsider),
		UserCertificate: outsider.Leaf.Raw, UserPublicKey: p.Codecs().PublicKey.Marshal(kp.Public), Schema: e.sch.Canonical(),
		Active: []uint32{1}, Owners: []string{"hospital-a"}, Ciphertexts: 1, JobOwnerRefs: e.cl.OwnerRefs("hospital-a")}
	_, err = keySwitch(ctx, fedpcav1.NewCspServiceClient(mconn), hd, [][]byte{p.Codecs().Ciphertext.Marshal(ct[0])})
	wantCode(t, "spec signed with an owner's certificate", err, codes.PermissionDenied, "job spec signed by spiffe://fedpca/owner/outsider, which is not a user")
}

func wantErr(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), msg) {
		t.Errorf("%s: %v, want an error containing %q", what, err, msg)
	}
}
