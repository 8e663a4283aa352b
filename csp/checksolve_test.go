package csp

import (
	"strings"
	"testing"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
)

// TestCheckSolve: what a member requires of a solve header beyond the key
// switch's checks. With the members' own randomness: exactly three
// distinct parties in point order, within the committee, holding every
// active member and this one, its party index, and no seed for anybody (a
// proxy that tries to deal is refused); with a dealer: the active members
// compute, party 0 without a seed and the others with one.
func TestCheckSolve(t *testing.T) {
	seed := make([]byte, 32)
	for _, c := range []struct {
		what       string
		randomness string
		n, t       int
		active     []he.Point
		me         he.Point
		hd         *fedpcav1.SolveHeader
		want       string // "" to accept
	}{
		{"members: the three", job.RandomnessMembers, 4, 2, []he.Point{2, 4}, 3, &fedpcav1.SolveHeader{Party: 1, Parties: []uint32{2, 3, 4}}, ""},
		{"members: a seed", job.RandomnessMembers, 4, 2, []he.Point{2, 4}, 3, &fedpcav1.SolveHeader{Party: 1, Parties: []uint32{2, 3, 4}, Seed: seed}, "nobody gets one"},
		{"members: two parties", job.RandomnessMembers, 4, 2, []he.Point{2, 4}, 2, &fedpcav1.SolveHeader{Party: 0, Parties: []uint32{2, 4}}, "computed by 3 distinct members"},
		{"members: a party twice", job.RandomnessMembers, 4, 2, []he.Point{2, 4}, 2, &fedpcav1.SolveHeader{Party: 0, Parties: []uint32{2, 4, 4}}, "computed by 3 distinct members"},
		{"members: out of order", job.RandomnessMembers, 4, 2, []he.Point{2, 4}, 2, &fedpcav1.SolveHeader{Party: 0, Parties: []uint32{4, 3, 2}}, "in point order"},
		{"members: outside the committee", job.RandomnessMembers, 4, 2, []he.Point{2, 4}, 2, &fedpcav1.SolveHeader{Party: 0, Parties: []uint32{2, 4, 5}}, "not in the committee of 4"},
		{"members: an active member left out", job.RandomnessMembers, 4, 2, []he.Point{2, 4}, 2, &fedpcav1.SolveHeader{Party: 0, Parties: []uint32{1, 2, 3}}, "do not include the active member 4"},
		{"members: this member left out", job.RandomnessMembers, 4, 2, []he.Point{2, 4}, 1, &fedpcav1.SolveHeader{Party: 0, Parties: []uint32{2, 3, 4}}, "party -1"},
		{"members: another party index", job.RandomnessMembers, 4, 2, []he.Point{2, 4}, 3, &fedpcav1.SolveHeader{Party: 2, Parties: []uint32{2, 3, 4}}, "is party 1"},
		{"dealer: party 1", job.RandomnessDealer, 3, 2, []he.Point{1, 3}, 3, &fedpcav1.SolveHeader{Party: 1, Seed: seed}, ""},
		{"dealer: party 0 with a seed", job.RandomnessDealer, 3, 2, []he.Point{1, 3}, 1, &fedpcav1.SolveHeader{Party: 0, Seed: seed}, "party 0 gets corrections"},
		{"dealer: parties named", job.RandomnessDealer, 3, 2, []he.Point{1, 3}, 1, &fedpcav1.SolveHeader{Party: 0, Parties: []uint32{1, 2, 3}}, "the proxy deals"},
	} {
		spec := &job.Spec{Release: job.ReleaseComponents, Randomness: c.randomness, CommitteeN: c.n, CommitteeThreshold: c.t, Nonce: c.what}
		_, err := checkSolve(&checked{spec: spec, active: c.active}, c.hd, c.me)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.what, err, c.want)
		}
	}
}
