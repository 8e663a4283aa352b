package owner

import (
	"context"
	"testing"

	"github.com/fedpca/fedpca/protocol/he"
)

// TestPrepare: after a share, the owner prepares as many encryptions of zero
// as it had ciphertexts, the next share uses them, and a replaced key
// prepares no more and gives its count back.
func TestPrepare(t *testing.T) {
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	kp := he.GenerateKeyPair(p)
	c, err := newCommitteeEnc("k", p, kp.Public)
	if err != nil {
		t.Fatal(err)
	}
	start := prepared.Load()
	share := func() {
		t.Helper()
		if err := c.encrypt(func(e *he.Encryptor) (int, error) {
			cts, err := e.EncryptVector(make([]int64, p.Slots()+1)) // two ciphertexts
			return len(cts), err
		}); err != nil {
			t.Fatal(err)
		}
	}
	share()
	if c.enc != nil {
		t.Fatal("an encryptor holding nothing prepared is kept")
	}
	if err := c.prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	if c.ready() != 2 || prepared.Load() != start+2 {
		t.Fatalf("prepared %d (process %d), want 2", c.ready(), prepared.Load()-start)
	}
	share()
	if c.ready() != 0 || prepared.Load() != start {
		t.Fatalf("after a share: %d prepared (process %d), want 0", c.ready(), prepared.Load()-start)
	}
	if err := c.prepare(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.drop()
	if prepared.Load() != start {
		t.Fatalf("a dropped key still counts %d prepared", prepared.Load()-start)
	}
	share() // a job still running under the old key
	if err := c.prepare(context.Background()); err != nil || c.ready() != 0 || prepared.Load() != start {
		t.Fatalf("a dropped key prepared: %d (process %d), %v", c.ready(), prepared.Load()-start, err)
	}
	if c.enc != nil {
		t.Fatal("a dropped key keeps its encryptor")
	}
}
