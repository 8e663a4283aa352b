package chaos

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// mountSmallFS mounts a size-limited tmpfs at dir for the test, or skips
// it (not root).
func mountSmallFS(t *testing.T, dir, size string) {
	t.Helper()
	unmount, err := mountSmall(dir, size)
	if err != nil {
		t.Skipf("skipping the disk-full test: %v", err)
	}
	t.Cleanup(func() {
		if err := unmount(); err != nil {
			t.Error(err)
		}
	})
}

// TestProxyDiskFull fills the filesystem of the proxy's state (a small
// tmpfs) in the middle of a job, after one upload was acknowledged: the next
// upload is refused with ResourceExhausted saying the disk is full and to
// retry later, and the job keeps the acknowledged upload; the proxy crashes
// and restarts on the full disk with it; when space comes back the refused
// upload and two more are accepted, and the noise-off release is exactly the
// sum of the four owners' statistics.
//
// (The first upload of a job is the one that grows the store: later ones
// reuse the pages the previous running sum freed, so a proxy with open jobs
// keeps accepting uploads on a full disk; new jobs and sealing need room.)
func TestProxyDiskFull(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state", "proxy")
	mountSmallFS(t, stateDir, "16m")

	sch, owners := wdbcOwners(t, true)
	owners = owners[:4]
	// The owners upload by hand, one at a time.
	var ids, identities []string
	for _, o := range owners {
		ids, identities = append(ids, o.ID), append(identities, "owner/"+o.ID)
	}
	cl, u := startWithUser(ctx, t, sim.Config{Dir: dir, CSPs: 1, Identities: identities, AllowNoNoise: true})
	spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 2, NoNoise: true, Owners: ids,
		Deadline: time.Now().Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Submit(ctx, spec, sch); err != nil {
		t.Fatal(err)
	}
	proxyClient := func(o string) fedpcav1.ProxyServiceClient {
		conn, _, err := cl.DialProxy("owner/" + o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return fedpcav1.NewProxyServiceClient(conn)
	}
	// status2 is the job's state and who uploaded, as the operator's status
	// page shows them (users see counts only while a job is open).
	type jobView struct {
		state    string
		uploaded []string
	}
	status2 := func() jobView {
		t.Helper()
		st := cl.Proxy().Status(spec.ID())
		for _, j := range st.Jobs {
			if j.ID != spec.ID() {
				continue
			}
			v := jobView{state: j.State}
			for _, o := range j.Owners {
				if o.State == proxy.OwnerUploaded {
					v.uploaded = append(v.uploaded, o.ID)
				}
			}
			return v
		}
		t.Fatal("the job is not on the status page")
		return jobView{}
	}
	clients := make([]fedpcav1.ProxyServiceClient, len(owners))
	for i, o := range owners {
		clients[i] = proxyClient(o.ID)
	}
	upload := func(i int) error {
		up, hd := handShare(t, ctx, cl, clients[i], spec, owners[i])
		_, err := transport.Upload(ctx, clients[i], hd, up.Blobs, up.Proofs)
		return err
	}
	if err := upload(0); err != nil {
		t.Fatal(err)
	}

	free, err := fillDisk(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	err = upload(1)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "disk is full") || !strings.Contains(err.Error(), "retry later") {
		t.Fatalf("upload to a full disk: %v; want ResourceExhausted saying the disk is full and to retry later", err)
	}
	t.Logf("upload refused: %v", err)
	if st := status2(); st.state != "open" || !slices.Equal(st.uploaded, ids[:1]) {
		t.Fatalf("after the refusal: %s with %v", st.state, st.uploaded)
	}

	// A crash and a restart on the full disk keep both acknowledged uploads.
	if err := cl.CrashProxy(); err != nil {
		t.Fatal(err)
	}
	if err := cl.StartProxy(); err != nil {
		t.Fatalf("restart on a full disk: %v", err)
	}
	if st := status2(); st.state != "open" || !slices.Equal(st.uploaded, ids[:1]) {
		t.Fatalf("after a restart on the full disk: %s with %v", st.state, st.uploaded)
	}
	if err := upload(1); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("upload to the restarted proxy on a full disk: %v", err)
	}

	// Space comes back: the refused upload and the others go through.
	if err := free(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(owners); i++ {
		err := transport.Retry(ctx, transport.Call{What: "upload", Timeout: 30 * time.Second}, func(context.Context) error { return upload(i) })
		if err != nil {
			t.Fatalf("upload of %s once space came back: %v", owners[i].ID, err)
		}
	}
	if res := doneResult(ctx, t, u, spec, sch); res.NumOwners != 4 || !isExactSum(t, res, spec, sch, owners) {
		t.Fatalf("release of %d owners differs from the exact sum of the four owners' statistics", res.NumOwners)
	}
}

// handShare computes an owner's upload for a job, as the owner daemon does.
func handShare(t *testing.T, ctx context.Context, cl *sim.Cluster, pc fedpcav1.ProxyServiceClient, spec *job.Spec, o sim.OwnerConfig) (sim.Upload, *fedpcav1.UploadHeader) {
	t.Helper()
	p := cl.Params()
	var cmt *fedpcav1.GetCommitteeResponse
	if err := transport.Retry(ctx, transport.Call{What: "get committee", Timeout: 5 * time.Second}, func(ctx context.Context) (err error) {
		cmt, err = pc.GetCommittee(ctx, &fedpcav1.GetCommitteeRequest{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cpk, err := p.Codecs().PublicKey.Unmarshal(cmt.GetPublicKey())
	if err != nil {
		t.Fatal(err)
	}
	d, err := cl.Dialer("owner/" + o.ID)
	if err != nil {
		t.Fatal(err)
	}
	up, err := sim.OwnerUpload(spec, o.Schema, p, cpk, o.CSV, o.ID, d.Creds)
	if err != nil {
		t.Fatal(err)
	}
	return up, up.Header
}
