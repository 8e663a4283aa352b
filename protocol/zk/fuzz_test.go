package zk

import (
	"bytes"
	"testing"
)

// FuzzProof: proofs (of one ciphertext, or of a group: the fuzzer picks)
// arrive from owners (to the proxy) and from the proxy (to
// every member). Unmarshal accepts only the exact length, header and
// response ranges, and what it accepts re-encodes to the same bytes; no
// decoded proof but the prover's own verifies for the statement.
func FuzzProof(f *testing.F) {
	s := newSetup(f)
	bind := []byte("fuzz statement")
	c1s, ws := s.group(f, 2)
	valid := make([][]byte, 3) // by group size
	for g := 1; g <= 2; g++ {
		p, err := s.key.ProveGroup(c1s[:g], bind, ws[:g], nil)
		if err != nil {
			f.Fatal(err)
		}
		valid[g] = p.Marshal()
		flipped := bytes.Clone(valid[g])
		flipped[len(flipped)/2] ^= 4
		for _, b := range [][]byte{valid[g], flipped, valid[g][:headerSize(g)], append(bytes.Clone(valid[g]), 0)} {
			f.Add(b, g == 2)
		}
	}
	f.Add([]byte{version, Reps}, false)
	f.Add([]byte(nil), true)
	n := s.rq.N()
	f.Fuzz(func(t *testing.T, b []byte, group bool) {
		g := 1
		if group {
			g = 2
		}
		q, err := Unmarshal(b, n, g)
		if err != nil {
			return
		}
		if !bytes.Equal(q.Marshal(), b) {
			t.Fatal("an accepted proof does not re-encode to its bytes")
		}
		if err := s.key.VerifyGroup(c1s[:g], bind, q); err == nil && !bytes.Equal(b, valid[g]) {
			t.Fatal("a proof other than the prover's verified")
		}
	})
}
