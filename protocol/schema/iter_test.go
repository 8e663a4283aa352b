package schema

import (
	"errors"
	"strings"
	"testing"
)

// All yields every row, and a bad row as its *RowError without stopping;
// io.EOF is not yielded. Breaking out of the loop stops reading.
func TestReaderAll(t *testing.T) {
	s, err := Infer(strings.NewReader("a,b,label\n1,2,x\n2,1,y\n3,3,x\n"), "ds", "label")
	if err != nil {
		t.Fatal(err)
	}
	rd, err := s.NewReader(strings.NewReader("a,b,label\n1,2,x\noops,1,y\n3,3,y\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	var classes []int
	var bad []int
	for row, err := range rd.All() {
		var re *RowError
		switch {
		case err == nil:
			classes = append(classes, row.Class)
		case errors.As(err, &re):
			bad = append(bad, re.Line)
		default:
			t.Fatalf("unexpected error %v", err)
		}
	}
	if len(classes) != 2 || classes[0] != 0 || classes[1] != 1 || len(bad) != 1 || bad[0] != 3 {
		t.Fatalf("classes %v, bad lines %v; want [0 1] and [3]", classes, bad)
	}
	if rows, _ := rd.Rows(); rows != 2 {
		t.Fatalf("%d rows read, want 2", rows)
	}
	rd, err = s.NewReader(strings.NewReader("a,b,label\n1,2,x\n2,1,y\n3,3,x\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	for range rd.All() {
		break
	}
	if rows, _ := rd.Rows(); rows != 1 {
		t.Fatalf("after a break at the first row: %d rows read, want 1", rows)
	}
}
