package proxy

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/transport"
)

func TestAdmission(t *testing.T) {
	// Room for two one-ciphertext uploads (2 x 200 bytes), one waiting.
	a := newAdmission(400, 1, func(n int) int64 { return 200 * int64(n) })
	ctx := context.Background()
	r1, err := a.enter(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := a.enter(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	// A third waits for room; a fourth is refused at once with a hint.
	entered := make(chan func())
	go func() {
		r3, err := a.enter(ctx, 1)
		if err != nil {
			t.Error(err)
		}
		entered <- r3
	}()
	for a.queued.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	_, err = a.enter(ctx, 1)
	var busy busyError
	if !errors.As(err, &busy) || !errors.Is(err, ErrBusy) || busy.after < 100*time.Millisecond || busy.after > 30*time.Second {
		t.Fatalf("fourth upload: %v, want busy with a hint", err)
	}
	st := status.Convert(toStatus(hclog.NewNullLogger(), err))
	if d, ok := transport.RetryDelay(st.Err()); st.Code() != codes.ResourceExhausted || !ok || d != busy.after {
		t.Fatalf("status %v (retry delay %s, %v), want ResourceExhausted with %s", st, d, ok, busy.after)
	}
	r1()
	r3 := <-entered
	r2()
	r3()
	// An upload larger than the whole room is received alone.
	r, err := a.enter(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	ctxShort, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := a.enter(ctxShort, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("while the large upload holds the room: %v", err)
	}
	r()
	if a.queued.Load() != 0 {
		t.Fatalf("queued %d after every release", a.queued.Load())
	}
}

// TestWatchersFitMemoryLimit: the default number of watches fits the
// memory limit (4,096 without one), and what it allows fits the limit.
func TestWatchersFitMemoryLimit(t *testing.T) {
	for _, c := range []struct {
		limit    int64
		min, max int
	}{{math.MaxInt64, 4096, 4096}, {256 << 20, 2000, 2500}, {1 << 30, 4096, 4096}, {100 << 20, 64, 64}} {
		n := defaultWatchers(64<<20, c.limit)
		if n < c.min || n > c.max {
			t.Errorf("limit %d MiB: %d watches, want %d to %d", c.limit>>20, n, c.min, c.max)
		}
		if need := memoryNeed(Config{UploadMemory: 64 << 20, MaxWatchers: n}); n > 64 && need > c.limit {
			t.Errorf("limit %d MiB: %d watches need %d MiB", c.limit>>20, n, need>>20)
		}
	}
}

// TestUploadWeight: an upload weighs its ciphertexts and the proofs of its
// groups of eight, one proof a group: a grouped upload weighs less per
// ciphertext than one proven alone, and the groups add up as the uploads
// are cut (8 + 1, 8 + 8, 4 x 8 + 7 for d = 784).
func TestUploadWeight(t *testing.T) {
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	w := uploadWeight(p)
	if w(8) >= 8*w(1) {
		t.Errorf("eight ciphertexts weigh %d, eight proven alone %d: a group's proof is counted per ciphertext", w(8), 8*w(1))
	}
	for n := 2; n <= 8; n++ {
		if w(n)*int64(n-1) >= w(n-1)*int64(n) {
			t.Errorf("%d ciphertexts weigh %d, %d weigh %d: not less per ciphertext", n, w(n), n-1, w(n-1))
		}
	}
	for _, c := range []struct{ n, groups, last int }{{9, 1, 1}, {16, 1, 8}, {39, 4, 7}} {
		if got, want := w(c.n), int64(c.groups)*w(8)+w(c.last); got != want {
			t.Errorf("%d ciphertexts weigh %d, want %d groups of eight and one of %d: %d", c.n, got, c.groups, c.last, want)
		}
	}
	t.Logf("an upload of 1 ciphertext weighs %d bytes, of 39 (d = 784) %d (%d a ciphertext)", w(1), w(39), w(39)/39)
}
