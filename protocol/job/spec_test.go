package job

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/he"
)

func TestParseSpec(t *testing.T) {
	p := heParams(t)
	ds := loadDataset(t, "wine", 16)
	user := he.GenerateKeyPair(p)
	_, cpk := ceremony(t, p, he.Committee{N: 1, Threshold: 1})
	s := newSpec(ds.schema, p, DCA, 3, he.Committee{N: 1, Threshold: 1}, cpk, user, false)
	b := s.Canonical()
	back, err := ParseSpec(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID() != s.ID() {
		t.Fatal("parsed spec has another ID")
	}
	for name, bad := range map[string][]byte{
		"not canonical": bytes.Replace(b, []byte(`"k":0`), []byte(`"k": 0`), 1),
		"unknown field": bytes.Replace(b, []byte(`{"version"`), []byte(`{"x":1,"version"`), 1),
		"trailing":      append(append([]byte{}, b...), []byte(" {}")...),
		"invalid":       bytes.Replace(b, []byte(`"epsilon":1`), []byte(`"epsilon":-1`), 1),
		"not json":      []byte("spec"),
		"too large":     bytes.Repeat([]byte(" "), MaxSpecBytes+1),
	} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestProjectCSV(t *testing.T) {
	p := heParams(t)
	ds := loadDataset(t, "wine", 16)
	user := he.GenerateKeyPair(p)
	c := he.Committee{N: 1, Threshold: 1}
	members, cpk := ceremony(t, p, c)
	s := newSpec(ds.schema, p, DCA, 2, c, cpk, user, true)
	s.Owners, s.MinOwners = []string{"a"}, 1
	if err := s.SetOwnerRows(20_000); err != nil {
		t.Fatal(err)
	}
	res, _, _ := runProtocol(t, p, runConfig{spec: s, sch: ds.schema, ownerCSVs: []string{ds.csv()}, committee: c, members: members, cpk: cpk, active: []he.Point{1}}, user)
	var out bytes.Buffer
	var seen []string
	n, err := ProjectCSV(res, ds.schema, strings.NewReader(ds.csv()), &out, func(coords []float64, class string) {
		seen = append(seen, fmt.Sprintf("%s,%s,%s", strconv.FormatFloat(coords[0], 'g', -1, 64), strconv.FormatFloat(coords[1], 'g', -1, 64), class))
	})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if n != len(ds.rows) || len(lines) != n+1 || lines[0] != "component_1,component_2,label" {
		t.Fatalf("%d rows, %d lines, header %q", n, len(lines), lines[0])
	}
	if len(seen) != n || seen[0] != lines[1] || seen[n-1] != lines[n] {
		t.Fatalf("each saw %d rows, first %q (CSV %q)", len(seen), seen[0], lines[1])
	}
	other := *res
	for _, h := range []string{strings.Repeat("0", 64), "", "abc"} {
		other.SchemaHash = h
		if _, err := ProjectCSV(&other, ds.schema, strings.NewReader(ds.csv()), &out, nil); err == nil {
			t.Errorf("result for schema %q accepted", h)
		}
	}
}
