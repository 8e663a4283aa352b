package proxy

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/zk"
)

// maxLargeResponses bounds the results sent at once: many users asking at
// once must not each hold a copy in memory.
const maxLargeResponses = 16

// admission decides when an upload's ciphertexts may be received: a
// weighted semaphore over their bytes (Config.UploadMemory), a bounded queue
// of owners waiting for room (Config.MaxWaiting), and, for those refused, a
// retry hint sized from the queue and the recent time an upload takes. Safe
// for concurrent use.
type admission struct {
	mem        *semaphore.Weighted
	capacity   int64             // bytes
	weigh      func(n int) int64 // what an upload of n ciphertexts holds (uploadWeight)
	maxWaiting int64
	queued     atomic.Int64 // uploads being received or waiting for room

	mu      sync.Mutex
	service time.Duration // moving average of an admitted upload's time
}

// uploadWeight returns what an upload of n ciphertexts holds while it is
// received (a function of n alone): per ciphertext its message and decoded
// copy and the c1 kept for the members, and the proofs of its groups as
// job.ProofGroup cuts them, all held until the upload is stored.
func uploadWeight(p he.Params) func(n int) int64 {
	perCt := int64(2*p.Codecs().Ciphertext.Size() + p.PolySize())
	return func(n int) int64 {
		w := int64(n) * perCt
		for first := 0; first < n; first += zk.MaxGroup {
			_, size := job.ProofGroup(first, n)
			w += int64(zk.Size(p.N(), size))
		}
		return w
	}
}

func newAdmission(capacity int64, maxWaiting int, weigh func(n int) int64) *admission {
	return &admission{mem: semaphore.NewWeighted(capacity), capacity: capacity, weigh: weigh,
		maxWaiting: int64(maxWaiting), service: 50 * time.Millisecond}
}

// weight is what an upload of n ciphertexts holds while it is received (at
// most the whole capacity, so that even the largest upload is received,
// alone).
func (a *admission) weight(n int) int64 { return min(a.weigh(n), a.capacity) }

// parallel is how many uploads of this weight are received together.
func (a *admission) parallel(w int64) int64 { return max(1, a.capacity/w) }

// enter waits for room to receive an upload of n ciphertexts, or refuses it
// at once (a busyError) when too many already wait. release gives the room
// back when the upload is folded in or failed.
func (a *admission) enter(ctx context.Context, n int) (release func(), err error) {
	w := a.weight(n)
	if q := a.queued.Add(1); q > a.maxWaiting+a.parallel(w) {
		a.queued.Add(-1)
		return nil, busyError{queued: q - 1, after: a.hint(q, w)}
	}
	if err := a.mem.Acquire(ctx, w); err != nil {
		a.queued.Add(-1)
		return nil, err
	}
	start := time.Now()
	return func() {
		a.mem.Release(w)
		a.queued.Add(-1)
		a.observe(time.Since(start))
	}, nil
}

// hint is when an owner refused with q uploads queued should come back:
// about when the queue ahead of it has drained, between 100 ms and 30 s.
func (a *admission) hint(q, w int64) time.Duration {
	a.mu.Lock()
	s := a.service
	a.mu.Unlock()
	d := time.Duration(q/a.parallel(w)+1) * s
	return min(max(d, 100*time.Millisecond), 30*time.Second)
}

func (a *admission) observe(d time.Duration) {
	a.mu.Lock()
	a.service += (d - a.service) / 10
	a.mu.Unlock()
}

// busyError refuses an upload because too many wait; toStatus sends the
// hint as the status's google.rpc.RetryInfo.
type busyError struct {
	queued int64
	after  time.Duration
}

func (e busyError) Error() string {
	return fmt.Sprintf("%v (%d uploads in progress or waiting; retry in about %s)", ErrBusy, e.queued, e.after.Round(time.Millisecond))
}

func (e busyError) Unwrap() error { return ErrBusy }
