package job

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The spec commits to its owners without naming them: OwnersRoot is the
// root of a Merkle tree over the owners, each by its ID and its key
// fingerprint, sorted by ID, and NumOwners their
// number, both covered by the job ID and so by the user's signature. The
// full list travels only to those who need it (the proxy, the committee and
// the user, each of which recomputes the root); an owner receives the spec
// and its own inclusion proof, ceil(log2 n) hashes, and checks that its ID is
// the proven leaf, with its own key. What an owner downloads for a job is
// therefore independent of the number of owners up to that proof.
//
// The user names each owner by its key (from the user's own roster, never
// from the proxy): every member holds each owner's upload statement to the
// key the signed list gives it, so a certificate with the owner's name and
// another key (issued by whoever holds a CA) signs nothing a member accepts.
//
// The tree is RFC 9162's (Certificate Transparency 2.0, section 2.1), with
// SHA-256 and its domain separation: a leaf hashes 0x00 || owner ID || 0x00
// || key (hex; an ID holds no 0x00, and a keyless owner of insecure mode
// hashes 0x00 || ID), an inner node 0x01 || left || right, and a tree of n >
// 1 leaves splits at the largest power of two below n (so that no two lists
// share a root, and a leaf is never mistaken for a node).

// Owner names a job's owner: its ID and the fingerprint of its certificate's
// key (hex SHA-256 of the SubjectPublicKeyInfo; empty only in insecure mode,
// where nothing is signed).
type Owner struct {
	ID  string `json:"id"`
	Key string `json:"key,omitempty"`
}

// UnmarshalJSON reads an owner as {"id", "key"}, or as a bare ID (a record
// of an earlier release, whose spec then fails its version check, which
// says what to do).
func (o *Owner) UnmarshalJSON(b []byte) error {
	var id string
	if json.Unmarshal(b, &id) == nil {
		*o = Owner{ID: id}
		return nil
	}
	type plain Owner
	return json.Unmarshal(b, (*plain)(o))
}

// String is "ID (key 1234abcd…)", for messages.
func (o Owner) String() string {
	if o.Key == "" {
		return o.ID
	}
	return o.ID + " (key " + o.Key + ")"
}

// OwnerIDs returns the owners' IDs, in order.
func OwnerIDs(owners []Owner) []string {
	out := make([]string, len(owners))
	for i, o := range owners {
		out[i] = o.ID
	}
	return out
}

// MaxProofHashes bounds an inclusion proof: the depth of a tree of
// MaxOwners leaves.
const MaxProofHashes = 17

const (
	leafPrefix = 0x00
	nodePrefix = 0x01
)

type digest = [sha256.Size]byte

func leafHash(o Owner) digest {
	h := sha256.New()
	h.Write([]byte{leafPrefix})
	h.Write([]byte(o.ID))
	if o.Key != "" {
		h.Write([]byte{0})
		h.Write([]byte(o.Key))
	}
	return digest(h.Sum(nil))
}

func nodeHash(l, r []byte) digest {
	h := sha256.New()
	h.Write([]byte{nodePrefix})
	h.Write(l)
	h.Write(r)
	return digest(h.Sum(nil))
}

// OwnerTree is the Merkle tree of a job's owner list, kept by the proxy to
// give every owner its proof.
type OwnerTree struct {
	owners []Owner
	// levels[0] are the leaf hashes, each next level pairs the one below
	// from the left, carrying a last unpaired node up unchanged (which is
	// RFC 9162's split at the largest power of two); the last level is the
	// root.
	levels [][]digest
}

// CheckOwnerList checks an owner list on its own: 1 to MaxOwners valid IDs,
// sorted, none twice, each with a key (a 64-hex-digit fingerprint) or,
// insecure mode, none with one.
func CheckOwnerList(owners []Owner) error {
	if len(owners) == 0 || len(owners) > MaxOwners {
		return fmt.Errorf("owners: %d owners, want 1 to %d", len(owners), MaxOwners)
	}
	keyed := owners[0].Key != ""
	for i, o := range owners {
		if !ValidID(o.ID) {
			return fmt.Errorf("owners: %q is not a valid id", o.ID)
		}
		if i > 0 && owners[i-1].ID >= o.ID {
			return fmt.Errorf("owners: must be sorted, without repeats (%q after %q)", o.ID, owners[i-1].ID)
		}
		switch {
		case keyed && !hexHash.MatchString(o.Key):
			return fmt.Errorf("owners: %s: key %.70q is not a 64-hex-digit fingerprint", o.ID, o.Key)
		case !keyed && o.Key != "":
			return fmt.Errorf("owners: %s has a key and %s none: name every owner by its key", o.ID, owners[0].ID)
		}
	}
	return nil
}

