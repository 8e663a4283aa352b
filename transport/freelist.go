package transport

// FreeList keeps up to a fixed number of values for reuse: large buffers or
// objects that are costly to make (an upload's ciphertext, an encryptor).
// Unlike a sync.Pool, the garbage collector does not empty it, so what it
// keeps is there for the next job however often the collector runs; its
// size bounds what it holds. Safe for concurrent use.
type FreeList[T any] struct{ c chan T }

// NewFreeList returns a free list keeping at most n values.
func NewFreeList[T any](n int) *FreeList[T] { return &FreeList[T]{c: make(chan T, n)} }

// Get returns a kept value, or ok false when none is kept (the caller makes
// one).
func (f *FreeList[T]) Get() (v T, ok bool) {
	select {
	case v = <-f.c:
		return v, true
	default:
		return v, false
	}
}

// Put keeps v for a later Get, or drops it when the list is full.
func (f *FreeList[T]) Put(v T) {
	select {
	case f.c <- v:
	default:
	}
}
