package job

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/ring"
)

// UploadContext is the signature context of an owner's upload statement.
const UploadContext = "fedpca-upload-v1"

// proofDomain separates the binding of upload proofs from other statements.
const proofDomain = "fedpca/upload-proof/v1"

// Part is what a committee member needs of one ciphertext of an owner's
// upload: the digest of its c0, its c1 (he.Params.AppendPoly) and, for the
// last ciphertext of each proof group (ProofGroup), the group's proof
// (protocol/zk; empty for the others); and c0 itself for a job that binds
// it (Spec.BindsC0).
type Part struct {
	C0Digest [32]byte
	C1       []byte
	Proof    []byte
	C0       []byte
}

// PartDigests are the digests an upload statement lists per ciphertext.
type PartDigests struct {
	C0, C1, Proof [32]byte
}

// Digests returns the part's digests (hashing c1 and the proof).
func (pt Part) Digests() PartDigests {
	return PartDigests{C0: pt.C0Digest, C1: sha256.Sum256(pt.C1), Proof: sha256.Sum256(pt.Proof)}
}

// ProofGroup returns the proof group of ciphertext index of an upload of
// count: its first ciphertext and its size. An upload's ciphertexts are
// proven zk.MaxGroup at a time, in order (the last group smaller), and a
// group's proof travels with its last ciphertext.
func ProofGroup(index, count int) (first, size int) {
	first = index - index%zk.MaxGroup
	return first, min(zk.MaxGroup, count-first)
}

// ProofEnds reports whether ciphertext index of an upload of count ends its
// proof group, and so carries the group's proof, and where that group
// starts.
func ProofEnds(index, count int) (first int, ends bool) {
	first, size := ProofGroup(index, count)
	return first, index == first+size-1
}

// ProofBinding is the statement an upload proof is bound to (hashed into its
// Fiat-Shamir challenge with the committee key and the c1s): the job, the
// owner, the index of the group's first ciphertext among count, and the
// digest of each of its ciphertexts' c0. A proof made for one owner, job
// or group does not verify for another.
func ProofBinding(jobID, owner string, first, count int, c0Digests ...[32]byte) []byte {
	b := make([]byte, 0, 96+32*len(c0Digests))
	for _, f := range [][]byte{[]byte(proofDomain), []byte(jobID), []byte(owner)} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(first))
	b = binary.BigEndian.AppendUint64(b, uint64(count))
	for _, d := range c0Digests {
		b = append(b, d[:]...)
	}
	return b
}

// UploadStatement is what an owner signs for its upload, with its
// certificate key (context UploadContext): the job, the owner, and for each
// ciphertext in order the digests of its c0, its c1 and its proof. Members
// check it before a key switch, so that the proxy can neither substitute a
// ciphertext of its own (well formed, but not the owner's) nor move an
// upload from one job to another.
func UploadStatement(jobID, owner string, parts []PartDigests) []byte {
	b := make([]byte, 0, 64+len(jobID)+len(owner)+96*len(parts))
	for _, f := range [][]byte{[]byte(UploadContext), []byte(jobID), []byte(owner)} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(len(parts)))
	for _, d := range parts {
		b = append(b, d.C0[:]...)
		b = append(b, d.C1[:]...)
		b = append(b, d.Proof[:]...)
	}
	return b
}

// C0Digest is the SHA-256 of a ciphertext's c0 (he.Params.AppendPoly).
func C0Digest(p he.Params, ct *rlwe.Ciphertext) [32]byte {
	return sha256.Sum256(p.AppendPoly(nil, ct.Value[0]))
}

// ProveUpload proves an owner's ciphertexts, a proof per group
// (ProofGroup), with their witnesses (he.Encryptor.EncryptWitnessed) under
// the committee's proof key, bound to the job and the owner, and returns
// each ciphertext's proof (a group's with its last ciphertext, nil for the
// others) with the digests the owner's upload statement lists. The masks
// come from rnd (when nil, a keystream keyed from crypto/rand per proof:
// zk.Key.ProveGroup).
func ProveUpload(p he.Params, key *zk.Key, jobID, owner string, cts []*rlwe.Ciphertext, wits []zk.Witness, rnd io.Reader) ([][]byte, []PartDigests, error) {
	if len(cts) != len(wits) {
		return nil, nil, fmt.Errorf("prove upload: %d ciphertexts, %d witnesses", len(cts), len(wits))
	}
	n := len(cts)
	proofs := make([][]byte, n)
	digests := make([]PartDigests, n)
	c0s := make([][32]byte, n)
	for i, ct := range cts {
		c0s[i] = C0Digest(p, ct)
	}
	for first := 0; first < n; first += zk.MaxGroup {
		_, size := ProofGroup(first, n)
		c1s := make([]ring.Poly, size)
		for j := range c1s {
			c1s[j] = cts[first+j].Value[1]
		}
		pr, err := key.ProveGroup(c1s, ProofBinding(jobID, owner, first, n, c0s[first:first+size]...), wits[first:first+size], rnd)
		if err != nil {
			return nil, nil, fmt.Errorf("prove %s: %w", groupName(first, size), err)
		}
		proofs[first+size-1] = pr.Marshal()
	}
	for i, ct := range cts {
		digests[i] = PartDigests{C0: c0s[i], C1: sha256.Sum256(p.AppendPoly(nil, ct.Value[1])), Proof: sha256.Sum256(proofs[i])}
	}
	return proofs, digests, nil
}

