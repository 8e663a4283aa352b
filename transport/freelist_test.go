package transport

import "testing"

// TestFreeList: values come back in any order, at most the list's size is
// kept, and an empty list says so.
func TestFreeList(t *testing.T) {
	f := NewFreeList[int](2)
	if _, ok := f.Get(); ok {
		t.Fatal("an empty list returned a value")
	}
	f.Put(1)
	f.Put(2)
	f.Put(3) // dropped: the list keeps two
	got := 0
	for {
		v, ok := f.Get()
		if !ok {
			break
		}
		if v != 1 && v != 2 {
			t.Fatalf("got %d, kept 1 and 2", v)
		}
		got++
	}
	if got != 2 {
		t.Fatalf("%d values kept, want 2", got)
	}
}