// SortOwners sorts an owner list by ID.
func SortOwners(owners []Owner) {
	slices.SortFunc(owners, func(a, b Owner) int { return strings.Compare(a.ID, b.ID) })
}

// NewOwnerTree builds the tree of an owner list (checked by CheckOwnerList).
func NewOwnerTree(owners []Owner) (*OwnerTree, error) {
	if err := CheckOwnerList(owners); err != nil {
		return nil, err
	}
	level := make([]digest, len(owners))
	for i, o := range owners {
		level[i] = leafHash(o)
	}
	t := &OwnerTree{owners: owners, levels: [][]digest{level}}
	for len(level) > 1 {
		up := make([]digest, (len(level)+1)/2)
		for i := range up {
			if 2*i+1 < len(level) {
				up[i] = nodeHash(level[2*i][:], level[2*i+1][:])
			} else {
				up[i] = level[2*i]
			}
		}
		t.levels = append(t.levels, up)
		level = up
	}
	return t, nil
}

// Owners returns the list (sorted; not to be modified).
func (t *OwnerTree) Owners() []Owner { return t.owners }

// IDs returns the owners' IDs (sorted).
func (t *OwnerTree) IDs() []string { return OwnerIDs(t.owners) }

// Root returns the root, in hex as the spec holds it.
func (t *OwnerTree) Root() string {
	r := t.levels[len(t.levels)-1][0]
	return hex.EncodeToString(r[:])
}

// Index returns the position of an owner in the list, and false when the
// list does not name it.
func (t *OwnerTree) Index(owner string) (int, bool) {
	return slices.BinarySearchFunc(t.owners, owner, func(o Owner, id string) int { return strings.Compare(o.ID, id) })
}

// Owner returns the listed owner of an ID (with its key).
func (t *OwnerTree) Owner(id string) (Owner, bool) {
	i, ok := t.Index(id)
	if !ok {
		return Owner{}, false
	}
	return t.owners[i], true
}

// OwnerProof is the inclusion proof of one owner: its position in the
// sorted list and the hashes of the siblings on the way up to the root,
// the lowest first.
type OwnerProof struct {
	Index int
	Path  [][]byte
}

// Proof returns the inclusion proof of the owner at index i.
func (t *OwnerTree) Proof(i int) OwnerProof {
	p := OwnerProof{Index: i}
	for _, level := range t.levels[:len(t.levels)-1] {
		if s := i ^ 1; s < len(level) {
			p.Path = append(p.Path, slices.Clone(level[s][:]))
		}
		i >>= 1
	}
	return p
}

// VerifyOwnerProof checks that the owner (its ID and key) is leaf p.Index of
// a tree of n leaves whose root is root (hex), by RFC 9162's verification
// algorithm (section 2.1.3.2).
func VerifyOwnerProof(root string, n int, owner Owner, p OwnerProof) error {
	want, err := hex.DecodeString(root)
	if err != nil || len(want) != sha256.Size {
		return errors.New("owner proof: the root is not a hex SHA-256")
	}
	if n < 1 || p.Index < 0 || p.Index >= n {
		return fmt.Errorf("owner proof: index %d is outside a list of %d owners", p.Index, n)
	}
	if len(p.Path) > MaxProofHashes {
		return fmt.Errorf("owner proof: %d hashes, a list of at most %d owners needs at most %d", len(p.Path), MaxOwners, MaxProofHashes)
	}
	fn, sn := p.Index, n-1
	r := leafHash(owner)
	for _, h := range p.Path {
		if len(h) != sha256.Size {
			return fmt.Errorf("owner proof: a hash of %d bytes", len(h))
		}
		if sn == 0 {
			return errors.New("owner proof: more hashes than the tree is deep")
		}
		if fn&1 == 1 || fn == sn {
			r = nodeHash(h, r[:])
			for fn&1 == 0 && fn != 0 {
				fn >>= 1
				sn >>= 1
			}
		} else {
			r = nodeHash(r[:], h)
		}
		fn >>= 1
		sn >>= 1
	}
	if sn != 0 {
		return errors.New("owner proof: fewer hashes than the tree is deep")
	}
	if !bytes.Equal(r[:], want) {
		return fmt.Errorf("owner proof: %s is not leaf %d of the list the spec commits to", owner, p.Index)
	}
	return nil
}
