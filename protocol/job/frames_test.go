package job

import "testing"

// TestFrames: frames cover [0, n) in order, none empty but the one of an
// empty round, none longer than FrameWords.
func TestFrames(t *testing.T) {
	for _, n := range []int{0, 1, FrameWords - 1, FrameWords, FrameWords + 1, 3*FrameWords + 7} {
		fs := Frames(n)
		want := max(1, (n+FrameWords-1)/FrameWords)
		if len(fs) != want {
			t.Fatalf("%d words: %d frames, want %d", n, len(fs), want)
		}
		at := 0
		for i, f := range fs {
			if f[0] != at || f[1] > n || f[1]-f[0] > FrameWords || f[1] == f[0] && n > 0 {
				t.Fatalf("%d words: frame %d is [%d, %d) after %d", n, i, f[0], f[1], at)
			}
			at = f[1]
		}
		if at != n {
			t.Fatalf("%d words: frames end at %d", n, at)
		}
	}
}
