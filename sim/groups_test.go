package sim

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/user"
)

// TestUploadProofGroups: uploads of nine ciphertexts (362 features), proven
// in two groups (0-7 and 8, job.ProofGroup), through the daemons: the proxy
// refuses an upload whose group proof comes with the group's first
// ciphertext, or whose last group carries the first group's proof, naming
// the ciphertexts; the honest uploads of three owners, two of them daemons,
// pass the proxy and both switching members, and the release is exactly
// their sum.
func TestUploadProofGroups(t *testing.T) {
	if testing.Short() {
		t.Skip("a cluster with uploads of nine ciphertexts")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const d = 362 // d(d+1)/2 + d + 1 = 65,704 values: nine ciphertexts of 8,192
	var owners []OwnerConfig
	var data [][]byte
	var sch *schema.Schema
	for i := range 3 {
		data = append(data, Synthetic(30, d, 2, uint64(i+1)))
		if sch == nil {
			var err error
			if sch, err = schema.Infer(bytes.NewReader(data[0]), "groups", "label"); err != nil {
				t.Fatal(err)
			}
		}
		if i < 2 {
			owners = append(owners, OwnerConfig{ID: fmt.Sprintf("hospital-%c", 'a'+i), Schema: sch, CSV: data[i], Policy: OwnerPolicy(true)})
		}
	}
	cl, u := startUser(ctx, t, Config{Dir: t.TempDir(), CSPs: 2, Threshold: 2, Owners: owners, Identities: []string{"owner/hospital-c"},
		AllowNoNoise: true, Logger: testLogger(t)}, "alice")
	spec, err := u.Spec(ctx, user.Request{Schema: sch, Analysis: job.PCA, K: 3, NoNoise: true,
		Owners: []string{"hospital-a", "hospital-b", "hospital-c"}, Deadline: time.Now().Add(3 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}

	// hospital-c's upload, by hand (proven before the job is submitted, so
	// that the daemons' uploads do not complete it first).
	c, dc := proxyAs(t, cl, "owner/hospital-c")
	cpk := committeeKey(ctx, t, c, cl.Params())
	up, err := OwnerUpload(spec, sch, cl.Params(), cpk, data[2], "hospital-c", dc.Creds)
	if err != nil {
		t.Fatal(err)
	}
	if len(up.Blobs) != 9 || len(up.Proofs[7]) == 0 || len(up.Proofs[8]) == 0 || len(up.Proofs[0]) != 0 {
		t.Fatalf("an upload of %d ciphertexts, proofs of %d, %d and %d bytes at 0, 7 and 8", len(up.Blobs), len(up.Proofs[0]), len(up.Proofs[7]), len(up.Proofs[8]))
	}
	if _, err := u.Submit(ctx, spec, sch); err != nil {
		t.Fatal(err)
	}
	moved := func(edit func(pr [][]byte)) []*fedpcav1.UploadRequest {
		bad := up
		bad.Proofs = append([][]byte(nil), up.Proofs...)
		edit(bad.Proofs)
		return msgs(bad)
	}
	_, err = upload(ctx, c, up.Header, moved(func(pr [][]byte) { pr[0], pr[7] = pr[7], nil })...)
	wantCode(t, "the group's proof with its first ciphertext", err, codes.InvalidArgument, "ciphertext 0: a proof, but a proof group's proof comes with its last ciphertext")
	_, err = upload(ctx, c, up.Header, moved(func(pr [][]byte) { pr[8] = pr[7] })...)
	wantCode(t, "the first group's proof for the last", err, codes.InvalidArgument, "ciphertext 8: not proven well formed")
	if _, err := upload(ctx, c, up.Header, msgs(up)...); err != nil {
		t.Fatalf("hospital-c's honest upload: %v", err)
	}

	finishExact(ctx, t, u, spec, sch, data...)
}
