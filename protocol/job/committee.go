package job

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/fedpca/fedpca/protocol/he"
)

// Signature contexts of the key ceremony (see seal.Sign): a member's
// commitment to its public key share, a sealed Shamir share it deals, and
// its attestation of the committee key.
const (
	KeyCommitmentContext = "ceremony-public-key-commitment-v1"
	DealtShareContext    = "ceremony-dealt-share-v1"
	AttestationContext   = "committee-key-attestation-v2"
)

// NonceSize is the size of the nonce that opens a key share commitment.
const NonceSize = 32

// KeyShareCommitment is a member's commitment to its public key share in a
// ceremony: SHA-256 over a domain tag, the ceremony, the member's point, a
// nonce and the share, each length-prefixed. With a uniform nonce kept
// secret until the reveal it hides the share (SHA-256 as a random oracle);
// it binds the member to the share (collision resistance). Members commit
// first and reveal only once every member's signed commitment is in, so no
// member, even one colluding with the proxy that relays everything, can
// choose its share after seeing another's (the rogue-key attack, in which
// the last share cancels the others' so that the committee key is one whose
// secret the attacker knows).
func KeyShareCommitment(ceremony string, point uint32, nonce, share []byte) []byte {
	h := sha256.New()
	for _, f := range [][]byte{[]byte("fedpca key share commitment v1"), []byte(ceremony), []byte(strconv.FormatUint(uint64(point), 10)), nonce, share} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write(f)
	}
	return h.Sum(nil)
}

// KeyCommitmentMessage is what a member signs about its commitment: the
// ceremony, its point and the commitment.
func KeyCommitmentMessage(ceremony string, point uint32, commitment []byte) []byte {
	return append([]byte(ceremony+"|"+strconv.FormatUint(uint64(point), 10)+"|"), commitment...)
}

// DealtShareMessage is what a dealer signs about the sealed Shamir share it
// deals to another member: the ceremony, both points and the box's SHA-256.
func DealtShareMessage(ceremony string, from, to uint32, box []byte) []byte {
	h := sha256.Sum256(box)
	return append([]byte(fmt.Sprintf("%s|%d->%d|", ceremony, from, to)), h[:]...)
}

// KeyStatement is what every committee member signs at the end of a key
// ceremony, after it checked that the committee key is the aggregate of
// every member's share (each opening the commitment the member at its
// point signed before any share was revealed, its own the one it made).
// Owners and users accept a committee key only with a valid signature of
// the statement from every member (and only of a committee their
// CommitteePolicy accepts): a proxy that
// substitutes a key of its own cannot get one, since no honest member signs
// a key it did not verify, and the proxy holds no member's certificate key.
//
// All n members sign, whatever the threshold: collective key generation
// needs every member's share anyway, so every member can check the key.
type KeyStatement struct {
	Ceremony string
	// HEParams is the fingerprint of the HE parameter set.
	HEParams  string
	Threshold int
	// Members are the members' IDs by point: Members[i] is at point i+1.
	Members []string
	// MemberKeys are the members' certificate key fingerprints by point
	// (hex SHA-256 of the SubjectPublicKeyInfo; all empty in insecure mode):
	// each member attests the whole committee by key, as it verified the
	// others' signed commitments in the ceremony, so that a member's
	// attestation cannot be replaced by one of another key, and members
	// later know each other by key.
	MemberKeys []string
	// Key is the fingerprint of the committee public key.
	Key string
}

// Validate checks the statement's shape.
func (s KeyStatement) Validate() error {
	if s.Ceremony == "" || len(s.Ceremony) > 128 || strings.ContainsAny(s.Ceremony, "\n") {
		return fmt.Errorf("key statement: ceremony %.40q: want 1 to 128 characters on one line", s.Ceremony)
	}
	if !hexHash.MatchString(s.HEParams) {
		return fmt.Errorf("key statement: he_params: want a 64-hex-digit fingerprint")
	}
	if !hexHash.MatchString(s.Key) {
		return fmt.Errorf("key statement: key: want a 64-hex-digit fingerprint")
	}
	if err := (he.Committee{N: len(s.Members), Threshold: s.Threshold}).Validate(); err != nil {
		return fmt.Errorf("key statement: %w", err)
	}
	if err := distinctNames(s.Members, ValidID); err != nil {
		return fmt.Errorf("key statement: members: %w", err)
	}
	if len(s.MemberKeys) != len(s.Members) {
		return fmt.Errorf("key statement: %d member keys for %d members", len(s.MemberKeys), len(s.Members))
	}
	keyed := s.MemberKeys[0] != ""
	seen := map[string]bool{}
	for i, k := range s.MemberKeys {
		switch {
		case keyed && !hexHash.MatchString(k):
			return fmt.Errorf("key statement: member %s: key %.70q is not a 64-hex-digit fingerprint", s.Members[i], k)
		case !keyed && k != "":
			return fmt.Errorf("key statement: member %s has a key and %s none", s.Members[i], s.Members[0])
		case keyed && seen[k]:
			return fmt.Errorf("key statement: member %s: key %s is another member's too", s.Members[i], k)
		}
		seen[k] = true
	}
	return nil
}

// MemberKey returns the key of the member at a point ("" if none).
func (s KeyStatement) MemberKey(point uint32) string {
	if point < 1 || int(point) > len(s.MemberKeys) {
		return ""
	}
	return s.MemberKeys[point-1]
}

// Bytes returns the canonical bytes a member signs (with
// AttestationContext).
func (s KeyStatement) Bytes() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "ceremony=%s\nhe_params=%s\nthreshold=%d\nmembers=%d\n", s.Ceremony, s.HEParams, s.Threshold, len(s.Members))
	for i, m := range s.Members {
		fmt.Fprintf(&b, "member=%d:%s:%s\n", i+1, m, s.MemberKey(uint32(i+1)))
	}
	fmt.Fprintf(&b, "key=%s\n", s.Key)
	return []byte(b.String())
}
