package job

import (
	"errors"
	"strings"
	"testing"
)

func TestMatchID(t *testing.T) {
	a := strings.Repeat("ab", 32)
	b := "abcd" + strings.Repeat("0", 60)
	c := "ffff" + strings.Repeat("1", 60)
	ids := []string{a, b, c}
	for _, tc := range []struct {
		prefix, want string
		err          error
		msg          string
	}{
		{prefix: a, want: a},
		{prefix: "ffff", want: c},
		{prefix: "FFFF1111", want: c},
		{prefix: "abab…", want: a},
		{prefix: " abcd0 ", want: b},
		{prefix: "abcd", want: b},
		{prefix: "abab", want: a},
		{prefix: "ab", msg: "at least 4"},
		{prefix: "", msg: "empty"},
		{prefix: "zzzz", msg: "hex digits"},
		{prefix: "1234", err: ErrNoSuchJob},
	} {
		got, err := MatchID(ids, tc.prefix)
		switch {
		case tc.want != "":
			if err != nil || got != tc.want {
				t.Errorf("MatchID(%q) = %q, %v; want %q", tc.prefix, got, err, tc.want)
			}
		case tc.err != nil:
			if !errors.Is(err, tc.err) {
				t.Errorf("MatchID(%q) = %q, %v; want %v", tc.prefix, got, err, tc.err)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("MatchID(%q) = %q, %v; want an error saying %q", tc.prefix, got, err, tc.msg)
			}
		}
	}
	d := "abcd" + strings.Repeat("2", 60)
	_, err := MatchID([]string{a, b, d}, "abcd")
	if !errors.Is(err, ErrAmbiguousJob) || !strings.Contains(err.Error(), b[:16]) || !strings.Contains(err.Error(), d[:16]) {
		t.Errorf("ambiguous prefix: %v", err)
	}
}

// FuzzMatchID: whatever the prefix, MatchID returns an ID of the list that
// starts with the (normalised) prefix and is the only one that does, or an
// error; never a panic.
func FuzzMatchID(f *testing.F) {
	a := strings.Repeat("ab", 32)
	b := "abcd" + strings.Repeat("0", 60)
	f.Add("abcd")
	f.Add("ab")
	f.Add(a)
	f.Add("ABAB…")
	f.Add("")
	f.Fuzz(func(t *testing.T, prefix string) {
		ids := []string{a, b}
		got, err := MatchID(ids, prefix)
		if err != nil {
			return
		}
		p := strings.ToLower(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(prefix), "…")))
		n := 0
		for _, id := range ids {
			if strings.HasPrefix(id, p) {
				n++
			}
		}
		if !strings.HasPrefix(got, p) || n != 1 || len(p) < MinPrefix {
			t.Fatalf("MatchID(%q) = %q with %d matches", prefix, got, n)
		}
	})
}
