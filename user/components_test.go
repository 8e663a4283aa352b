package user

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc"

	"github.com/fedpca/fedpca/datasets"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
)

// TestResultKeyFile: the result key is made with the HE keys (0600, 32
// bytes), read back the same, made on first use in a directory of HE keys
// that has none, and refused when others can read it or it is not a key; a
// directory without HE keys is ErrNoKeys.
func TestResultKeyFile(t *testing.T) {
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := LoadResultKey(dir); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("empty directory: %v, want ErrNoKeys", err)
	}
	if _, err := os.Stat(filepath.Join(dir, ResultKeyFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a result key was made in a directory without HE keys: %v", err)
	}
	if _, err := GenerateKeys(dir, p); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ResultKeyFile)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("keygen made no result key: %v", err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("result key: mode %v, %d bytes; want 0600, 32", fi.Mode().Perm(), fi.Size())
	}
	a, err := LoadResultKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadResultKey(dir)
	if err != nil || !a.Equal(b) {
		t.Fatalf("second load: %v, same key %v", err, err == nil && a.Equal(b))
	}
	// A directory from before components jobs: made on first use.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	c, err := LoadResultKey(dir)
	if err != nil {
		t.Fatalf("first use: %v", err)
	}
	if c.Equal(a) {
		t.Fatal("first use gave the removed key")
	}
	if d, err := LoadResultKey(dir); err != nil || !d.Equal(c) {
		t.Fatalf("after first use: %v", err)
	}
	if matches, _ := filepath.Glob(filepath.Join(dir, "*.tmp")); len(matches) > 0 {
		t.Fatalf("left temporary files %v", matches)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadResultKey(dir); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("world-readable key: %v", err)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadResultKey(dir); err == nil || !strings.Contains(err.Error(), ResultKeyFile) || !strings.Contains(err.Error(), "5 bytes") {
		t.Fatalf("damaged key: %v, want an error naming the file and its length", err)
	}
}

// componentsCase is a components job on wine (2-of-3 committee, k = 3, no
// noise), the plaintext PCA of the same rows, and the members' output
// shares of it (words that add up to the output), sealed to the user's
// result key.
type componentsCase struct {
	spec    *job.Spec
	sch     *schema.Schema
	central *job.Result
	c       *Client
	points  []uint32
	shares  [][]mpc.Word
}

