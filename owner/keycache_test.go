package owner

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// Owners sharing a KeyCache fetch a key once between them, all get the
// same key, and a failed fetch is not remembered: the next owner fetches.
func TestKeyCacheFetchesOnce(t *testing.T) {
	var c KeyCache
	var fetches atomic.Int32
	fail := errors.New("proxy unavailable")
	if _, err := c.load("k", func() (*rlwe.PublicKey, error) { fetches.Add(1); return nil, fail }); !errors.Is(err, fail) {
		t.Fatalf("failed fetch: %v", err)
	}
	want := &rlwe.PublicKey{}
	release := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]*rlwe.PublicKey, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pk, err := c.load("k", func() (*rlwe.PublicKey, error) { fetches.Add(1); <-release; return want, nil })
			if err != nil {
				t.Error(err)
			}
			got[i] = pk
		}()
	}
	close(release)
	wg.Wait()
	for i, pk := range got {
		if pk != want {
			t.Fatalf("owner %d got another key", i)
		}
	}
	if n := fetches.Load(); n != 2 { // the failed one, then one for all
		t.Fatalf("%d fetches", n)
	}
	before := fetches.Load()
	if pk, err := c.load("k", func() (*rlwe.PublicKey, error) { fetches.Add(1); return nil, fail }); pk != want || err != nil {
		t.Fatalf("cached key: %v, %v", pk, err)
	}
	if fetches.Load() != before {
		t.Fatal("a cached key was fetched again")
	}
	// Another name (other parameters or pinned committee) is not shared.
	if _, err := c.load("other", func() (*rlwe.PublicKey, error) { return nil, fail }); !errors.Is(err, fail) {
		t.Fatal("a key was shared under another name")
	}
	// Without a cache every load fetches.
	var none *KeyCache
	if pk, _ := none.load("k", func() (*rlwe.PublicKey, error) { return nil, fail }); pk != nil {
		t.Fatal("a nil cache returned a key")
	}
}
