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
// upload: the digest of its c0, its c1 (he.Params.AppendPoly) and the
// proof of c1 (protocol/zk); and c0 itself for a job that binds it
// (Spec.BindsC0).
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

// ProofBinding is the statement an upload proof is bound to (hashed into its
// Fiat-Shamir challenge with the committee key and c1): the job, the owner,
// the ciphertext's index among count, and its c0's digest. A proof made for
// one owner, job or ciphertext does not verify for another.
func ProofBinding(jobID, owner string, index, count int, c0Digest [32]byte) []byte {
	b := make([]byte, 0, 128)
	for _, f := range [][]byte{[]byte(proofDomain), []byte(jobID), []byte(owner)} {
		b = binary.BigEndian.AppendUint64(b, uint64(len(f)))
		b = append(b, f...)
	}
	b = binary.BigEndian.AppendUint64(b, uint64(index))
	b = binary.BigEndian.AppendUint64(b, uint64(count))
	return append(b, c0Digest[:]...)
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

// ProveUpload proves each of an owner's ciphertexts with its witness
// (he.Encryptor.EncryptWitnessed) under the committee's proof key, bound to
// the job and the owner, and returns the proofs with the digests the
// owner's upload statement lists. The masks come from rnd (crypto/rand
// when nil).
func ProveUpload(p he.Params, key *zk.Key, jobID, owner string, cts []*rlwe.Ciphertext, wits []zk.Witness, rnd io.Reader) ([][]byte, []PartDigests, error) {
	if len(cts) != len(wits) {
		return nil, nil, fmt.Errorf("prove upload: %d ciphertexts, %d witnesses", len(cts), len(wits))
	}
	proofs := make([][]byte, len(cts))
	digests := make([]PartDigests, len(cts))
	for i, ct := range cts {
		c0 := C0Digest(p, ct)
		pr, err := key.Prove(ct.Value[1], ProofBinding(jobID, owner, i, len(cts), c0), wits[i], rnd)
		if err != nil {
			return nil, nil, fmt.Errorf("prove ciphertext %d: %w", i, err)
		}
		proofs[i] = pr.Marshal()
		digests[i] = PartDigests{C0: c0, C1: sha256.Sum256(p.AppendPoly(nil, ct.Value[1])), Proof: sha256.Sum256(proofs[i])}
	}
	return proofs, digests, nil
}

// ErrUnproven reports an upload ciphertext whose proof does not verify.
var ErrUnproven = errors.New("not proven well formed")

// VerifyPart checks the proof of ciphertext index (of count) of an owner's
// upload to a job, and decodes its c1 into c1 (a polynomial at the protocol
// level) for the caller's sum.
func VerifyPart(p he.Params, key *zk.Key, jobID, owner string, index, count int, part Part, c1 ring.Poly) error {
	if err := p.DecodePoly(part.C1, c1); err != nil {
		return fmt.Errorf("ciphertext %d: c1: %w", index, err)
	}
	pr, err := zk.Unmarshal(part.Proof, p.N())
	if err != nil {
		return fmt.Errorf("ciphertext %d: %w: %v", index, ErrUnproven, err)
	}
	if err := key.Verify(c1, ProofBinding(jobID, owner, index, count, part.C0Digest), pr); err != nil {
		return fmt.Errorf("ciphertext %d: %w: %v", index, ErrUnproven, err)
	}
	return nil
}

// VerifyCiphertext checks the proof of a whole ciphertext (the proxy, on
// receipt of an upload) and returns its part for the members, with c0 when
// withC0.
func VerifyCiphertext(p he.Params, key *zk.Key, jobID, owner string, index, count int, ct *rlwe.Ciphertext, proof []byte, withC0 bool) (Part, error) {
	part := Part{C0Digest: C0Digest(p, ct), C1: p.AppendPoly(nil, ct.Value[1]), Proof: proof}
	if withC0 {
		part.C0 = p.AppendPoly(nil, ct.Value[0])
	}
	pr, err := zk.Unmarshal(proof, p.N())
	if err != nil {
		return part, fmt.Errorf("ciphertext %d: %w: %v", index, ErrUnproven, err)
	}
	if err := key.Verify(ct.Value[1], ProofBinding(jobID, owner, index, count, part.C0Digest), pr); err != nil {
		return part, fmt.Errorf("ciphertext %d: %w: %v", index, ErrUnproven, err)
	}
	return part, nil
}
