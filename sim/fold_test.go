package sim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/user"
)

// TestConcurrentUploadsFold: uploads arriving at once are folded into the
// running sum in batches (one store transaction each, proxy foldPending);
// every owner sending its upload three times at once is included once and
// told the other two times that it already was, and the release is exactly
// the sum of the uploads.
func TestConcurrentUploadsFold(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e := newHostileEnv(t, ctx)
	// The owners of wdbcOwners, in the order of e.parts.
	var owners []string
	for i := range e.parts {
		owners = append(owners, fmt.Sprintf("hospital-%c", 'a'+i))
	}
	spec, err := e.u.Spec(ctx, user.Request{Schema: e.sch, Analysis: job.PCA, NoNoise: true, Owners: owners,
		Deadline: time.Now().Add(2 * time.Minute), Nonce: "fold"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.u.Submit(ctx, spec, e.sch); err != nil {
		t.Fatal(err)
	}
	var (
		mu               sync.Mutex
		included, resent = map[string]int{}, map[string]int{}
		wg               sync.WaitGroup
		parts            [][]byte
	)
	for i, o := range owners {
		up := e.share(t, spec, i)
		parts = append(parts, e.parts[i])
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := upload(ctx, e.owners[o], up.Header, msgs(up)...)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("owner %s: %v", o, err)
				case r.GetAlreadyIncluded():
					resent[o]++
				default:
					included[o]++
				}
			}()
		}
	}
	wg.Wait()
	for _, o := range owners {
		if included[o] != 1 || resent[o] != 2 {
			t.Errorf("owner %s: included %d times, told already included %d times; want 1 and 2", o, included[o], resent[o])
		}
	}
	st, _ := finishExact(ctx, t, e.u, spec, e.sch, parts...)
	if int(st.GetOwnersUploaded()) != len(owners) {
		t.Fatalf("%d owners uploaded, want %d", st.GetOwnersUploaded(), len(owners))
	}
}
