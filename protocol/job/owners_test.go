package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
)

func names(n int) []Owner {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("owner-%05d", i)
	}
	return keyed(out...)
}

// keyed names owners by ID and a key of their own (a stand-in fingerprint,
// the SHA-256 of the ID).
func keyed(ids ...string) []Owner {
	out := make([]Owner, len(ids))
	for i, id := range ids {
		out[i] = Owner{ID: id, Key: Fingerprint([]byte(id))}
	}
	return out
}

// mth is RFC 9162's definition of the tree hash (section 2.1.1), written
// as the RFC states it, against which the level-wise tree is checked.
func mth(ids []Owner) digest {
	if len(ids) == 1 {
		return leafHash(ids[0])
	}
	k := 1
	for k*2 < len(ids) {
		k *= 2
	}
	l, r := mth(ids[:k]), mth(ids[k:])
	return nodeHash(l[:], r[:])
}

// TestOwnerTree: the root is RFC 9162's, every owner's proof verifies for
// that owner and index only, and a proof is ceil(log2 n) hashes at most.
func TestOwnerTree(t *testing.T) {
	for n := 1; n <= 70; n++ {
		ids := names(n)
		tr, err := NewOwnerTree(ids)
		if err != nil {
			t.Fatal(err)
		}
		want := mth(ids)
		if tr.Root() != hex.EncodeToString(want[:]) {
			t.Fatalf("n=%d: root %s, RFC 9162 gives %x", n, tr.Root(), want)
		}
		depth := 0
		for 1<<depth < n {
			depth++
		}
		for i, id := range ids {
			p := tr.Proof(i)
			if len(p.Path) > depth {
				t.Fatalf("n=%d: proof of %d hashes, depth %d", n, len(p.Path), depth)
			}
			if err := VerifyOwnerProof(tr.Root(), n, id, p); err != nil {
				t.Fatalf("n=%d i=%d: %v", n, i, err)
			}
			if VerifyOwnerProof(tr.Root(), n, Owner{ID: id.ID, Key: Fingerprint([]byte("another key"))}, p) == nil {
				t.Fatalf("n=%d: the proof of %s verifies with another key", n, id.ID)
			}
			if VerifyOwnerProof(tr.Root(), n, Owner{ID: id.ID}, p) == nil {
				t.Fatalf("n=%d: the proof of %s verifies without its key", n, id.ID)
			}
			if n > 1 {
				other := (i + 1) % n
				if VerifyOwnerProof(tr.Root(), n, ids[other], p) == nil {
					t.Fatalf("n=%d: the proof of %d verifies for %d", n, i, other)
				}
				if VerifyOwnerProof(tr.Root(), n, id, OwnerProof{Index: other, Path: p.Path}) == nil {
					t.Fatalf("n=%d: the proof of %d verifies at index %d", n, i, other)
				}
			}
			if VerifyOwnerProof(strings.Repeat("0", 64), n, id, p) == nil {
				t.Fatalf("n=%d: verified against a wrong root", n)
			}
		}
	}
}

func mustTree(t *testing.T, ids []Owner) *OwnerTree {
	t.Helper()
	tr, err := NewOwnerTree(ids)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestCheckOwners: the list a spec commits to is accepted, any other one
// (an owner added, removed, replaced or moved) is refused.
func TestCheckOwners(t *testing.T) {
	s := fuzzSpec()
	if err := s.CheckOwners(fuzzOwners); err != nil {
		t.Fatal(err)
	}
	rekeyed := keyed("hospital-a", "hospital-b", "hospital-c")
	rekeyed[1].Key = Fingerprint([]byte("a key the proxy's CA issued"))
	mixed := keyed("hospital-a", "hospital-b", "hospital-c")
	mixed[2].Key = ""
	for _, c := range []struct {
		list []Owner
		want string
	}{
		{keyed("hospital-a", "hospital-b", "hospital-c", "hospital-z"), "commits to 3"},
		{keyed("hospital-a", "hospital-b"), "commits to 3"},
		{keyed("hospital-a", "hospital-b", "hospital-z"), "not the spec's owners_root"},
		{rekeyed, "not the spec's owners_root"},
		{[]Owner{{ID: "hospital-a"}, {ID: "hospital-b"}, {ID: "hospital-c"}}, "not the spec's owners_root"},
		{mixed, `hospital-c: key "" is not a 64-hex-digit fingerprint`},
		{keyed("hospital-b", "hospital-a", "hospital-c"), "sorted"},
		{keyed("hospital-a", "hospital-a", "hospital-c"), "sorted"},
		{keyed("hospital-a", "hospital b", "hospital-c"), "not a valid id"},
		{[]Owner{{ID: "hospital-a", Key: "abc"}, {ID: "hospital-b", Key: "abc"}, {ID: "hospital-c", Key: "abc"}}, "not a 64-hex-digit fingerprint"},
	} {
		if err := s.CheckOwners(c.list); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error containing %q", c.list, err, c.want)
		}
	}
	// The job ID commits to the list: another list, another job.
	other := fuzzSpec()
	if err := other.SetOwners(keyed("hospital-a", "hospital-b", "hospital-z")); err != nil {
		t.Fatal(err)
	}
	if other.ID() == s.ID() {
		t.Fatal("two owner lists, one job ID")
	}
}

