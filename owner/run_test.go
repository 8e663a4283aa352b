package owner

import (
	"context"
	"errors"
	"testing"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/fedpca/fedpca/transport"
)

// TestRunClosesStoreWhenDialFails: Run that cannot dial the proxy returns
// the error with its store closed (a caller that retries with a new owner
// could not open the store otherwise).
func TestRunClosesStoreWhenDialFails(t *testing.T) {
	o := testOwner(t)
	o.cfg.Dialer.Self = transport.Identity{} // an insecure dialer without an identity cannot dial
	if err := o.Run(context.Background()); err == nil {
		t.Fatal("Run dialed without an identity")
	}
	if err := o.db.View(func(*bolt.Tx) error { return nil }); !errors.Is(err, berrors.ErrDatabaseNotOpen) {
		t.Fatalf("store after Run failed to dial: %v, want closed", err)
	}
}
