package owner

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/transport/transporttest"
)

// fuzzOwner is an owner (not running) serving dataset wdbc, and the schema.
func fuzzOwner(f testing.TB, ca *transport.CA, p he.Params, dir string) (*Owner, *schema.Schema) {
	return fuzzOwnerOf(f, ca, p, dir, `{"id":"wdbc","features":[{"name":"a","center":"1.5","scale":"2"},{"name":"b","center":"0","scale":"0.5"}],"label":"label","classes":["x","y"]}`)
}

// fuzzOwnerOf is fuzzOwner of the given schema.
func fuzzOwnerOf(f testing.TB, ca *transport.CA, p he.Params, dir, schemaJSON string) (*Owner, *schema.Schema) {
	sch, err := schema.Parse([]byte(schemaJSON))
	if err != nil {
		f.Fatal(err)
	}
	o, err := New(Config{Dialer: transport.Dialer{Creds: transporttest.Credentials(f, ca, transport.Identity{Role: transport.RoleOwner, ID: "hospital-a"})},
		ProxyAddr: "proxy:7000", Store: dir, Params: &p,
		Datasets: []*Dataset{{Schema: sch, Epsilon: 10, Delta: 1e-6, Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("a,b,label\n")), nil }}},
		Policy:   Policy{Committee: job.CommitteePolicy{Members: []job.MemberPin{{ID: "csp-1", Key: job.Fingerprint([]byte("1"))}, {ID: "csp-2", Key: job.Fingerprint([]byte("2"))}, {ID: "csp-3", Key: job.Fingerprint([]byte("3"))}}}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { o.db.Close() })
	return o, sch
}

// FuzzTicket: the ticket of a job as the proxy hands it to an owner (spec,
// user signature and certificate). The owner takes part only in a job whose
// ID is its spec's hash, for a dataset it serves with exactly its schema,
// signed by the user the spec names; anything else is declined with a
// reason, never a panic.
// ticketCase is a ticket and the reason an owner must give for declining it
// ("" to take part).
type ticketCase struct {
	what   string
	id     string
	spec   []byte
	sig    []byte
	cert   []byte
	proof  *fedpcav1.OwnerProof
	code   job.Decline
	reason string
}

// ticket is the proxy's answer to an owner's ticket request.
func (tc ticketCase) ticket() *fedpcav1.GetJobResponse {
	return &fedpcav1.GetJobResponse{Job: &fedpcav1.JobInfo{Spec: tc.spec, Signature: tc.sig, UserCertificate: tc.cert}, OwnerProof: tc.proof}
}

// ownerList names owners by key: hospital-a, the test's owner o, by its
// own, the others by stand-ins.
func ownerList(o *Owner, ids ...string) []job.Owner {
	var out []job.Owner
	for _, id := range ids {
		key := job.Fingerprint([]byte(id))
		if id == o.cfg.ID {
			key = o.cfg.Dialer.Creds.Key
		}
		out = append(out, job.Owner{ID: id, Key: key})
	}
	return out
}

// proofOf is the inclusion proof the proxy gives owner i of a list.
func proofOf(tb testing.TB, owners []job.Owner, i int) *fedpcav1.OwnerProof {
	t, err := job.NewOwnerTree(owners)
	if err != nil {
		tb.Fatal(err)
	}
	p := t.Proof(i)
	return &fedpcav1.OwnerProof{Index: uint32(p.Index), Path: p.Path}
}

