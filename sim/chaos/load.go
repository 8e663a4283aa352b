package chaos

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Load keeps n cores busy for d, or until stop is called or ctx ends, as
// other work on the machine would (`fedpca simulate chaos --load-cores`):
// the suite's timings must hold on a loaded machine, not only on an idle
// one. stop waits for the load to end.
func Load(ctx context.Context, n int, d time.Duration) (stop func()) {
	lctx, cancel := context.WithTimeout(ctx, d)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := uint64(1)
			for lctx.Err() == nil {
				for range 1 << 16 { // xorshift: work the compiler keeps
					x ^= x << 13
					x ^= x >> 7
					x ^= x << 17
				}
			}
			burnt.Add(x) // keeps the work from being optimised away
		}()
	}
	return func() { cancel(); wg.Wait() }
}

var burnt atomic.Uint64
