package transport

import (
	"fmt"

	"github.com/fedpca/fedpca/protocol/job"
)

// VerifyTicket checks that a job spec was signed by the user it names: the
// certificate chains to a trusted CA, has role user and the spec's user ID,
// and its key verifies the signature of the job ID. In insecure mode (creds
// nil) there is no CA to check against and the ticket is accepted; the
// daemons warn about that mode at start.
func VerifyTicket(creds *Credentials, spec *job.Spec, sig, userCertDER []byte) error {
	if creds == nil {
		return nil
	}
	cert, id, err := creds.VerifyDER(userCertDER)
	if err != nil {
		return fmt.Errorf("user certificate: %w", err)
	}
	if id.Role != RoleUser {
		return fmt.Errorf("job spec signed by %s, which is not a user", id.Short())
	}
	if id.String() != spec.User {
		return fmt.Errorf("job spec names user %s but is signed by %s", spec.User, id)
	}
	return spec.VerifySignature(sig, cert.PublicKey)
}
