package transport

import (
	"fmt"

	"github.com/fedpca/fedpca/protocol/job"
)

// VerifyTicket checks that a job spec was signed by the user it names: the
// certificate is a trusted identity (Credentials.Verify) of role user and
// the spec's user ID, and its key verifies the signature of the job ID. It
// returns the user with its key. In insecure mode (creds nil) there is
// nothing to check against and the ticket is accepted as the spec's user;
// the daemons warn about that mode at start.
func VerifyTicket(creds *Credentials, spec *job.Spec, sig, userCertDER []byte) (Peer, error) {
	if creds == nil {
		id, err := ParseIdentity(spec.User)
		return Peer{Identity: id}, err
	}
	cert, id, err := creds.VerifyDER(userCertDER)
	if err != nil {
		return Peer{}, fmt.Errorf("user certificate: %w", err)
	}
	if id.Role != RoleUser {
		return Peer{}, fmt.Errorf("job spec signed by %s, which is not a user", id)
	}
	if id.String() != spec.User {
		return Peer{}, fmt.Errorf("job spec names user %s but is signed by %s", spec.User, id)
	}
	return Peer{Identity: id, Key: KeyFingerprint(cert)}, spec.VerifySignature(sig, cert.PublicKey)
}

// VerifyRound checks a round of a power-method job whose parent passed
// VerifyTicket with the same certificate: the round spec (job.RoundSpec:
// this parent's, one of its rounds) and the user's signature of the
// round's ID with that certificate's key. In insecure mode (no
// credentials) there is no key to check it with.
func VerifyRound(creds *Credentials, parent *job.Spec, rs job.RoundSpec, sig, userCertDER []byte) error {
	if creds == nil {
		return rs.Check(parent)
	}
	cert, _, err := creds.VerifyDER(userCertDER)
	if err != nil {
		return fmt.Errorf("user certificate: %w", err)
	}
	return rs.Verify(parent, sig, cert.PublicKey)
}