func newComponentsCase(t testing.TB) *componentsCase {
	t.Helper()
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	data, err := datasets.CSV("wine")
	if err != nil {
		t.Fatal(err)
	}
	sch, err := schema.Infer(bytes.NewReader(data), "wine", "label")
	if err != nil {
		t.Fatal(err)
	}
	key, err := seal.NewExchangeKey()
	if err != nil {
		t.Fatal(err)
	}
	const k = 3
	spec := &job.Spec{Version: job.Version, Dataset: sch.ID, SchemaHash: sch.HashHex(), Analysis: job.PCA, K: k,
		NoNoise: true, NoisePlan: dp.PlanServers, MinOwners: 1,
		Deadline: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxRows: 1 << 20, MaxOwnerRows: 1 << 19,
		HEParams: p.ID(), HEParamsHash: p.Fingerprint(), CommitteeN: 3, CommitteeThreshold: 2,
		CommitteeKey: strings.Repeat("c", 64), User: "spiffe://fedpca/user/alice", UserKey: strings.Repeat("d", 64), Nonce: "components",
		Release: job.ReleaseComponents, ResultKey: hex.EncodeToString(key.PublicKey().Bytes()), Randomness: job.RandomnessDealer}
	if err := spec.SetOwners([]job.Owner{{ID: "hospital-a"}, {ID: "hospital-b"}}); err != nil {
		t.Fatal(err)
	}
	if err := spec.Validate(); err != nil {
		t.Fatal(err)
	}
	central, _, err := job.Central(&job.Spec{Analysis: job.PCA, K: k, MaxRows: 1 << 20, MaxOwnerRows: 1 << 20}, sch, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	// The output column: eigenvalues of cov / c^2, the d x k vectors, n
	// at scale 2^g.
	d, f := sch.D(), mpc.DefaultParams.F
	c := math.Ldexp(float64(sch.Bound()), -int(sch.Bits))
	n := central.NoisyN
	out := make([]mpc.Word, 0, job.OutputLen(d, k))
	for j := range k {
		out = append(out, mpc.Encode(central.Components.Eigenvalues[j]/n/(c*c), f))
	}
	for i := range d {
		for j := range k {
			out = append(out, mpc.Encode(central.Components.W.At(i, j), f))
		}
	}
	out = append(out, mpc.FromInt64(int64(math.Round(math.Ldexp(n, int(sch.Bits))))))
	// Two additive shares: one uniform, the other the difference.
	a, b := make([]mpc.Word, len(out)), make([]mpc.Word, len(out))
	for i := range out {
		var r [16]byte
		if _, err := rand.Read(r[:]); err != nil {
			t.Fatal(err)
		}
		a[i] = mpc.WordFromBytes(r[:])
		b[i] = out[i].Sub(a[i])
	}
	cl := &Client{cfg: Config{ResultKey: key, Keys: he.GenerateKeyPair(p)}, params: p}
	return &componentsCase{spec: spec, sch: sch, central: central, c: cl, points: []uint32{1, 3}, shares: [][]mpc.Word{a, b}}
}

// sealed seals each share to the job's result key for its point.
func (tc *componentsCase) sealed(t testing.TB) [][]byte {
	t.Helper()
	rk, _ := hex.DecodeString(tc.spec.ResultKey)
	boxes := make([][]byte, len(tc.shares))
	for i, sh := range tc.shares {
		var err error
		if boxes[i], err = seal.Seal(rk, job.OutputAAD(tc.spec.ID(), tc.points[i]), job.EncodeShare(sh)); err != nil {
			t.Fatal(err)
		}
	}
	return boxes
}

func (tc *componentsCase) open(boxes [][]byte, points []uint32) (*job.Result, error) {
	hd := &fedpcav1.ResultHeader{JobId: tc.spec.ID(), Owners: []string{"hospital-a", "hospital-b"}, CspMembers: []string{"csp-1", "csp-3"}, Points: points}
	return tc.c.Open(&Sealed{spec: tc.spec, sch: tc.sch, header: hd, boxes: boxes})
}

// TestOpenComponents: the user opens the members' sealed shares of a
// components job's output, adds and decodes them into the top components,
// their covariance eigenvalues and n, equal to the plaintext PCA of the
// same rows; the result document holds nothing else (no mean, no release,
// no other eigenvalue, no explained-variance ratio), validates, and is
// written without mean.npy and release.json.
func TestOpenComponents(t *testing.T) {
	tc := newComponentsCase(t)
	res, err := tc.open(tc.sealed(t), tc.points)
	if err != nil {
		t.Fatal(err)
	}
	if res.Released != job.ReleaseComponents || res.Output == nil || res.Components != nil || res.Release != nil || res.Quality != nil {
		t.Fatalf("result: released %q, output %v, components %v, release %v, quality %v", res.Released, res.Output != nil, res.Components != nil, res.Release != nil, res.Quality != nil)
	}
	if res.NoisyN != tc.central.NoisyN {
		t.Fatalf("n = %v, want %v", res.NoisyN, tc.central.NoisyN)
	}
	d, k := res.Output.Dims()
	if d != tc.sch.D() || k != tc.spec.K {
		t.Fatalf("output %d x %d", d, k)
	}
	for j := range k {
		want := tc.central.Components.Eigenvalues[j] / tc.central.NoisyN
		if got := res.Output.Eigenvalues[j]; math.Abs(got-want) > 1e-8*want {
			t.Errorf("eigenvalue %d: %v, want %v", j+1, got, want)
		}
		for i := range d {
			if got, want := res.Output.W[i][j], tc.central.Components.W.At(i, j); math.Abs(got-want) > 1e-9 {
				t.Errorf("component %d entry %d: %v, want %v", j+1, i, got, want)
			}
		}
	}
	doc, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	for _, banned := range []string{`"mean"`, `"all_eigenvalues"`, `"explained_variance_ratio"`, `"release"`, `"quality"`, `"r":[`} {
		if bytes.Contains(doc, []byte(banned)) {
			t.Errorf("the components result holds %s: %s", banned, doc)
		}
	}
	back, err := job.ParseResult(doc)
	if err != nil {
		t.Fatalf("the result does not parse back: %v", err)
	}
	if !slices.Equal(back.Output.Eigenvalues, res.Output.Eigenvalues) || back.Released != job.ReleaseComponents {
		t.Fatal("the result changed through JSON")
	}
	dir := t.TempDir()
	paths, err := WriteOutputs(dir, res)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range paths {
		names = append(names, filepath.Base(p))
	}
	if want := []string{ResultFile, ComponentsFile, ComponentsNPYFile, EigenvaluesNPYFile}; !slices.Equal(names, want) {
		t.Fatalf("wrote %v, want %v", names, want)
	}
	csvb, _ := os.ReadFile(filepath.Join(dir, ComponentsFile))
	if first := strings.SplitN(string(csvb), "\n", 2)[0]; first != "feature,component_1,component_2,component_3" {
		t.Fatalf("components.csv header %q", first)
	}
}

// TestOpenComponentsErrors: what the user refuses, naming what is wrong.
func TestOpenComponentsErrors(t *testing.T) {
	tc := newComponentsCase(t)
	good := tc.sealed(t)
	other, _ := seal.NewExchangeKey()
	otherBox, _ := seal.Seal(other.PublicKey().Bytes(), job.OutputAAD(tc.spec.ID(), 3), job.EncodeShare(tc.shares[1]))
	rk, _ := hex.DecodeString(tc.spec.ResultKey)
	shortBox, _ := seal.Seal(rk, job.OutputAAD(tc.spec.ID(), 3), job.EncodeShare(tc.shares[1][1:]))
	otherJob, _ := seal.Seal(rk, job.OutputAAD(strings.Repeat("e", 64), 3), job.EncodeShare(tc.shares[1]))
	// Shares that do not belong together: off in a vector's entry, in an
	// eigenvalue, in n.
	var staleBoxes [][][]byte
	last := len(tc.shares[1]) - 1
	for _, off := range []struct{ w, bits int }{{tc.spec.K, 60}, {0, 60}, {last, 60}, {last, 3}} {
		stale := slices.Clone(tc.shares[1])
		stale[off.w] = stale[off.w].Add(mpc.Pow2(uint(off.bits)))
		tc2 := *tc
		tc2.shares = [][]mpc.Word{tc.shares[0], stale}
		staleBoxes = append(staleBoxes, tc2.sealed(t))
	}
	for _, c := range []struct {
		what   string
		boxes  [][]byte
		points []uint32
		want   string
	}{
		{"a box sealed to another key", [][]byte{good[0], otherBox}, tc.points, "the member at point 3: sealed box does not open"},
		{"a box of another job", [][]byte{good[0], otherJob}, tc.points, "the member at point 3: sealed box does not open"},
		{"the boxes of two points swapped", [][]byte{good[1], good[0]}, tc.points, "the member at point 1: sealed box does not open"},
		{"a share one word short", [][]byte{good[0], shortBox}, tc.points, "point 3 has 672 bytes, want 688"},
		{"one member's share only", good[:1], tc.points[:1], "exactly 2 members, got 1"},
		{"a point outside the committee", good, []uint32{1, 4}, "member 4 is not in the committee of 3"},
		{"a point twice", good, []uint32{3, 3}, "member 3 listed twice"},
		{"a truncated box", [][]byte{good[0], good[1][:40]}, tc.points, "too short"},
		{"shares that do not add up (a vector)", staleBoxes[0], tc.points, "component 1 has length"},
		{"shares that do not add up (an eigenvalue)", staleBoxes[1], tc.points, "eigenvalue 1 is"},
		{"shares that do not add up (n too large)", staleBoxes[2], tc.points, "is not a count of at most max_rows"},
		{"shares that do not add up (n a fraction)", staleBoxes[3], tc.points, "is not a count of at most max_rows"},
	} {
		_, err := tc.open(c.boxes, c.points)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.what, err, c.want)
		}
	}
	// Another key directory's result key.
	other2 := &Client{cfg: Config{ResultKey: other, Keys: tc.c.cfg.Keys}, params: tc.c.params}
	if _, err := other2.Open(&Sealed{spec: tc.spec, sch: tc.sch, header: &fedpcav1.ResultHeader{Points: tc.points}, boxes: good}); err == nil || !strings.Contains(err.Error(), "use the --keys it was created with") {
		t.Errorf("another result key: %v", err)
	}
}

