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

// fuzzRecord returns a valid job (a DCA job of three owners, one of whom
// uploaded) as CreateJob and Upload store it.
func fuzzRecord(tb testing.TB) storedJob {
	tb.Helper()
	sch, err := schema.Parse([]byte(`{"id":"wdbc","features":[{"name":"a","center":"1.5","scale":"2"},{"name":"b","center":"0","scale":"0.5"}],"label":"label","classes":["x","y"]}`))
	if err != nil {
		tb.Fatal(err)
	}
	h := func(c string) string { return strings.Repeat(c, 64) }
	s := &job.Spec{Version: job.Version, Dataset: "wdbc", SchemaHash: sch.HashHex(), Analysis: job.DCA, K: 1,
		Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanServers, Split: dp.DefaultSplit,
		MinOwners: 2,
		Deadline:  time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxRows: 30_000, MaxOwnerRows: 10_000,
		HEParams: he.DefaultParamsID, HEParamsHash: h("b"), CommitteeN: 3, CommitteeThreshold: 2,
		CommitteeKey: h("c"), User: "spiffe://fedpca/user/alice", UserKey: h("d"), Nonce: "fuzz"}
	owners := []string{"hospital-a", "hospital-b", "hospital-c"}
	if err := s.SetOwners(keyedOwners(owners)); err != nil {
		tb.Fatal(err)
	}
	at := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	enc := func(v any) []byte {
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	return storedJob{id: s.ID(),
		ticket:   enc(jobTicket{Spec: s.Canonical(), Signature: []byte{1, 2}, Schema: sch.Canonical(), Owners: keyedOwners(owners), Created: at}),
		progress: enc(jobProgress{State: fedpcav1.JobState_JOB_STATE_OPEN, Reason: "1 of 3 owners uploaded", Updated: at, Uploaded: 1}),
		uploads:  [][]byte{enc(uploadRecord{Owner: "hospital-b", Digest: h("e"), At: at})}}
}

// FuzzUploadHeader: the header of an owner's upload, and the budget report
// that comes with uploads and declines. Whatever is accepted names an owner
// of the job, the job's ciphertext count, a SHA-256 digest and a sane
// report for the job's dataset.
func FuzzUploadHeader(f *testing.F) {
	p := params(f)
	sj := fuzzRecord(f)
	id := sj.id
	j, err := decodeJob(sj, p.Chunks, nil)
	if err != nil {
		f.Fatal(err)
	}
	d := sha256.Sum256(nil)
	// The caller is an owner by its certificate; keyed by its name's
	// stand-in key (keyedOwners), or, rekeyed, by another key.
	caller := func(owner string, rekeyed bool) transport.Peer {
		key := job.Fingerprint([]byte(owner))
		if rekeyed {
			key = job.Fingerprint([]byte("another key"))
		}
		return transport.Peer{Identity: transport.Identity{Role: transport.RoleOwner, ID: owner}, Key: key}
	}
	if _, err := j.checkUpload(caller("hospital-a", false), &fedpcav1.UploadHeader{JobId: id, Ciphertexts: 1, Digest: d[:],
		Budget: &fedpcav1.BudgetReport{Dataset: "wdbc", RhoBudget: 1}}); err != nil {
		f.Fatalf("valid header refused: %v", err)
	}
	f.Add("hospital-a", false, uint32(1), d[:], "wdbc", 1.0, 0.5, 0.25)
	f.Add("hospital-a", true, uint32(1), d[:], "wdbc", 1.0, 0.5, 0.25)
	f.Add("hospital-a", false, uint32(1), d[:], "", math.NaN(), 0.0, 0.0)
	f.Add("hospital-a", false, uint32(1), d[:], "wdbc", math.NaN(), 0.0, 0.0)
	f.Add("hospital-a", false, uint32(1), d[:], "wdbc", math.Inf(1), 0.0, 0.0)
	f.Add("hospital-a", false, uint32(1), d[:], "wdbc", 1.0, -1.0, 0.0)
	f.Add("hospital-a", false, uint32(1), d[:], "mnist", 1.0, 0.0, 0.0)
	f.Add("hospital-z", false, uint32(1), d[:], "wdbc", 1.0, 0.0, 0.0)
	f.Add("hospital-a", false, uint32(2), d[:], "wdbc", 1.0, 0.0, 0.0)
	f.Add("hospital-a", false, uint32(1<<31), d[:], "wdbc", 1.0, 0.0, 0.0)
	f.Add("hospital-a", false, uint32(1), d[:31], "wdbc", 1.0, 0.0, 0.0)
	f.Fuzz(func(t *testing.T, owner string, rekeyed bool, n uint32, digest []byte, dataset string, budget, spent, reserved float64) {
		b := &fedpcav1.BudgetReport{Dataset: dataset, RhoBudget: budget, RhoSpent: spent, RhoReserved: reserved}
		hd := &fedpcav1.UploadHeader{JobId: id, Ciphertexts: n, Digest: digest, Budget: b}
		named, err := j.checkUpload(caller(owner, rekeyed), hd)
		if budgetErr := j.checkBudget(b); budgetErr == nil && dataset != "" {
			// An accepted report is storable.
			if _, err := json.Marshal(budgetRecord{Owner: owner, Dataset: dataset, RhoBudget: budget, RhoSpent: spent, RhoReserved: reserved}); err != nil {
				t.Fatalf("accepted budget report does not encode: %v", err)
			}
		}
		if err != nil {
			return
		}
		if !slices.Contains(j.owners.Load().Owners(), named) || named.ID != owner || rekeyed || int(n) != j.n || len(digest) != sha256.Size {
			t.Fatalf("accepted owner %q (rekeyed %v) as %v, %d ciphertexts, digest of %d bytes", owner, rekeyed, named, n, len(digest))
		}
		if dataset != "" && (dataset != j.spec.Dataset || !(budget >= 0 && spent >= 0 && reserved >= 0) ||
			math.IsInf(budget+spent+reserved, 0)) {
			t.Fatalf("accepted budget report %v", b)
		}
	})
}

// FuzzStoreRecords: what the proxy reads back from its store at start (the
// committee record, a job's ticket with its owner list, progress and upload
// records, masks). A torn or
// edited record gives an error, never a panic or a job state the drivers
// cannot use.
func FuzzStoreRecords(f *testing.F) {
	p := params(f)
	sj := fuzzRecord(f)
	if _, err := decodeJob(sj, p.Chunks, nil); err != nil {
		f.Fatalf("valid job refused: %v", err)
	}
	good, upload := sj.progress, sj.uploads[0]
	f.Add(uint8(1), good)
	var prog jobProgress
	if err := json.Unmarshal(good, &prog); err != nil {
		f.Fatal(err)
	}
	prog.State, prog.Active, prog.CSPs, prog.Switched = fedpcav1.JobState_JOB_STATE_SWITCHING, []uint32{1, 3}, []string{"csp-1", "csp-3"}, true
	b, _ := json.Marshal(prog)
	f.Add(uint8(1), b)
	f.Add(uint8(1), good[:len(good)/2])
	f.Add(uint8(1), bytes.Replace(good, []byte(`"state":1`), []byte(`"state":7`), 1))
	f.Add(uint8(1), bytes.Replace(good, []byte(`"uploaded":1`), []byte(`"uploaded":2`), 1))
	f.Add(uint8(3), upload)
	f.Add(uint8(3), bytes.Replace(upload, []byte(`hospital-b`), []byte(`hospital-z`), 1))
	f.Add(uint8(3), upload[:len(upload)/2])
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
	ticket := sj.ticket
	f.Add(uint8(4), ticket)
	f.Add(uint8(4), bytes.Replace(ticket, []byte(`"hospital-c"]`), []byte(`"hospital-c","hospital-z"]`), 1))
	f.Add(uint8(4), bytes.Replace(ticket, []byte(`"hospital-c"]`), []byte(`"hospital-z"]`), 1))
	f.Add(uint8(4), bytes.Replace(ticket, []byte(`"owners":[`), []byte(`"owners":["hospital-0",`), 1))
	f.Fuzz(func(t *testing.T, mode uint8, v []byte) {
		switch mode % 5 {
		case 0:
			c, err := decodeCommittee(v, p)
			if err != nil {
				return
			}
			if job.Fingerprint(c.PublicKey) != c.Fingerprint || c.Threshold < 1 || c.Threshold > len(c.Members) {
				t.Fatalf("accepted committee record %+v", c)
			}
		case 1, 3, 4:
			in := sj
			switch mode % 5 {
			case 1:
				in.progress = v
			case 3:
				in.uploads = [][]byte{v}
			case 4:
				in.ticket = v
			}
			j, err := decodeJob(in, p.Chunks, nil)
			if err != nil {
				return
			}
			// What the proxy does with a loaded job must work.
			j.mu.Lock()
			if err := j.spec.CheckOwners(j.owners.Load().Owners()); err != nil {
				t.Fatalf("loaded a job whose owner list is not its spec's: %v", err)
			}
			who := transport.Identity{Role: transport.RoleOwner, ID: j.owners.Load().Owners()[0].ID}
			if _, err := j.status(true, who); err != nil {
				t.Fatal(err)
			}
			if _, err := j.info(who); err != nil {
				t.Fatal(err)
			}
			if _, err := j.uploadedOwners(); err != nil {
				t.Fatal(err)
			}
			r, err := j.ticketResponse(who.ID)
			if err != nil {
				t.Fatal(err)
			}
			pr := r.GetOwnerProof()
			if err := j.spec.CheckMember(j.owners.Load().Owners()[0], job.OwnerProof{Index: int(pr.GetIndex()), Path: pr.GetPath()}); err != nil {
				t.Fatalf("the ticket's proof: %v", err)
			}
			j.mu.Unlock()
			in.progress, _ = json.Marshal(j.rec.jobProgress)
			if _, err := decodeJob(in, p.Chunks, nil); err != nil {
				t.Fatalf("a loaded record does not load again: %v", err)
			}
		case 2:
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