// ticketCases returns an owner serving wdbc and tickets for it: a valid
// one, one for another schema of the same dataset ID, one signed with a
// certificate of the wrong role, one whose ID is not its spec's hash, one of
// another dataset, and the lies of a proxy about the owner list: the proof
// of another owner, a proof from a list other than the signed one, no
// proof, a job whose list does not name this owner (hospital-a).
func ticketCases(tb testing.TB, dir string) (*Owner, []ticketCase) {
	p, err := he.NewDefaultParams()
	if err != nil {
		tb.Fatal(err)
	}
	ca, _ := transport.NewCA("fuzz CA", time.Hour)
	o, sch := fuzzOwner(tb, ca, p, dir)
	alice := transporttest.Credentials(tb, ca, transport.Identity{Role: transport.RoleUser, ID: "alice"})
	proxyAsUser := transporttest.Credentials(tb, ca, transport.Identity{Role: transport.RoleProxy, ID: "alice"})
	h := func(c string) string { return strings.Repeat(c, 64) }
	spec := &job.Spec{Version: job.Version, Dataset: "wdbc", SchemaHash: sch.HashHex(), Analysis: job.DCA, K: 1,
		Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanServers, Split: dp.DiscriminantSplit,
		MinOwners: 1,
		Deadline:  time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxRows: 20_000, MaxOwnerRows: 10_000,
		HEParams: p.ID(), HEParamsHash: p.Fingerprint(), CommitteeN: 1, CommitteeThreshold: 1,
		CommitteeKey: h("c"), User: alice.Identity.String(), UserKey: h("d"), Nonce: "fuzz"}
	owners := ownerList(o, "hospital-a", "hospital-b")
	if err := spec.SetOwners(owners); err != nil {
		tb.Fatal(err)
	}
	sig, _ := spec.Sign(alice.Signer())
	other := *spec
	other.SchemaHash = h("e") // another schema for the same dataset ID
	otherSig, _ := other.Sign(alice.Signer())
	wrongRole, _ := spec.Sign(proxyAsUser.Signer())
	mnist := bytes.Replace(spec.Canonical(), []byte(`"wdbc"`), []byte(`"mnist"`), 1)
	mine := proofOf(tb, owners, 0)
	notMine := *spec
	if err := notMine.SetOwners(ownerList(o, "hospital-b", "hospital-c")); err != nil {
		tb.Fatal(err)
	}
	notMineSig, _ := notMine.Sign(alice.Signer())
	// The user's roster (or a forger's) names hospital-a by another key.
	otherKey := *spec
	forged := []job.Owner{{ID: "hospital-a", Key: job.Fingerprint([]byte("a key the proxy's CA issued"))}, owners[1]}
	if err := otherKey.SetOwners(forged); err != nil {
		tb.Fatal(err)
	}
	otherKeySig, _ := otherKey.Sign(alice.Signer())
	return o, []ticketCase{
		{"valid", spec.ID(), spec.Canonical(), sig, alice.Leaf.Raw, mine, 0, ""},
		{"another schema", other.ID(), other.Canonical(), otherSig, alice.Leaf.Raw, mine, job.DeclineSchemaMismatch, "schema hash eeeeeeeeeeee… differs from this owner's " + sch.HashHex()[:12] + "… for dataset wdbc"},
		{"certificate of the wrong role", spec.ID(), spec.Canonical(), wrongRole, proxyAsUser.Leaf.Raw, mine, job.DeclineInvalidJob, "signed by spiffe://fedpca/proxy/alice, which is not a user"},
		{"ID of another spec", other.ID(), spec.Canonical(), sig, alice.Leaf.Raw, mine, job.DeclineInvalidJob, "the job ID is not the hash of its spec"},
		{"another dataset", job.Fingerprint(mnist), mnist, sig, alice.Leaf.Raw, mine, job.DeclineSchemaMismatch, `does not serve dataset "mnist"`},
		{"signature of another spec", spec.ID(), spec.Canonical(), otherSig, alice.Leaf.Raw, mine, job.DeclineInvalidJob, "signature does not verify"},
		{"the proof of another owner", spec.ID(), spec.Canonical(), sig, alice.Leaf.Raw, proofOf(tb, owners, 1), job.DeclineNotNamed, "is not leaf 1"},
		{"a proof from another list", spec.ID(), spec.Canonical(), sig, alice.Leaf.Raw, proofOf(tb, ownerList(o, "hospital-a", "hospital-z"), 0), job.DeclineNotNamed, "is not leaf 0"},
		{"no proof", spec.ID(), spec.Canonical(), sig, alice.Leaf.Raw, nil, job.DeclineNotNamed, "fewer hashes than the tree is deep"},
		{"a job that does not name this owner", notMine.ID(), notMine.Canonical(), notMineSig, alice.Leaf.Raw, proofOf(tb, ownerList(o, "hospital-b", "hospital-c"), 0), job.DeclineNotNamed, "is not leaf 0"},
		{"a job that names this owner by another key", otherKey.ID(), otherKey.Canonical(), otherKeySig, alice.Leaf.Raw, proofOf(tb, forged, 0), job.DeclineNotNamed,
			"the job does not name this owner by its key " + o.cfg.Dialer.Creds.Key},
	}
}

// TestCheckTicket: an owner declines, with the right public code and the
// detail in its own record, a job for another schema of its dataset, a
// ticket signed with a certificate of the wrong role or for another spec,
// an ID that is not the spec's; and, with the public code not_named, a job
// whose signed owner list does not name it as far as the proxy's proof
// shows (another owner's proof, a proof from another list, none).
func TestCheckTicket(t *testing.T) {
	o, cases := ticketCases(t, t.TempDir())
	for _, tc := range cases {
		s, _, _, r := o.checkTicket(tc.id, tc.ticket())
		if (s != nil) != (tc.reason == "") || (r != nil && (r.code != tc.code || !strings.Contains(r.detail, tc.reason))) {
			t.Errorf("%s: took part %v, refusal %+v, want %s %q", tc.what, s != nil, r, tc.code, tc.reason)
		}
	}
}