// fakeProxy serves a components job's result as the test sets it.
type fakeProxy struct {
	fedpcav1.UnimplementedProxyServiceServer
	owners []*fedpcav1.OwnerRef
	msgs   []*fedpcav1.FetchResultResponse
	calls  int
}

func (f *fakeProxy) GetJob(context.Context, *fedpcav1.GetJobRequest) (*fedpcav1.GetJobResponse, error) {
	return &fedpcav1.GetJobResponse{Job: &fedpcav1.JobInfo{Status: &fedpcav1.JobStatus{ExpectedOwnerRefs: f.owners}}}, nil
}

func (f *fakeProxy) FetchResult(_ *fedpcav1.FetchResultRequest, stream grpc.ServerStreamingServer[fedpcav1.FetchResultResponse]) error {
	f.calls++
	for _, m := range f.msgs {
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	return nil
}

// TestFetchComponents: the user downloads a components job's result from
// the proxy (the header with the members' points, then their sealed
// shares), opens it, and refuses at once, without retrying, a result that
// carries ciphertexts (the statistics), the wrong points or too few boxes.
func TestFetchComponents(t *testing.T) {
	tc := newComponentsCase(t)
	fp := &fakeProxy{owners: []*fedpcav1.OwnerRef{{Id: "hospital-a"}, {Id: "hospital-b"}}}
	srv := grpc.NewServer(transport.ServerOptions(nil, true, hclog.NewNullLogger(), nil)...)
	fedpcav1.RegisterProxyServiceServer(srv, fp)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Stop()
	c, err := NewClient(Config{Dialer: transport.Dialer{Insecure: true, Self: transport.Identity{Role: transport.RoleUser, ID: "alice"}},
		ProxyAddr: l.Addr().String(), Keys: tc.c.cfg.Keys, ResultKey: tc.c.cfg.ResultKey, Params: &tc.c.params})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	header := func(cts uint32, points ...uint32) *fedpcav1.FetchResultResponse {
		return &fedpcav1.FetchResultResponse{Msg: &fedpcav1.FetchResultResponse_Header{Header: &fedpcav1.ResultHeader{JobId: tc.spec.ID(),
			Ciphertexts: cts, Owners: []string{"hospital-a", "hospital-b"}, CspMembers: []string{"csp-1", "csp-3"}, Points: points}}}
	}
	box := func(b []byte) *fedpcav1.FetchResultResponse {
		return &fedpcav1.FetchResultResponse{Msg: &fedpcav1.FetchResultResponse_SealedOutput{SealedOutput: b}}
	}
	boxes := tc.sealed(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fp.msgs = []*fedpcav1.FetchResultResponse{header(0, 1, 3), box(boxes[0]), box(boxes[1])}
	res, err := c.Fetch(ctx, tc.spec, tc.sch)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output == nil || res.NoisyN != tc.central.NoisyN || !slices.Equal(res.Owners, []string{"hospital-a", "hospital-b"}) {
		t.Fatalf("result %+v", res)
	}
	for _, bad := range []struct {
		what string
		msgs []*fedpcav1.FetchResultResponse
		want string
	}{
		{"ciphertexts", []*fedpcav1.FetchResultResponse{header(1, 1, 3), box(boxes[0]), box(boxes[1])}, "1 ciphertexts for a components job"},
		{"one point", []*fedpcav1.FetchResultResponse{header(0, 1), box(boxes[0])}, "exactly 2 members, got 1"},
		{"a box short", []*fedpcav1.FetchResultResponse{header(0, 1, 3), box(boxes[0])}, "ended after 1 of the 2 members' sealed outputs"},
		{"an empty box", []*fedpcav1.FetchResultResponse{header(0, 1, 3), box(boxes[0]), box(nil)}, "no sealed output for the member at point 3"},
	} {
		fp.msgs, fp.calls = bad.msgs, 0
		_, err := c.Fetch(ctx, tc.spec, tc.sch)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: %v, want an error with %q", bad.what, err, bad.want)
		}
		if fp.calls != 1 {
			t.Errorf("%s: fetched %d times, want once (a wrong result is not retried)", bad.what, fp.calls)
		}
	}
}

// FuzzOpenOutput: whatever shares the members seal (any bytes, any
// points), the user either refuses them, naming what is wrong, or decodes
// k unit components of d entries, k finite eigenvalues and n: never a
// panic.
func FuzzOpenOutput(f *testing.F) {
	tc := newComponentsCase(f)
	f.Add(job.EncodeShare(tc.shares[0]), job.EncodeShare(tc.shares[1]), uint32(1), uint32(3))
	f.Add(job.EncodeShare(tc.shares[0]), job.EncodeShare(tc.shares[1][1:]), uint32(1), uint32(3))
	f.Add([]byte{}, []byte{1, 2, 3}, uint32(0), uint32(7))
	rk, _ := hex.DecodeString(tc.spec.ResultKey)
	d, k := tc.sch.D(), tc.spec.K
	f.Fuzz(func(t *testing.T, a, b []byte, p0, p1 uint32) {
		points := []uint32{p0, p1}
		var boxes [][]byte
		for i, sh := range [][]byte{a, b} {
			box, err := seal.Seal(rk, job.OutputAAD(tc.spec.ID(), points[i]), sh)
			if err != nil {
				t.Fatal(err)
			}
			boxes = append(boxes, box)
		}
		out, err := OpenOutput(tc.c.cfg.ResultKey, tc.spec, tc.sch, points, boxes)
		if err != nil {
			if out != nil || err.Error() == "" {
				t.Fatal("an output with an error, or an error without a message")
			}
			return
		}
		if len(out.Values) != k || len(out.Vectors) != k {
			t.Fatalf("%d eigenvalues, %d vectors", len(out.Values), len(out.Vectors))
		}
		for _, v := range out.Vectors {
			if len(v) != d {
				t.Fatalf("a vector of %d entries", len(v))
			}
		}
	})
}
