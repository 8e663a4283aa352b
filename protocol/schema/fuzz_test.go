package schema

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzInfer: `fedpca schema infer` reads a CSV file. Whatever it accepts is
// a valid schema whose canonical form parses to the same hash, and every row
// of the file it was inferred from maps under it.
func FuzzInfer(f *testing.F) {
	f.Add([]byte(csvSmall), "label")
	f.Add([]byte("f1,f2,f3,label\n1,2,3,a\n3,2,3,b\n5,2,3,a\n"), "label")
	f.Add([]byte("x,y\n1e300,-1e300\n-1e300,1e300\n"), "")
	f.Add([]byte("x\n0x1p-2\n"), "")
	f.Add([]byte("x,label\n1,a\n\"2\n"), "label")
	f.Add([]byte("a,a\n1,2\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, label string) {
		s, err := Infer(bytes.NewReader(data), "inferred", label)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("inferred an invalid schema: %v", err)
		}
		back, err := Parse(s.Canonical())
		if err != nil {
			t.Fatalf("inferred schema does not parse: %v\n%s", err, s.Canonical())
		}
		if back.HashHex() != s.HashHex() {
			t.Fatal("canonical form changes the hash")
		}
		rd, err := s.NewReader(bytes.NewReader(data), label != "")
		if err != nil {
			t.Fatalf("the file a schema was inferred from has no valid header for it: %v", err)
		}
		for {
			_, _, err := rd.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("a row the schema was inferred from does not map: %v", err)
			}
		}
	})
}
