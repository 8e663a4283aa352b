package sim

import (
	"bytes"
	"crypto/sha256"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

// Upload is an owner's upload for a job: its encrypted statistics, as the
// owner daemon computes them, and the header that announces them.
type Upload struct {
	Header *fedpcav1.UploadHeader
	Blobs  [][]byte
}

// OwnerUpload computes the upload of an owner holding the rows csv for a
// job (no noise share: the owners' plans add theirs in the owner daemon).
func OwnerUpload(spec *job.Spec, sch *schema.Schema, p he.Params, cpk *rlwe.PublicKey, csv []byte) (Upload, error) {
	acc, _, err := job.ReadStatistics(spec, sch, bytes.NewReader(csv))
	if err != nil {
		return Upload{}, err
	}
	cts, err := job.OwnerCiphertexts(spec, sch, p, cpk, acc, nil)
	if err != nil {
		return Upload{}, err
	}
	h := sha256.New()
	up := Upload{}
	for _, ct := range cts {
		b := p.Codecs().Ciphertext.Marshal(ct)
		h.Write(b)
		up.Blobs = append(up.Blobs, b)
	}
	up.Header = &fedpcav1.UploadHeader{JobId: spec.ID(), Ciphertexts: uint32(len(cts)), Digest: h.Sum(nil)}
	return up, nil
}