func FuzzTicket(f *testing.F) {
	o, cases := ticketCases(f, f.TempDir())
	for _, tc := range cases {
		f.Add(tc.id, tc.spec, tc.sig, tc.cert, tc.proof.GetIndex(), bytes.Join(tc.proof.GetPath(), nil))
	}
	f.Add("short", cases[0].spec, cases[0].sig, cases[0].cert, uint32(0), []byte{})
	f.Fuzz(func(t *testing.T, id string, specB, sig, cert []byte, index uint32, path []byte) {
		proof := &fedpcav1.OwnerProof{Index: index}
		for len(path) > 0 {
			n := min(len(path), 32)
			proof.Path, path = append(proof.Path, path[:n]), path[n:]
		}
		s, ds, _, r := o.checkTicket(id, &fedpcav1.GetJobResponse{Job: &fedpcav1.JobInfo{Spec: specB, Signature: sig, UserCertificate: cert}, OwnerProof: proof})
		if s == nil {
			if r == nil || r.detail == "" {
				t.Fatal("declined without a reason")
			}
			if _, err := job.ParseDecline(int32(r.code)); err != nil {
				t.Fatalf("declined with an unknown code: %v", err)
			}
			return
		}
		if r != nil || s.ID() != id || ds.Schema.HashHex() != s.SchemaHash || s.Dataset != ds.Schema.ID {
			t.Fatalf("took part in job %q (%s): %+v", id, s.ID(), r)
		}
		if _, err := transport.VerifyTicket(o.cfg.Dialer.Creds, s, sig, cert); err != nil {
			t.Fatalf("took part in a job not signed by its user: %v", err)
		}
		if err := s.CheckMember(job.Owner{ID: o.cfg.ID, Key: o.cfg.Dialer.Creds.Key}, job.OwnerProof{Index: int(index), Path: proof.Path}); err != nil {
			t.Fatalf("took part in a job whose owner list does not name it: %v", err)
		}
	})
}

// FuzzStoreRecords: what an owner reads back from its store (ledger entries
// and job notes). A torn or edited record is an error: it never makes budget
// appear, never makes the owner read an unbounded number of ciphertexts.
func FuzzStoreRecords(f *testing.F) {
	p, err := he.NewDefaultParams()
	if err != nil {
		f.Fatal(err)
	}
	ca, _ := transport.NewCA("fuzz CA", time.Hour)
	o, _ := fuzzOwner(f, ca, p, f.TempDir())
	at := time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)
	e, _ := json.Marshal(entry{Job: strings.Repeat("ab", 32), Rho: 0.01, Epsilon: 1, Delta: 1e-6, State: Committed, At: at})
	n, _ := json.Marshal(jobNote{State: PartUploading, Dataset: "wdbc", Blobs: 2, At: at})
	f.Add(uint8(0), e)
	f.Add(uint8(0), bytes.Replace(e, []byte(`"rho":0.01`), []byte(`"rho":-5`), 1))
	f.Add(uint8(0), bytes.Replace(e, []byte(`committed`), []byte(`spent`), 1))
	f.Add(uint8(1), n)
	f.Add(uint8(1), bytes.Replace(n, []byte(`"blobs":2`), []byte(`"blobs":4611686018427387904`), 1))
	f.Add(uint8(1), n[:10])
	e2, _ := json.Marshal(entry{Job: strings.Repeat("cd", 32), Cost: &dp.Cost{Rho: 0.01, Eta: 1e-9, Tail: 1e-23}, Rho: 0.01, Epsilon: 1, Delta: 1e-6, State: Reserved, At: at})
	f.Add(uint8(0), e2)
	f.Add(uint8(0), bytes.Replace(e2, []byte(`"eta":1e-9`), []byte(`"eta":-1`), 1))
	var tot ledgerTotals
	tot.Reserved.Rho.SetFloat64(0.1)
	tot.Spent.Rho.SetFloat64(1e-300)
	tot.Spent.Eta.SetFloat64(1e-10)
	tv, _ := encodeTotals(&tot)
	f.Add(uint8(2), tv)
	f.Add(uint8(2), bytes.Replace(tv, []byte(`"Reserved":"1/10"`), []byte(`"Reserved":"-1/3"`), 1))
	f.Add(uint8(2), bytes.Replace(tv, []byte(`"Reserved":"1/10"`), []byte(`"Reserved":"1e999999999"`), 1))
	f.Fuzz(func(t *testing.T, mode uint8, v []byte) {
		if mode%3 == 2 {
			got, err := decodeTotals(v)
			if err != nil {
				return
			}
			for _, s := range []*costSum{&got.Reserved, &got.Spent} {
				if s.Rho.Sign() < 0 || s.Eta.Sign() < 0 || s.Tail.Sign() < 0 {
					t.Fatalf("accepted totals %+v", got)
				}
			}
			enc, err := encodeTotals(got)
			if err != nil {
				t.Fatal(err)
			}
			back, err := decodeTotals(enc)
			if err != nil || back.Reserved.Rho.Cmp(&got.Reserved.Rho) != 0 || back.Spent.Tail.Cmp(&got.Spent.Tail) != 0 {
				t.Fatalf("accepted totals %s re-encode to %s: %v", v, enc, err)
			}
			return
		}
		if mode%3 == 0 {
			e, err := decodeEntry(v)
			if err != nil {
				return
			}
			if c := e.cost(); !(e.Rho >= 0) || e.Rho > 1e308 || e.Job == "" || !c.Valid() || math.IsInf(float64(c.Rho+c.Eta+c.Tail), 0) {
				t.Fatalf("accepted entry %+v", e)
			}
			return
		}
		nt, err := o.decodeNote(v)
		if err != nil {
			return
		}
		if nt.Blobs < 0 || nt.Blobs > 1<<14 {
			t.Fatalf("accepted note %+v", nt)
		}
	})
}
