package csp

import (
	"bytes"
	"encoding/json"
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
	"github.com/fedpca/fedpca/transport/transporttest"
)

// FuzzKeySwitchHeader: the header of a key-switch request, everything a
// member checks before it computes shares (the signed spec, the user's
// certificate and key, the schema, the active set, the job's owner list
// and the included owners, the ciphertext count). Whatever is accepted was
// signed by the user the spec names, switches to the key the spec names,
// for this member's committee, and includes only owners of the list the
// spec commits to.
func FuzzKeySwitchHeader(f *testing.F) {
	p, err := he.NewDefaultParams()
	if err != nil {
		f.Fatal(err)
	}
	ca, _ := transport.NewCA("fuzz CA", time.Hour)
	self := transporttest.Credentials(f, ca, transport.Identity{Role: transport.RoleCSP, ID: "csp-1"})
	alice := transporttest.Credentials(f, ca, transport.Identity{Role: transport.RoleUser, ID: "alice"})
	eve := transporttest.Credentials(f, ca, transport.Identity{Role: transport.RoleOwner, ID: "alice"})
	userPK := p.Codecs().PublicKey.Marshal(he.GenerateKeyPair(p).Public)
	otherPK := p.Codecs().PublicKey.Marshal(he.GenerateKeyPair(p).Public)
	cpk := p.Codecs().PublicKey.Marshal(he.GenerateKeyPair(p).Public)
	sch, err := schema.Parse([]byte(`{"id":"wdbc","features":[{"name":"a","center":"1.5","scale":"2"},{"name":"b","center":"0","scale":"0.5"}],"label":"label","classes":["x","y"]}`))
	if err != nil {
		f.Fatal(err)
	}
	spec := &job.Spec{Version: job.Version, Dataset: "wdbc", SchemaHash: sch.HashHex(), Analysis: job.PCA, K: 1,
		Epsilon: 1, Delta: 1e-6, NoisePlan: dp.PlanServers, Split: dp.DefaultSplit,
		MinOwners: 2,
		Deadline:  time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxRows: 30_000, MaxOwnerRows: 10_000,
		HEParams: p.ID(), HEParamsHash: p.Fingerprint(), CommitteeN: 3, CommitteeThreshold: 2,
		CommitteeKey: job.Fingerprint(cpk), User: alice.Identity.String(), UserKey: job.Fingerprint(userPK), Nonce: "fuzz"}
	var all []job.Owner
	for _, id := range []string{"hospital-a", "hospital-b", "hospital-c"} {
		all = append(all, job.Owner{ID: id, Key: job.Fingerprint([]byte(id))})
	}
	if err := spec.SetOwners(all); err != nil {
		f.Fatal(err)
	}
	if err := spec.Check(sch, p); err != nil {
		f.Fatal(err)
	}
	sig, _ := spec.Sign(alice.Signer())
	eveSig, _ := spec.Sign(eve.Signer())
	c := &CSP{cfg: Config{ID: "csp-1", Creds: self}, params: p}
	st := &secretFile{Fingerprint: job.Fingerprint(cpk), Secret: he.SecretState{Point: 1, N: 3, Threshold: 2}}
	id, canon, sc := spec.ID(), spec.Canonical(), sch.Canonical()
	valid := &fedpcav1.KeySwitchHeader{JobId: id, Spec: canon, Signature: sig, UserCertificate: alice.Leaf.Raw, UserPublicKey: userPK,
		Schema: sc, Active: []uint32{1, 2}, Owners: []string{"hospital-a", "hospital-c"}, Ciphertexts: 1, JobOwnerRefs: transport.OwnerRefs(all)}
	if _, err := c.checkHeader(valid, st); err != nil {
		f.Fatalf("valid header refused: %v", err)
	}
	// An owner list is "ID=KEY,...".
	var entries []string
	for _, o := range all {
		entries = append(entries, o.ID+"="+o.Key)
	}
	list := strings.Join(entries, ",")
	rekeyed := strings.Replace(list, all[1].Key, job.Fingerprint([]byte("a key the proxy's CA issued")), 1)
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(0), sc, []byte{1, 2}, "hospital-a,hospital-c", list, uint32(1))                               // valid
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(0), sc, []byte{1, 2}, "hospital-a,hospital-z", list+",hospital-z="+all[0].Key, uint32(1))     // an owner added
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(0), sc, []byte{1, 2}, "hospital-a,hospital-z", "hospital-a,hospital-b,hospital-z", uint32(1)) // replaced
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(0), sc, []byte{1, 2}, "hospital-a,hospital-b", rekeyed, uint32(1))                            // an owner's key replaced
	f.Add(id, canon, eveSig, eve.Leaf.Raw, uint8(0), sc, []byte{1, 2}, "hospital-a,hospital-c", list, uint32(1))                              // wrong role
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(1), sc, []byte{1, 2}, "hospital-a,hospital-c", list, uint32(1))                               // another key
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(2), sc, []byte{1, 2}, "hospital-a,hospital-c", list, uint32(1))                               // truncated key
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(0), sc, []byte{2, 3}, "hospital-a,hospital-c", list, uint32(1))
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(0), sc, []byte{1, 1}, "hospital-a,hospital-c", list, uint32(1))
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(0), sc, []byte{1, 2}, "hospital-a,hospital-a", list, uint32(1))
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(0), sc, []byte{1, 2}, "hospital-a,hospital-c", list, uint32(2))
	f.Add(id, canon, sig, alice.Leaf.Raw, uint8(0), bytes.Replace(sc, []byte(`"0.5"`), []byte(`"0.25"`), 1), []byte{1, 2}, "hospital-a,hospital-c", list, uint32(1))
	f.Add(strings.Repeat("0", 64), canon, sig, alice.Leaf.Raw, uint8(0), sc, []byte{1, 2}, "hospital-a,hospital-c", list, uint32(1))
	f.Fuzz(func(t *testing.T, jobID string, specB, sig, cert []byte, key uint8, schemaB, active []byte, owners, jobOwners string, n uint32) {
		pk := userPK
		switch key % 3 {
		case 1:
			pk = otherPK
		case 2:
			pk = userPK[:len(userPK)/2]
		}
		var refs []*fedpcav1.OwnerRef
		for _, e := range strings.Split(jobOwners, ",") {
			id, key, _ := strings.Cut(e, "=")
			refs = append(refs, &fedpcav1.OwnerRef{Id: id, Key: key})
		}
		hd := &fedpcav1.KeySwitchHeader{JobId: jobID, Spec: specB, Signature: sig, UserCertificate: cert, UserPublicKey: pk,
			Schema: schemaB, Owners: strings.Split(owners, ","), Ciphertexts: n, JobOwnerRefs: refs}
		for _, a := range active {
			hd.Active = append(hd.Active, uint32(a))
		}
		chk, err := c.checkHeader(hd, st)
		if err != nil {
			return
		}
		s := chk.spec
		if s.ID() != jobID || job.Fingerprint(pk) != s.UserKey || s.CommitteeKey != st.Fingerprint {
			t.Fatal("accepted a header for another job, user key or committee")
		}
		if _, err := transport.VerifyTicket(self, s, sig, cert); err != nil {
			t.Fatalf("accepted a ticket that does not verify: %v", err)
		}
		if jobOwners != list {
			t.Fatalf("accepted the owner list %q, the spec commits to %q", jobOwners, list)
		}
		for _, o := range all {
			if chk.keys[o.ID] != o.Key && slices.Contains(chk.owners, o.ID) {
				t.Fatalf("owner %s would be held to key %s, the spec names %s", o.ID, chk.keys[o.ID], o.Key)
			}
		}
		if err := s.CheckIncluded(all, chk.owners); err != nil || chk.n != int(n) || !bytes.Equal(chk.sch.Canonical(), schemaB) && chk.sch.HashHex() != s.SchemaHash {
			t.Fatalf("accepted owners %v, %d ciphertexts: %v", chk.owners, n, err)
		}
	})
}

