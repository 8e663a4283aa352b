package transport

import (
	"crypto/x509"
	"errors"
	"fmt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/seal"
)

// ErrKeyNotAttested reports a committee key that the committee's members
// did not all attest: the proxy that handed it out may have substituted it.
var ErrKeyNotAttested = errors.New("committee key not attested by every committee member")

// VerifyMemberSignature checks a committee member's signature: certDER is a
// trusted csp/<member> certificate (Credentials.Verify) whose key, when key
// is set, is that fingerprint, and its key verifies sig of msg in the
// signature context. It returns the certificate's key fingerprint. In
// insecure mode (creds nil) there is nothing to check against and nothing
// is verified; the daemons warn about that mode at start.
func VerifyMemberSignature(creds *Credentials, member, key string, certDER []byte, context string, msg, sig []byte) (string, error) {
	return verifyNodeSignature(creds, RoleCSP, member, key, certDER, context, msg, sig)
}

// VerifyOwnerSignature checks a data owner's signature (of its upload
// statement) against the owner as the job names it: certDER is a trusted
// owner/<ID> certificate of the owner's key (owner.Key, which the user
// signed), and it verifies sig of msg in the signature context. A
// certificate with the owner's name and another key, whoever issued it, is
// refused naming both keys. In insecure mode (creds nil) nothing is
// verified.
func VerifyOwnerSignature(creds *Credentials, owner job.Owner, certDER []byte, context string, msg, sig []byte) error {
	if creds != nil && owner.Key == "" {
		return fmt.Errorf("the job names owner %s without a key: its statement cannot be checked", owner.ID)
	}
	_, err := verifyNodeSignature(creds, RoleOwner, owner.ID, owner.Key, certDER, context, msg, sig)
	return err
}

func verifyNodeSignature(creds *Credentials, role, node, key string, certDER []byte, context string, msg, sig []byte) (string, error) {
	if creds == nil {
		return "", nil
	}
	cert, id, err := creds.VerifyDER(certDER)
	if err != nil {
		return "", err
	}
	if id.Role != role || id.ID != node {
		return "", fmt.Errorf("signed by %s, expected %s/%s", id, role, node)
	}
	got := KeyFingerprint(cert)
	if key != "" && got != key {
		return "", &KeyMismatchError{Who: id.String(), Want: key, Got: got, Where: "the job"}
	}
	return got, seal.Verify(cert.PublicKey, context, msg, sig)
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
	return committeeStatement(c, false)
}

// committeeStatement is CommitteeStatement; withoutKey takes the key's
// fingerprint as published (a response without the key's bytes).
func committeeStatement(c *fedpcav1.GetCommitteeResponse, withoutKey bool) (job.KeyStatement, error) {
	st := job.KeyStatement{Ceremony: c.GetCeremonyId(), HEParams: c.GetHeParamsHash(), Threshold: int(c.GetThreshold()),
		Key: job.Fingerprint(c.GetPublicKey())}
	if withoutKey {
		st.Key = c.GetPublicKeyFingerprint()
	}
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
	// Each member's key is its attestation's certificate's: every member
	// signed the whole list of keys, so no attestation can be swapped for
	// one of another key.
	st.MemberKeys = make([]string, n)
	for _, a := range c.GetAttestations() {
		if len(a.GetCertificate()) == 0 {
			continue // insecure mode: unsigned
		}
		cert, err := x509.ParseCertificate(a.GetCertificate())
		if err != nil {
			return st, fmt.Errorf("%w: attestation at point %d: certificate: %v", ErrKeyNotAttested, a.GetPoint(), err)
		}
		st.MemberKeys[a.GetPoint()-1] = KeyFingerprint(cert)
	}
	if err := st.Validate(); err != nil {
		return st, fmt.Errorf("%w: %v", ErrKeyNotAttested, err)
	}
	return st, nil
}

// VerifyCommittee checks that every member of the committee attested the
// committee key the proxy publishes: one attestation per point, each
// certificate a trusted csp/<member> identity, each signature valid over the
// same statement, which lists every member's key; and that the committee is
// one the node's policy accepts (its pinned members by key, at least its
// minimum size and threshold: errors wrap job.ErrCommitteePolicy, a pin
// that does not match is a *job.PinError naming the keys). It returns the
// statement. In insecure mode (creds nil) signatures cannot be checked and
// only the shape and the policy are.
func VerifyCommittee(creds *Credentials, c *fedpcav1.GetCommitteeResponse, policy job.CommitteePolicy) (job.KeyStatement, error) {
	return verifyCommittee(creds, c, policy, false)
}

// VerifyCommitteePin is VerifyCommittee of a response without the key's
// bytes (GetCommitteeRequest.without_key): what the members attested, and
// the node's pin, are checked; the key itself is not at hand.
func VerifyCommitteePin(creds *Credentials, c *fedpcav1.GetCommitteeResponse, policy job.CommitteePolicy) (job.KeyStatement, error) {
	return verifyCommittee(creds, c, policy, true)
}

func verifyCommittee(creds *Credentials, c *fedpcav1.GetCommitteeResponse, policy job.CommitteePolicy, withoutKey bool) (job.KeyStatement, error) {
	if creds != nil && !policy.Keyed() {
		return job.KeyStatement{}, fmt.Errorf("%w: a committee pinned by name only (%s): a node with certificates pins members by key", job.ErrCommitteePolicy, policy)
	}
	st, err := committeeStatement(c, withoutKey)
	if err != nil {
		return st, err
	}
	if err := policy.Check(st); err != nil {
		return st, err
	}
	msg := st.Bytes()
	domains := map[string]string{} // trust domain -> the member of it seen first
	for _, a := range c.GetAttestations() {
		if _, err := VerifyMemberSignature(creds, a.GetMember(), st.MemberKey(a.GetPoint()), a.GetCertificate(), job.AttestationContext, msg, a.GetSignature()); err != nil {
			return st, fmt.Errorf("%w: member %s (point %d): %v", ErrKeyNotAttested, a.GetMember(), a.GetPoint(), err)
		}
		if creds == nil || !policy.DistinctDomains {
			continue
		}
		cert, _ := x509.ParseCertificate(a.GetCertificate()) // verified above
		id, _ := IdentityOf(cert)
		if other, ok := domains[id.Domain()]; ok {
			return st, fmt.Errorf("%w: csp/%s and csp/%s are both of trust domain %s: one organisation runs two members of the committee, "+
				"and this node requires each member of its own (--committee-distinct-domains)", job.ErrCommitteePolicy, other, a.GetMember(), id.Domain())
		}
		domains[id.Domain()] = a.GetMember()
	}
	return st, nil
}
