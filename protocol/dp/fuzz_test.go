package dp

import (
	"encoding/json"
	"math"
	"testing"
)

// FuzzFloatJSON: privacy parameters of a result document ("inf", numbers,
// null). Whatever decodes re-encodes to a form that decodes to the same
// value.
func FuzzFloatJSON(f *testing.F) {
	for _, s := range []string{`1.5`, `"inf"`, `"+inf"`, `"-inf"`, `null`, `-0`, `1e308`, `1e309`, `"1"`, `"nan"`, `[1]`, `{}`, `1e-400`, `0x10`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var x Float
		if err := json.Unmarshal(b, &x); err != nil {
			return
		}
		enc, err := json.Marshal(x)
		if err != nil {
			t.Fatalf("decoded %q to %v, which does not encode: %v", b, float64(x), err)
		}
		var back Float
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", enc, err)
		}
		same := back == x || (math.IsNaN(float64(back)) && math.IsNaN(float64(x)))
		if !same || math.Signbit(float64(back)) != math.Signbit(float64(x)) {
			t.Fatalf("%q -> %v -> %s -> %v", b, float64(x), enc, float64(back))
		}
	})
}
