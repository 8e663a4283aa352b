package owner

import (
	"context"
	"testing"

	"github.com/fedpca/fedpca/protocol/he"
)

// TestPrepare: after a share, the owner prepares as many encryptions of zero
// as it had ciphertexts, within its budget, the next share uses them, and a
// replaced key prepares no more and gives its count back. Two owners
// sharing a budget and a key's encryptors (a farm) keep their own
// encryptions of zero.
func TestPrepare(t *testing.T) {
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	kp := he.GenerateKeyPair(p)
	var keys KeyCache
	encs, err := keys.encryptors(p, kp.Public)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := keys.encryptors(p, kp.Public); again != encs {
		t.Fatal("owners sharing a key cache do not share its encryptors")
	}
	budget := NewPrepareBudget(3)
	c, other := newCommitteeEnc("k", encs, budget), newCommitteeEnc("k", encs, budget)
	share := func(c *committeeEnc) {
		t.Helper()
		if err := c.encrypt(func(e *he.Encryptor) (int, error) {
			cts, err := e.EncryptVector(make([]int64, p.Slots()+1)) // two ciphertexts
			return len(cts), err
		}); err != nil {
			t.Fatal(err)
		}
	}
	prepare := func(c *committeeEnc) {
		t.Helper()
		if err := c.prepare(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	share(c)
	share(other)
	prepare(c)
	if c.ready() != 2 || budget.held.Load() != 2 {
		t.Fatalf("prepared %d (budget %d), want 2", c.ready(), budget.held.Load())
	}
	prepare(other) // one left in the budget
	if other.ready() != 1 || budget.held.Load() != 3 {
		t.Fatalf("other prepared %d (budget %d), want 1 of 3", other.ready(), budget.held.Load())
	}
	share(c)
	if c.ready() != 0 || other.ready() != 1 || budget.held.Load() != 1 {
		t.Fatalf("after a share: %d and %d prepared (budget %d), want 0 and 1", c.ready(), other.ready(), budget.held.Load())
	}
	share(other) // one prepared, one fresh
	if other.ready() != 0 || budget.held.Load() != 0 {
		t.Fatalf("after the other's share: %d prepared (budget %d)", other.ready(), budget.held.Load())
	}
	prepare(c)
	c.drop()
	if budget.held.Load() != 0 {
		t.Fatalf("a dropped key still counts %d prepared", budget.held.Load())
	}
	share(c) // a job still running under the old key
	prepare(c)
	if c.ready() != 0 || budget.held.Load() != 0 {
		t.Fatalf("a dropped key prepared: %d (budget %d)", c.ready(), budget.held.Load())
	}
}