// TestOwnerProofBytes: an owner's proof grows with log2 of the owners only.
func TestOwnerProofBytes(t *testing.T) {
	for _, c := range []struct{ n, hashes int }{{1, 0}, {10, 4}, {100, 7}, {1000, 10}, {10_000, 14}, {MaxOwners, MaxProofHashes}} {
		tr := mustTree(t, names(c.n))
		if got := len(tr.Proof(c.n - 1).Path); got > c.hashes || len(tr.Proof(0).Path) != c.hashes {
			t.Errorf("%d owners: proofs of %d and %d hashes, want %d", c.n, len(tr.Proof(0).Path), got, c.hashes)
		}
	}
}

// FuzzOwnerProof: a proof as an owner receives it from the proxy (index,
// hashes, and a list size, which the signed spec fixes) against the root of
// a real list. The owner's verification accepts the proxy's honest proof of
// the owner at its index, and nothing else: never another owner or index,
// an edited or malformed proof (nor does it panic).
func FuzzOwnerProof(f *testing.F) {
	f.Add(uint16(10), 3, "owner-00003", uint16(0), []byte{}, byte(0))
	f.Add(uint16(10), 3, "owner-00004", uint16(0), []byte{}, byte(0))
	f.Add(uint16(1000), 999, "owner-00999", uint16(1000), []byte{}, byte(0))
	f.Add(uint16(7), 6, "owner-00006", uint16(7), []byte{}, byte(1))
	f.Add(uint16(7), 6, "owner-00006", uint16(7), bytes.Repeat([]byte{1}, 32), byte(2))
	f.Add(uint16(5), 0, "owner-00000", uint16(5), []byte{}, byte(3))
	f.Fuzz(func(t *testing.T, n uint16, index int, owner string, size uint16, extra []byte, edit byte) {
		ids := names(int(n%2000) + 1)
		tr := mustTree(t, ids)
		honest := index >= 0 && index < len(ids)
		var p OwnerProof
		if honest {
			p = tr.Proof(index)
		} else {
			p = OwnerProof{Index: index}
		}
		// Edit the proof: drop a hash, add one, flip a bit.
		switch edit % 4 {
		case 1:
			if len(p.Path) > 0 {
				p.Path = p.Path[:len(p.Path)-1]
			}
		case 2:
			p.Path = append(p.Path, extra)
		case 3:
			if len(p.Path) > 0 {
				h := bytes.Clone(p.Path[0])
				h[int(size)%len(h)] ^= 1
				p.Path[0] = h
			}
		}
		edited := edit%4 == 2 || (edit%4 != 0 && len(tr.Proof(max(0, min(index, len(ids)-1))).Path) > 0)
		claimed := int(size)
		if size == 0 {
			claimed = len(ids)
		}
		o := Owner{ID: owner, Key: Fingerprint([]byte(owner))}
		if len(extra) > 0 && extra[0] == 0 {
			o.Key = Fingerprint(extra) // the right name with another key
		}
		err := VerifyOwnerProof(tr.Root(), claimed, o, p)
		if err != nil {
			if honest && !edited && o == ids[index] && claimed == len(ids) {
				t.Fatalf("the honest proof of %s (index %d of %d) fails: %v", owner, index, len(ids), err)
			}
			return
		}
		if !honest || o != ids[index] {
			t.Fatalf("accepted %v at index %d of %d", o, index, len(ids))
		}
		if edited {
			t.Fatalf("accepted an edited proof (edit %d) of %s", edit%4, owner)
		}
		if len(p.Path) > MaxProofHashes {
			t.Fatalf("accepted %d hashes", len(p.Path))
		}
		for _, h := range p.Path {
			if len(h) != sha256.Size {
				t.Fatalf("accepted a hash of %d bytes", len(h))
			}
		}
	})
}
