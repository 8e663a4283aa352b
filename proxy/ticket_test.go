package proxy

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/transport/transporttest"
)

// ticketJob returns an open job of n owners as CreateJob stores it, signed
// with a real user certificate, over a schema of d features: what every
// owner's ticket holds.
// keyedOwners names owners by stand-in keys (the SHA-256 of each ID).
func keyedOwners(ids []string) []job.Owner {
	out := make([]job.Owner, len(ids))
	for i, id := range ids {
		out[i] = job.Owner{ID: id, Key: job.Fingerprint([]byte(id))}
	}
	return out
}

func ticketJob(tb testing.TB, n, d int) (*jobState, []string) {
	tb.Helper()
	features := make([]string, d)
	for i := range features {
		features[i] = fmt.Sprintf(`{"name":"feature-%02d","center":"0.25","scale":"1.5"}`, i)
	}
	sch, err := schema.Parse([]byte(`{"id":"synthetic","features":[` + strings.Join(features, ",") + `],"label":"label","classes":["x","y"]}`))
	if err != nil {
		tb.Fatal(err)
	}
	ca, err := transport.NewCA("ticket CA", time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	alice := transporttest.Credentials(tb, ca, transport.Identity{Role: transport.RoleUser, ID: "alice"})
	owners := make([]string, n)
	for i := range owners {
		owners[i] = fmt.Sprintf("owner-%05d", i)
	}
	h := func(c string) string { return strings.Repeat(c, 64) }
	s := &job.Spec{Version: job.Version, Dataset: sch.ID, SchemaHash: sch.HashHex(), Analysis: job.PCA, K: 2,
		Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanServers, Split: dp.DefaultSplit, MinOwners: n,
		Deadline: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxOwnerRows: 1000,
		HEParams: he.DefaultParamsID, HEParamsHash: h("b"), CommitteeN: 3, CommitteeThreshold: 2,
		CommitteeKey: h("c"), User: alice.Identity.String(), UserKey: h("d"), Nonce: "0123456789abcdef01234567"}
	if err := s.SetOwners(keyedOwners(owners)); err != nil {
		tb.Fatal(err)
	}
	if err := s.SetOwnerRows(1000); err != nil {
		tb.Fatal(err)
	}
	sig, err := s.Sign(alice.Signer())
	if err != nil {
		tb.Fatal(err)
	}
	at := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	rec := jobRecord{
		jobTicket:   jobTicket{Spec: s.Canonical(), Signature: sig, UserCert: alice.Leaf.Raw, Schema: sch.Canonical(), Owners: keyedOwners(owners), Created: at},
		jobProgress: jobProgress{State: fedpcav1.JobState_JOB_STATE_OPEN, Reason: "waiting for uploads", Updated: at},
	}
	j, err := newJobState(s.ID(), rec, nil, nil, func(int) int { return 1 }, nil, false)
	if err != nil {
		tb.Fatal(err)
	}
	return j, owners
}

// ticketBytes is the size of an owner's ticket response (what the owner
// receives for a job before it uploads: the shared ticket and its proof),
// and of the proof in it.
func ticketBytes(tb testing.TB, j *jobState, owner string) (total, proof int) {
	tb.Helper()
	j.mu.Lock()
	defer j.mu.Unlock()
	r, err := j.ticketResponse(owner)
	if err != nil {
		tb.Fatal(err)
	}
	return proto.Size(r), proto.Size(&fedpcav1.GetJobResponse{OwnerProof: r.GetOwnerProof()})
}

// TestTicketBytes: the ticket an owner receives does not grow with the
// number of owners, apart from its inclusion proof (ceil(log2 n) hashes of
// 34 bytes on the wire) and the digits of the numbers that count owners or
// rows (num_owners, min_owners, max_rows, owners_expected) and of the
// certificate's random fields: within 32 bytes. (Spec version 1 carried
// the list, 14 bytes an owner here, in every owner's ticket.)
func TestTicketBytes(t *testing.T) {
	var base int
	for _, n := range []int{1, 10, 100, 1000, 10_000} {
		j, owners := ticketJob(t, n, 50)
		for _, o := range []string{owners[0], owners[n-1]} {
			total, proof := ticketBytes(t, j, o)
			if base == 0 {
				base = total - proof
			}
			if rest := total - proof; rest < base-8 || rest > base+32 {
				t.Errorf("%d owners: %d bytes besides the proof, %d at 1 owner", n, rest, base)
			}
			if hashes := len(j.owners.Load().Proof(0).Path); proof > 2+hashes*34+4 {
				t.Errorf("%d owners: a proof of %d bytes for %d hashes", n, proof, hashes)
			}
		}
	}
}

// BenchmarkTicket reports the bytes an owner receives for a job (its
// ticket: the spec, the user's signature and certificate, a d = 50 schema,
// the status fields fixed at creation, and its inclusion proof) and the
// proxy's time to answer it, for 10 to 10,000 owners; see
// docs/BENCHMARKS.md ("Bytes per owner per job").
func BenchmarkTicket(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10_000} {
		b.Run(fmt.Sprintf("owners=%d", n), func(b *testing.B) {
			j, owners := ticketJob(b, n, 50)
			total, proof := ticketBytes(b, j, owners[0]) // the deepest leaf
			b.ResetTimer()
			for i := range b.N {
				j.mu.Lock()
				if _, err := j.ticketResponse(owners[i%n]); err != nil {
					b.Fatal(err)
				}
				j.mu.Unlock()
			}
			b.ReportMetric(float64(total), "bytes/owner")
			b.ReportMetric(float64(proof), "proof-bytes/owner")
			b.ReportMetric(float64(total)*float64(n), "bytes/job")
			// What spec version 1 added to every owner's ticket: the list.
			list, _ := json.Marshal(owners)
			b.ReportMetric(float64(len(list)), "v1-list-bytes/owner")
		})
	}
}