// groupName names a proof group in errors: "ciphertext 3" or "ciphertexts
// 8-15".
func groupName(first, size int) string {
	if size == 1 {
		return fmt.Sprintf("ciphertext %d", first)
	}
	return fmt.Sprintf("ciphertexts %d-%d", first, first+size-1)
}

// ErrUnproven reports an upload ciphertext whose proof does not verify.
var ErrUnproven = errors.New("not proven well formed")

// VerifyParts checks the proof of the group of an owner's upload to a job
// that starts at ciphertext first (of count): parts are the group's, its
// proof in the last and no other. It decodes each part's c1 into c1s (at
// the protocol level) for the caller's sum.
func VerifyParts(p he.Params, key *zk.Key, jobID, owner string, first, count int, parts []Part, c1s []ring.Poly) error {
	if err := checkGroup(first, count, len(parts)); err != nil {
		return err
	}
	if len(c1s) != len(parts) {
		return fmt.Errorf("%s: %d parts, %d polynomials to decode them into", groupName(first, len(parts)), len(parts), len(c1s))
	}
	c0s := make([][32]byte, len(parts))
	for j, part := range parts {
		if j < len(parts)-1 && len(part.Proof) != 0 {
			return fmt.Errorf("ciphertext %d: %w: it carries a proof, but a group's proof comes with its last ciphertext", first+j, ErrUnproven)
		}
		if err := p.DecodePoly(part.C1, c1s[j]); err != nil {
			return fmt.Errorf("ciphertext %d: c1: %w", first+j, err)
		}
		c0s[j] = part.C0Digest
	}
	return verifyGroup(p, key, jobID, owner, first, count, c0s, c1s, parts[len(parts)-1].Proof)
}

// VerifyCiphertexts checks the proof of a whole proof group (the proxy, on
// receipt of an upload's group), cts starting at ciphertext first of count,
// and returns their parts for the members, with c0 when withC0.
func VerifyCiphertexts(p he.Params, key *zk.Key, jobID, owner string, first, count int, cts []*rlwe.Ciphertext, proof []byte, withC0 bool) ([]Part, error) {
	parts := make([]Part, len(cts))
	c0s := make([][32]byte, len(cts))
	c1s := make([]ring.Poly, len(cts))
	for j, ct := range cts {
		parts[j] = Part{C0Digest: C0Digest(p, ct), C1: p.AppendPoly(nil, ct.Value[1])}
		if withC0 {
			parts[j].C0 = p.AppendPoly(nil, ct.Value[0])
		}
		c0s[j], c1s[j] = parts[j].C0Digest, ct.Value[1]
	}
	parts[len(parts)-1].Proof = proof
	if err := checkGroup(first, count, len(cts)); err != nil {
		return parts, err
	}
	return parts, verifyGroup(p, key, jobID, owner, first, count, c0s, c1s, proof)
}

// checkGroup checks that ciphertexts first to first + size - 1 of count are
// a proof group (ProofGroup).
func checkGroup(first, count, size int) error {
	if f, n := ProofGroup(first, count); f != first || n != size {
		return fmt.Errorf("%s of %d: not a proof group (ciphertexts %d to %d are)", groupName(first, size), count, f, f+n-1)
	}
	return nil
}

// verifyGroup verifies the proof of a proof group (checkGroup), bound to
// the job, the owner and the group's c0 digests.
func verifyGroup(p he.Params, key *zk.Key, jobID, owner string, first, count int, c0s [][32]byte, c1s []ring.Poly, proof []byte) error {
	name := groupName(first, len(c1s))
	pr, err := zk.Unmarshal(proof, p.N(), len(c1s))
	if err != nil {
		return fmt.Errorf("%s: %w: %v", name, ErrUnproven, err)
	}
	if err := key.VerifyGroup(c1s, ProofBinding(jobID, owner, first, count, c0s...), pr); err != nil {
		return fmt.Errorf("%s: %w: %v", name, ErrUnproven, err)
	}
	return nil
}
