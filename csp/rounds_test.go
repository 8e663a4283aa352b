package csp

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fedpca/fedpca/protocol/job"
)

// TestRoundsSwitchedOnce: a member switches each round of a power-method
// job once: a second round of the same number under another matrix (another
// round ID) is refused with ErrSwitched, naming the round switched, and
// nothing is stored for it; other rounds and other parents are not
// affected, and the audit records name the parent and round.
func TestRoundsSwitchedOnce(t *testing.T) {
	m, err := openMember(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	parent, other := strings.Repeat("ab", 32), strings.Repeat("ef", 32)
	rec := func(parent string, r int, q string) *switchRecord {
		rs := job.RoundSpec{Parent: parent, Round: r, QHash: strings.Repeat(q, 32)}
		return &switchRecord{JobID: rs.ID(), Parent: parent, Round: r, Digest: strings.Repeat("00", 32), Ciphertexts: 1, At: time.Now().UTC()}
	}
	for _, r := range []*switchRecord{rec(parent, 1, "11"), rec(parent, 2, "11"), rec(other, 1, "11")} {
		if err := m.storeShares(r, [][]byte{[]byte("share")}); err != nil {
			t.Fatalf("round %d of %.8s: %v", r.Round, r.Parent, err)
		}
	}
	again := rec(parent, 1, "22")
	if err := m.storeShares(again, [][]byte{[]byte("share")}); !errors.Is(err, ErrSwitched) || !strings.Contains(err.Error(), "round 1 of job abababababab… was switched already") {
		t.Fatalf("round 1 under another matrix: %v, want ErrSwitched", err)
	}
	if shares, r, err := m.storedShares(again.JobID); err != nil || shares != nil || r != nil {
		t.Fatalf("the refused round left shares %v, record %v (%v)", shares, r, err)
	}
	recs, err := m.Audit()
	if err != nil || len(recs) != 3 {
		t.Fatalf("audit: %d records, %v", len(recs), err)
	}
	for _, r := range recs {
		if r.Parent == "" || r.Round < 1 {
			t.Errorf("audit record %+v names no parent and round", r)
		}
	}
}
