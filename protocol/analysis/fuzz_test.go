package analysis

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzComponentsJSON: the components of a result document. A hostile
// document is refused with an error and leaves the receiver unchanged; an
// accepted one is valid, usable, and round-trips.
func FuzzComponentsJSON(f *testing.F) {
	all := sampleComponents()
	pca := all[0]
	for _, c := range all {
		b, err := json.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(`{"analysis":"pca","mean":[0],"components":[[1]],"eigenvalues":[1],"all_eigenvalues":[1],"explained_variance_ratio":[1]}`))
	f.Add([]byte(`{"analysis":"dca","mean":[0,0],"components":[[1],[2]],"eigenvalues":[1],"all_eigenvalues":[1,2],"unit_components":[[1],[2]]}`))
	f.Add([]byte(`{"analysis":"pca","mean":[0],"components":[[1],[0,1]],"eigenvalues":[1],"all_eigenvalues":[1]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := *pca
		if err := json.Unmarshal(b, &c); err != nil {
			if c.W != pca.W || c.Analysis != pca.Analysis {
				t.Fatal("failed unmarshal changed the receiver")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted invalid components: %v", err)
		}
		d, k := c.Dims()
		if got := c.Project(make([]float64, d)); len(got) != k {
			t.Fatalf("projection has %d coordinates, want %d", len(got), k)
		}
		enc, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("accepted components do not encode: %v", err)
		}
		var back Components
		if err := json.Unmarshal(enc, &back); err != nil {
			t.Fatalf("re-encoded components do not decode: %v", err)
		}
		enc2, _ := json.Marshal(back)
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip changed the encoding:\n%s\n%s", enc, enc2)
		}
	})
}
