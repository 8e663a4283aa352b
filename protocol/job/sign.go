package job

import (
	"crypto"
	"fmt"

	"github.com/fedpca/fedpca/protocol/seal"
)

// signContext separates job signatures from every other signature a node's
// key makes.
const signContext = "job-spec-v1"

// Sign signs the job ID with the user's certificate key.
func (s *Spec) Sign(signer crypto.Signer) ([]byte, error) {
	return seal.Sign(signer, signContext, []byte(s.ID()))
}

// VerifySignature checks the user's signature of the job ID against the
// public key of the user's certificate. (That the certificate belongs to
// s.User and chains to the deployment's CA is the caller's check.)
func (s *Spec) VerifySignature(sig []byte, pub crypto.PublicKey) error {
	if err := seal.Verify(pub, signContext, []byte(s.ID()), sig); err != nil {
		return fmt.Errorf("job %s…: user signature: %w", s.ID()[:12], err)
	}
	return nil
}