// FuzzStoreRecords: what a member reads back at start and for each switch:
// its secret file, the binding of its switch log to its key and the audit
// records of its switches. A torn or edited record gives an error, never a
// panic or a member that cannot switch.
func FuzzStoreRecords(f *testing.F) {
	p, err := he.NewDefaultParams()
	if err != nil {
		f.Fatal(err)
	}
	members, cpk, err := he.LocalCeremony(p, he.Committee{N: 3, Threshold: 2}, []byte("fedpca fuzz ceremony seed 000001"))
	if err != nil {
		f.Fatal(err)
	}
	cpkb := p.Codecs().PublicKey.Marshal(cpk)
	refs := []*fedpcav1.MemberRef{{Id: "csp-1", Point: 1}, {Id: "csp-2", Point: 2}, {Id: "csp-3", Point: 3}}
	secret, _ := json.Marshal(secretFile{CeremonyID: "c1", HEParams: p.ID(), Members: refs, Secret: members[1].SecretState(),
		CommitteeKey: cpkb, Fingerprint: job.Fingerprint(cpkb), MemberKeys: []string{job.Fingerprint([]byte("1")), job.Fingerprint([]byte("2")), job.Fingerprint([]byte("3"))}, Attestation: &fedpcav1.KeyAttestation{Member: "csp-2", Point: 2}, FinalizedAt: time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)})
	if _, _, err := decodeSecrets(secret, p); err != nil {
		f.Fatalf("valid secret file refused: %v", err)
	}
	f.Add(uint8(0), secret)
	f.Add(uint8(0), secret[:len(secret)-100])
	f.Add(uint8(0), bytes.Replace(secret, []byte(`"N":3`), []byte(`"N":2`), 1))
	f.Add(uint8(0), bytes.Replace(secret, []byte(`"Point":2`), []byte(`"Point":4`), 1))
	id := strings.Repeat("ab", 32)
	rec, _ := json.Marshal(switchRecord{JobID: id, User: "spiffe://fedpca/user/alice", Dataset: "wdbc", Analysis: "pca",
		Digest: strings.Repeat("cd", 32), Active: []uint32{1, 2}, Owners: 2, Ciphertexts: 1, At: time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)})
	if _, err := decodeSwitchRecord(id, rec); err != nil {
		f.Fatalf("valid switch record refused: %v", err)
	}
	f.Add(uint8(1), rec)
	f.Add(uint8(1), bytes.Replace(rec, []byte(`"ciphertexts":1`), []byte(`"ciphertexts":-1`), 1))
	bind, _ := json.Marshal(logBinding{Member: "csp-2", Ceremony: "c1", Point: 2, CommitteeKey: job.Fingerprint(cpkb)})
	if _, err := decodeBinding(bind); err != nil {
		f.Fatalf("valid switch log binding refused: %v", err)
	}
	f.Add(uint8(2), bind)
	f.Add(uint8(2), bytes.Replace(bind, []byte(`"point":2`), []byte(`"point":0`), 1))
	f.Fuzz(func(t *testing.T, mode uint8, v []byte) {
		switch mode % 3 {
		case 2:
			lb, err := decodeBinding(v)
			if err != nil {
				return
			}
			if lb.Point < 1 || !job.ValidJobID(lb.CommitteeKey) || lb.Ceremony == "" {
				t.Fatalf("accepted binding %+v", lb)
			}
		case 0:
			st, m, err := decodeSecrets(v, p)
			if err != nil {
				if strings.Contains(err.Error(), `"SecretKey"`) {
					t.Fatalf("error quotes the secrets: %v", err)
				}
				return
			}
			if !m.Ready() || job.Fingerprint(st.CommitteeKey) != st.Fingerprint || m.Point() != st.Secret.Point {
				t.Fatal("accepted a secret file for a member that cannot switch")
			}
		default:
			r, err := decodeSwitchRecord(id, v)
			if err != nil {
				return
			}
			if r.JobID != id || r.Ciphertexts < 1 {
				t.Fatalf("accepted record %+v", r)
			}
		}
	})
}
