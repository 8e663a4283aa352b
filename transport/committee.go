package transport

import (
	"errors"
	"fmt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/seal"
)

// ErrKeyNotAttested reports a committee key that the committee's members
// did not all attest: the proxy that handed it out may have substituted it.
var ErrKeyNotAttested = errors.New("committee key not attested by every committee member")

// VerifyMemberSignature checks a committee member's signature: certDER
// chains to a trusted CA, names csp/<member>, and its key verifies sig of
// msg in the signature context. In insecure mode (creds nil) there is no CA
// to check against and nothing is verified; the daemons warn about that
// mode at start.
func VerifyMemberSignature(creds *Credentials, member string, certDER []byte, context string, msg, sig []byte) error {
	return verifyNodeSignature(creds, RoleCSP, member, certDER, context, msg, sig)
}

// VerifyOwnerSignature checks a data owner's signature (of its upload
// statement): certDER chains to a trusted CA, names owner/<owner>, and its
// key verifies sig of msg in the signature context. In insecure mode (creds
// nil) nothing is verified.
func VerifyOwnerSignature(creds *Credentials, owner string, certDER []byte, context string, msg, sig []byte) error {
	return verifyNodeSignature(creds, RoleOwner, owner, certDER, context, msg, sig)
}

func verifyNodeSignature(creds *Credentials, role, node string, certDER []byte, context string, msg, sig []byte) error {
	if creds == nil {
		return nil
	}
	cert, id, err := creds.VerifyDER(certDER)
	if err != nil {
		return err
	}
	if id.Role != role || id.ID != node {
		return fmt.Errorf("signed by %s, expected %s/%s", id.Short(), role, node)
	}
	return seal.Verify(cert.PublicKey, context, msg, sig)
}

// Attest signs a committee key statement with the member's certificate key
// (insecure mode, creds nil: unsigned, naming the member only).
func Attest(creds *Credentials, member string, point uint32, st job.KeyStatement) (*fedpcav1.KeyAttestation, error) {
	if creds == nil {
		return &fedpcav1.KeyAttestation{Member: member, Point: point}, nil
	}
	sig, err := seal.Sign(creds.Signer(), job.AttestationContext, st.Bytes())
	if err != nil {
		return nil, err
	}
	return &fedpcav1.KeyAttestation{Member: member, Point: point, Certificate: creds.Leaf.Raw, Signature: sig}, nil
}

// CommitteeStatement builds the statement the members attested from what
// the proxy publishes about the committee: its ceremony, parameters,
// threshold, the key's fingerprint (computed here from the key's bytes) and
// the members named by the attestations, by point.
func CommitteeStatement(c *fedpcav1.GetCommitteeResponse) (job.KeyStatement, error) {
	st := job.KeyStatement{Ceremony: c.GetCeremonyId(), HEParams: c.GetHeParamsHash(), Threshold: int(c.GetThreshold()),
		Key: job.Fingerprint(c.GetPublicKey())}
	if c.GetPublicKeyFingerprint() != st.Key {
		return st, fmt.Errorf("%w: the key's fingerprint is not the one published with it", ErrKeyNotAttested)
	}
	n := int(c.GetMembers())
	if n < 1 || n > 64 || len(c.GetAttestations()) != n {
		return st, fmt.Errorf("%w: %d attestations for a committee of %d", ErrKeyNotAttested, len(c.GetAttestations()), n)
	}
	st.Members = make([]string, n)
	for _, a := range c.GetAttestations() {
		p := a.GetPoint()
		if p < 1 || int(p) > n || st.Members[p-1] != "" {
			return st, fmt.Errorf("%w: attestation at point %d is out of range or repeated", ErrKeyNotAttested, p)
		}
		st.Members[p-1] = a.GetMember()
	}
	if err := st.Validate(); err != nil {
		return st, fmt.Errorf("%w: %v", ErrKeyNotAttested, err)
	}
	return st, nil
}

// VerifyCommittee checks that every member of the committee attested the
// committee key the proxy publishes: one attestation per point, each
// certificate from the deployment's CA naming the member (role csp), each
// signature valid over the same statement; and that the committee is one
// the node's policy accepts (its pinned members, at least its minimum size
// and threshold: errors wrap job.ErrCommitteePolicy). It returns the
// statement. In insecure mode (creds nil) signatures cannot be checked and
// only the shape and the policy are.
func VerifyCommittee(creds *Credentials, c *fedpcav1.GetCommitteeResponse, policy job.CommitteePolicy) (job.KeyStatement, error) {
	st, err := CommitteeStatement(c)
	if err != nil {
		return st, err
	}
	if err := policy.Check(st); err != nil {
		return st, err
	}
	msg := st.Bytes()
	for _, a := range c.GetAttestations() {
		if err := VerifyMemberSignature(creds, a.GetMember(), a.GetCertificate(), job.AttestationContext, msg, a.GetSignature()); err != nil {
			return st, fmt.Errorf("%w: member %s (point %d): %v", ErrKeyNotAttested, a.GetMember(), a.GetPoint(), err)
		}
	}
	return st, nil
}
