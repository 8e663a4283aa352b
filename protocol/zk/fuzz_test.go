package zk

import (
	"bytes"
	"testing"
)

// FuzzProof: proofs arrive from owners (to the proxy) and from the proxy (to
// every member). Unmarshal accepts only the exact length, header and
// response ranges, and what it accepts re-encodes to the same bytes; no
// decoded proof but the prover's own verifies for the statement.
func FuzzProof(f *testing.F) {
	s := newSetup(f)
	c1, w := s.encrypt(f)
	bind := []byte("fuzz statement")
	p, err := s.key.Prove(c1, bind, w, nil)
	if err != nil {
		f.Fatal(err)
	}
	valid := p.Marshal()
	n := s.rq.N()
	flipped := bytes.Clone(valid)
	flipped[len(flipped)/2] ^= 4
	for _, b := range [][]byte{valid, flipped, valid[:headerSize], {version, Reps}, nil, append(bytes.Clone(valid), 0)} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q, err := Unmarshal(b, n)
		if err != nil {
			return
		}
		if !bytes.Equal(q.Marshal(), b) {
			t.Fatal("an accepted proof does not re-encode to its bytes")
		}
		if err := s.key.Verify(c1, bind, q); err == nil && !bytes.Equal(b, valid) {
			t.Fatal("a proof other than the prover's verified")
		}
	})
}