// TestTicketUnsharedWhenJobEnds: a job's shared ticket is released when the
// job ends (a daemon that finished a thousand jobs keeps no encoding for
// them), and an ended job's ticket is served without being shared again.
func TestTicketUnsharedWhenJobEnds(t *testing.T) {
	j, owners := ticketJob(t, 4, 3)
	before := transport.SharedLen()
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.ticketResponse(owners[0]); err != nil {
		t.Fatal(err)
	}
	if got := transport.SharedLen(); got != before+1 {
		t.Fatalf("open job: %d shared encodings, want %d", got, before+1)
	}
	p := &Proxy{hub: newWatchHub(1, "test"), store: storeWith(t, j), log: hclog.NewNullLogger()}
	done := func(prog *jobProgress) { prog.State = fedpcav1.JobState_JOB_STATE_DONE }
	if err := p.commit(j, done, func(*jobProgress) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := transport.SharedLen(); got != before {
		t.Fatalf("ended job: %d shared encodings, want %d", got, before)
	}
	r, err := j.ticketResponse(owners[1])
	if err != nil {
		t.Fatal(err)
	}
	if r.GetJob().GetStatus().GetJobId() != j.id || transport.SharedLen() != before {
		t.Fatalf("ended job's ticket: job %q, %d shared encodings, want %q and %d", r.GetJob().GetStatus().GetJobId(), transport.SharedLen(), j.id, before)
	}
	pr := r.GetOwnerProof()
	if !j.archived() {
		t.Fatal("the ended job was not archived")
	}
	if err := j.spec.CheckMember(keyedOwners(owners)[1], job.OwnerProof{Index: int(pr.GetIndex()), Path: pr.GetPath()}); err != nil {
		t.Fatalf("an archived job's ticket: %v", err)
	}
}

// storeWith returns a store in a test directory that holds job j (created
// as CreateJob stores it), and makes it j's store.
func storeWith(tb testing.TB, j *jobState) *store {
	tb.Helper()
	st := openTestStore(tb, filepath.Join(tb.TempDir(), "proxy.db"))
	if err := st.createJob(j.id, &j.rec, []byte("user key"), nil); err != nil {
		tb.Fatal(err)
	}
	j.store = st
	return st
}
