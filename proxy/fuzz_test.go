package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
)

func params(tb testing.TB) he.Params {
	p, err := he.NewDefaultParams()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// fuzzRecord returns a valid job record (a DCA job of three owners, one of
// whom uploaded) as CreateJob and Upload store it.
func fuzzRecord(tb testing.TB) (string, jobRecord) {
	tb.Helper()
	sch, err := schema.Parse([]byte(`{"id":"wdbc","features":[{"name":"a","center":"1.5","scale":"2"},{"name":"b","center":"0","scale":"0.5"}],"label":"label","classes":["x","y"]}`))
	if err != nil {
		tb.Fatal(err)
	}
	h := func(c string) string { return strings.Repeat(c, 64) }
	s := &job.Spec{Version: job.Version, Dataset: "wdbc", SchemaHash: sch.HashHex(), Analysis: job.DCA, K: 1,
		Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanServers, Split: dp.DefaultSplit,
		Owners: []string{"hospital-a", "hospital-b", "hospital-c"}, MinOwners: 2,
		Deadline: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxRows: 30_000, MaxOwnerRows: 10_000,
		HEParams: he.DefaultParamsID, HEParamsHash: h("b"), CommitteeN: 3, CommitteeThreshold: 2,
		CommitteeKey: h("c"), User: "spiffe://fedpca/user/alice", UserKey: h("d"), Nonce: "fuzz"}
	at := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	return s.ID(), jobRecord{Spec: s.Canonical(), Signature: []byte{1, 2}, Schema: sch.Canonical(),
		State: fedpcav1.JobState_JOB_STATE_OPEN, Reason: "1 of 3 owners uploaded", Created: at, Updated: at,
		Uploads: []uploadRecord{{Owner: "hospital-b", Digest: h("e"), At: at}}}
}

// FuzzUploadHeader: the header of an owner's upload, and the budget report
// that comes with uploads and declines. Whatever is accepted names an owner
// of the job, the job's ciphertext count, a SHA-256 digest and a sane
// report for the job's dataset.
func FuzzUploadHeader(f *testing.F) {
	p := params(f)
	id, rec := fuzzRecord(f)
	j, err := newJobState(id, rec, p.Chunks)
	if err != nil {
		f.Fatal(err)
	}
	d := sha256.Sum256(nil)
	if err := j.checkUpload("hospital-a", &fedpcav1.UploadHeader{JobId: id, Ciphertexts: 1, Digest: d[:],
		Budget: &fedpcav1.BudgetReport{Dataset: "wdbc", RhoBudget: 1}}); err != nil {
		f.Fatalf("valid header refused: %v", err)
	}
	f.Add("hospital-a", uint32(1), d[:], "wdbc", 1.0, 0.5, 0.25)
	f.Add("hospital-a", uint32(1), d[:], "", math.NaN(), 0.0, 0.0)
	f.Add("hospital-a", uint32(1), d[:], "wdbc", math.NaN(), 0.0, 0.0)
	f.Add("hospital-a", uint32(1), d[:], "wdbc", math.Inf(1), 0.0, 0.0)
	f.Add("hospital-a", uint32(1), d[:], "wdbc", 1.0, -1.0, 0.0)
	f.Add("hospital-a", uint32(1), d[:], "mnist", 1.0, 0.0, 0.0)
	f.Add("hospital-z", uint32(1), d[:], "wdbc", 1.0, 0.0, 0.0)
	f.Add("hospital-a", uint32(2), d[:], "wdbc", 1.0, 0.0, 0.0)
	f.Add("hospital-a", uint32(1<<31), d[:], "wdbc", 1.0, 0.0, 0.0)
	f.Add("hospital-a", uint32(1), d[:31], "wdbc", 1.0, 0.0, 0.0)
	f.Fuzz(func(t *testing.T, owner string, n uint32, digest []byte, dataset string, budget, spent, reserved float64) {
		b := &fedpcav1.BudgetReport{Dataset: dataset, RhoBudget: budget, RhoSpent: spent, RhoReserved: reserved}
		hd := &fedpcav1.UploadHeader{JobId: id, Ciphertexts: n, Digest: digest, Budget: b}
		err := j.checkUpload(owner, hd)
		if budgetErr := j.checkBudget(b); budgetErr == nil && dataset != "" {
			// An accepted report is storable.
			if _, err := json.Marshal(budgetRecord{Owner: owner, Dataset: dataset, RhoBudget: budget, RhoSpent: spent, RhoReserved: reserved}); err != nil {
				t.Fatalf("accepted budget report does not encode: %v", err)
			}
		}
		if err != nil {
			return
		}
		if !slices.Contains(j.spec.Owners, owner) || int(n) != j.n || len(digest) != sha256.Size {
			t.Fatalf("accepted owner %q, %d ciphertexts, digest of %d bytes", owner, n, len(digest))
		}
		if dataset != "" && (dataset != j.spec.Dataset || !(budget >= 0 && spent >= 0 && reserved >= 0) ||
			math.IsInf(budget+spent+reserved, 0)) {
			t.Fatalf("accepted budget report %v", b)
		}
	})
}

// FuzzStoreRecords: what the proxy reads back from its store at start (the
// committee record, job records, masks). A torn or edited record gives an
// error, never a panic or a job state the drivers cannot use.
func FuzzStoreRecords(f *testing.F) {
	p := params(f)
	id, rec := fuzzRecord(f)
	good, _ := json.Marshal(rec)
	if _, err := decodeJob(id, good, p.Chunks); err != nil {
		f.Fatalf("valid job record refused: %v", err)
	}
	f.Add(uint8(1), good)
	switching := rec
	switching.State, switching.Active, switching.CSPs, switching.Switched = fedpcav1.JobState_JOB_STATE_SWITCHING, []uint32{1, 3}, []string{"csp-1", "csp-3"}, true
	b, _ := json.Marshal(switching)
	f.Add(uint8(1), b)
	f.Add(uint8(1), good[:len(good)/2])
	f.Add(uint8(1), bytes.Replace(good, []byte(`"state":1`), []byte(`"state":7`), 1))
	f.Add(uint8(1), bytes.Replace(good, []byte(`hospital-b`), []byte(`hospital-z`), 1))
	pk := he.GenerateKeyPair(p).Public
	pkb := p.Codecs().PublicKey.Marshal(pk)
	cmt, _ := json.Marshal(committeeRecord{CeremonyID: "c1", Members: []Member{{"csp-1", "a:1"}, {"csp-2", "a:2"}}, Threshold: 2,
		HEParams: p.ID(), PublicKey: pkb, Fingerprint: job.Fingerprint(pkb)})
	if _, err := decodeCommittee(cmt, p); err != nil {
		f.Fatalf("valid committee record refused: %v", err)
	}
	f.Add(uint8(0), cmt)
	f.Add(uint8(0), bytes.Replace(cmt, []byte(`"threshold":2`), []byte(`"threshold":3`), 1))
	f.Add(uint8(2), make([]byte, 8*p.Slots()))
	f.Add(uint8(2), make([]byte, 8*p.Slots()-1))
	f.Fuzz(func(t *testing.T, mode uint8, v []byte) {
		switch mode % 3 {
		case 0:
			c, err := decodeCommittee(v, p)
			if err != nil {
				return
			}
			if job.Fingerprint(c.PublicKey) != c.Fingerprint || c.Threshold < 1 || c.Threshold > len(c.Members) {
				t.Fatalf("accepted committee record %+v", c)
			}
		case 1:
			j, err := decodeJob(id, v, p.Chunks)
			if err != nil {
				return
			}
			// What the proxy does with a loaded job must work.
			j.mu.Lock()
			who := transport.Identity{Role: transport.RoleOwner, ID: j.spec.Owners[0]}
			_ = j.status(true, who)
			_ = j.info(who)
			_ = j.uploadedOwners()
			j.mu.Unlock()
			again, _ := json.Marshal(j.rec)
			if _, err := decodeJob(id, again, p.Chunks); err != nil {
				t.Fatalf("a loaded record does not load again: %v", err)
			}
		default:
			m, err := decodeMask(v, p.Slots())
			if err != nil {
				return
			}
			if !bytes.Equal(encodeMask(m), v) {
				t.Fatal("mask does not re-encode to itself")
			}
		}
	})
}
