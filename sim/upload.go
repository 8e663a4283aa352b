package sim

import (
	"bytes"
	"crypto/sha256"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
)

// Upload is an owner's upload for a job: its encrypted statistics and
// their proofs, as the owner daemon computes them, and the header that
// announces them (with the owner's signature).
type Upload struct {
	Header *fedpcav1.UploadHeader
	Blobs  [][]byte
	Proofs [][]byte
}

// OwnerUpload computes the upload of owner (whose credentials sign it; nil
// in insecure mode) holding the rows csv for a job (no noise share: the
// owners' plans add theirs in the owner daemon).
func OwnerUpload(spec *job.Spec, sch *schema.Schema, p he.Params, cpk *rlwe.PublicKey, csv []byte, owner string, creds *transport.Credentials) (Upload, error) {
	acc, _, err := job.ReadStatistics(spec, sch, bytes.NewReader(csv))
	if err != nil {
		return Upload{}, err
	}
	cts, wits, err := job.OwnerCiphertexts(spec, sch, p, cpk, acc, nil)
	if err != nil {
		return Upload{}, err
	}
	key, err := p.ProofKey(cpk)
	if err != nil {
		return Upload{}, err
	}
	up := Upload{}
	var digests []job.PartDigests
	if up.Proofs, digests, err = job.ProveUpload(p, key, spec.ID(), owner, cts, wits, nil); err != nil {
		return Upload{}, err
	}
	h := sha256.New()
	for _, ct := range cts {
		b := p.Codecs().Ciphertext.Marshal(ct)
		h.Write(b)
		up.Blobs = append(up.Blobs, b)
	}
	up.Header = &fedpcav1.UploadHeader{JobId: spec.ID(), Ciphertexts: uint32(len(cts)), Digest: h.Sum(nil)}
	if creds != nil {
		if up.Header.Signature, err = seal.Sign(creds.Signer(), job.UploadContext, job.UploadStatement(spec.ID(), owner, digests)); err != nil {
			return Upload{}, err
		}
	}
	return up, nil
}
