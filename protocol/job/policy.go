package job

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// The committee policy's defaults: at least three members, any two of
// which are needed to switch a key. A threshold of two means that no one
// member, nor one member with the proxy, holds enough of the committee
// secret to decrypt an upload; three members mean that one member down
// does not stop key switches.
const (
	DefaultMinCommitteeMembers   = 3
	DefaultMinCommitteeThreshold = 2
)

// ErrCommitteePolicy reports a committee that the node's committee policy
// refuses, or a policy that cannot be met.
var ErrCommitteePolicy = errors.New("committee policy")

// MemberPin pins a committee member by its key: the fingerprint of its
// certificate's key (hex SHA-256 of the SubjectPublicKeyInfo). ID is its
// name, for messages; a pin without a key (insecure mode, where nothing is
// signed) compares names only, and a node with certificates refuses one.
type MemberPin struct {
	ID  string
	Key string
}

// String is "csp-1 (key ab12…)".
func (p MemberPin) String() string {
	switch {
	case p.Key == "":
		return "csp/" + p.ID
	case p.ID == "":
		return "key " + p.Key
	}
	return "csp/" + p.ID + " (key " + p.Key + ")"
}

// CommitteePolicy is what an owner or a user requires of a committee before
// it accepts its key, besides every member's attestation of it
// (transport.VerifyCommittee). The proxy names the committee and relays
// the attestations, so its word alone never decides who the members are:
// the node pins them by key from its own configuration (a certificate with
// a pinned member's name and another key, whoever issued it, is not that
// member), and refuses a committee too small to spread trust. The zero
// value pins nothing and refuses every committee (Validate says why).
type CommitteePolicy struct {
	// Members pins the committee: the key must be attested by exactly these
	// members, by key (in any order). Required unless AnyMembers.
	Members []MemberPin
	// AnyMembers accepts any committee of the deployment's CSPs whose
	// members all attested the key: which CSPs, the proxy decides. For
	// local tests only.
	AnyMembers bool
	// MinMembers and MinThreshold are the smallest committee and threshold
	// accepted (0: DefaultMinCommitteeMembers, DefaultMinCommitteeThreshold).
	MinMembers, MinThreshold int
	// DistinctDomains requires every member's certificate to come from a
	// trust domain of its own (another organisation's CA), so that no one
	// operator runs two members (transport.VerifyCommittee checks it, with
	// the certificates).
	DistinctDomains bool
	// AllowMinorityThreshold accepts a committee whose threshold is at most
	// half its members. Refused by default: each member switches a job at
	// most once, but two disjoint sets of t members could each switch it,
	// giving a user colluding with the proxy the release twice, with the
	// members' noise drawn twice.
	AllowMinorityThreshold bool
}

// PinNames pins members by name only (insecure mode, tests without
// certificates).
func PinNames(ids ...string) []MemberPin {
	out := make([]MemberPin, len(ids))
	for i, id := range ids {
		out[i] = MemberPin{ID: id}
	}
	return out
}

// Minimums returns the smallest committee size and threshold the policy
// accepts, defaults applied.
func (p CommitteePolicy) Minimums() (members, threshold int) {
	members, threshold = p.MinMembers, p.MinThreshold
	if members == 0 {
		members = DefaultMinCommitteeMembers
	}
	if threshold == 0 {
		threshold = DefaultMinCommitteeThreshold
	}
	return members, threshold
}

// String describes the policy (for logs and errors).
func (p CommitteePolicy) String() string {
	m, t := p.Minimums()
	who := "any members"
	if len(p.Members) > 0 {
		who = "members " + strings.Join(p.pins(), ", ")
	}
	out := fmt.Sprintf("%s; at least %d members, threshold at least %d", who, m, t)
	if p.DistinctDomains {
		out += "; each member of its own trust domain"
	}
	if p.AllowMinorityThreshold {
		out += "; a threshold of half the members or fewer accepted"
	}
	return out
}

// pins are the pins as strings, sorted.
func (p CommitteePolicy) pins() []string {
	var out []string
	for _, m := range p.Members {
		out = append(out, m.String())
	}
	slices.Sort(out)
	return out
}

// Key identifies the policy among others (a key cache shared by owners
// with different policies).
func (p CommitteePolicy) Key() string {
	m, t := p.Minimums()
	return fmt.Sprintf("%s/%t/%d/%d/%t/%t", strings.Join(p.pins(), ","), p.AnyMembers, m, t, p.DistinctDomains, p.AllowMinorityThreshold)
}

// Keyed reports whether every pin has a key (what a node with certificates
// requires).
func (p CommitteePolicy) Keyed() bool {
	for _, m := range p.Members {
		if m.Key == "" {
			return false
		}
	}
	return true
}

// The flags that set a node's policy (fedpca owner serve, user run, user
// profile), named in the errors that an operator fixes with them.
const (
	flagCommittee    = "--committee"
	flagAnyCommittee = "--any-committee"
	flagMinMembers   = "--committee-min-members"
	flagMinThreshold = "--committee-min-threshold"
	flagMinority     = "--committee-allow-minority-threshold"
)

// Validate checks the policy when a node starts: it pins the committee (or
// says explicitly that any will do), its minimums are possible, and a
// pinned committee meets them.
func (p CommitteePolicy) Validate() error {
	if p.MinMembers < 0 || p.MinMembers > 64 || p.MinThreshold < 0 || p.MinThreshold > 64 {
		return fmt.Errorf("%w: minimum committee %d, minimum threshold %d: want 1 to 64 (0: the defaults, %d and %d)",
			ErrCommitteePolicy, p.MinMembers, p.MinThreshold, DefaultMinCommitteeMembers, DefaultMinCommitteeThreshold)
	}
	m, t := p.Minimums()
	if t > m {
		return fmt.Errorf("%w: a threshold of at least %d needs at least %d members, not %d (%s, %s)", ErrCommitteePolicy, t, t, m, flagMinMembers, flagMinThreshold)
	}
	switch {
	case len(p.Members) == 0 && !p.AnyMembers:
		return fmt.Errorf("%w: no committee pinned: name the CSP members this node trusts with %s (for example %s csp-1,csp-2,csp-3, resolved to keys by this node's trust store, "+
			"or ID=FINGERPRINT), so that it accepts a committee key only from those keys and never on the proxy's word; for local tests only, %s accepts any committee of the deployment's CSPs",
			ErrCommitteePolicy, flagCommittee, flagCommittee, flagAnyCommittee)
	case len(p.Members) > 0 && p.AnyMembers:
		return fmt.Errorf("%w: %s and %s together: pin the committee or accept any, not both", ErrCommitteePolicy, flagCommittee, flagAnyCommittee)
	}
	ids, keys := map[string]bool{}, map[string]bool{}
	for _, m := range p.Members {
		switch {
		case m.ID != "" && !ValidID(m.ID):
			return fmt.Errorf("%w: %s: %q is not a valid member ID", ErrCommitteePolicy, flagCommittee, m.ID)
		case m.Key != "" && !hexHash.MatchString(m.Key):
			return fmt.Errorf("%w: %s: %s: key %.70q is not a 64-hex-digit fingerprint", ErrCommitteePolicy, flagCommittee, m.ID, m.Key)
		case m.ID == "" && m.Key == "":
			return fmt.Errorf("%w: %s: an empty pin", ErrCommitteePolicy, flagCommittee)
		case m.ID != "" && ids[m.ID], m.Key != "" && keys[m.Key]:
			return fmt.Errorf("%w: %s pins %s twice", ErrCommitteePolicy, flagCommittee, m)
		}
		ids[m.ID], keys[m.Key] = m.ID != "", m.Key != ""
	}
	if len(p.Members) > 0 && len(p.Members) < m {
		return fmt.Errorf("%w: %s names %s, below this node's minimum committee of %d (%s lowers it, for local tests)",
			ErrCommitteePolicy, flagCommittee, count(len(p.Members), "member"), m, flagMinMembers)
	}
	return nil
}

// Check checks a committee the members attested (its statement) against
// the policy: its size and threshold at least the minimums, its members
// the pinned ones.
func (p CommitteePolicy) Check(st KeyStatement) error {
	m, t := p.Minimums()
	n := len(st.Members)
	if n < m || st.Threshold < t {
		var why []string
		if st.Threshold < t {
			why = append(why, fmt.Sprintf("with a threshold of %d, %s with the proxy could decrypt every upload", st.Threshold, count(st.Threshold, "member")))
		}
		if n < m {
			why = append(why, fmt.Sprintf("with %s, %s down would stop every key switch", count(n, "member"), count(n-st.Threshold+1, "member")))
		}
		return fmt.Errorf("%w: the committee is %d-of-%d (csp/%s), and this node requires at least %d members with a threshold of at least %d (%s). "+
			"The proxy's operator sets the committee (fedpca proxy serve --csp ... --threshold); to accept a smaller one anyway (local tests), lower this node's minimum with %s %d %s %d",
			ErrCommitteePolicy, st.Threshold, n, strings.Join(st.Members, ", csp/"), m, t, strings.Join(why, "; "), flagMinMembers, n, flagMinThreshold, st.Threshold)
	}
	if 2*st.Threshold <= n && !p.AllowMinorityThreshold {
		return fmt.Errorf("%w: the committee is %d-of-%d (csp/%s): with a threshold of half the members or fewer, two disjoint sets of %d members could each switch a job once, "+
			"so a proxy colluding with the user could have it released twice with the members' noise drawn twice; this node requires a threshold above %d. "+
			"The proxy's operator sets the committee (fedpca proxy serve --threshold); to accept it anyway, %s",
			ErrCommitteePolicy, st.Threshold, n, strings.Join(st.Members, ", csp/"), st.Threshold, n/2, flagMinority)
	}
	if len(p.Members) == 0 {
		return nil
	}
	var got []string
	for i, m := range st.Members {
		got = append(got, MemberPin{ID: m, Key: st.MemberKeys[i]}.String())
	}
	slices.Sort(got)
	refuse := func(why string) error {
		return &PinError{Why: fmt.Sprintf("%s: the committee the proxy names is %s, and this node pins %s (%s)",
			why, strings.Join(got, ", "), strings.Join(p.pins(), ", "), flagCommittee)}
	}
	if len(p.Members) != len(st.Members) {
		return refuse(fmt.Sprintf("%s attested, %s pinned", count(len(st.Members), "member"), count(len(p.Members), "member")))
	}
	for _, pin := range p.Members {
		i := slices.IndexFunc(st.Members, func(m string) bool { return pin.Key == "" && m == pin.ID })
		if pin.Key != "" {
			i = slices.Index(st.MemberKeys, pin.Key)
		}
		if i < 0 {
			if j := slices.Index(st.Members, pin.ID); pin.Key != "" && j >= 0 {
				return refuse(fmt.Sprintf("csp/%s presents key %s, not the pinned key %s", pin.ID, st.MemberKeys[j], pin.Key))
			}
			return refuse(fmt.Sprintf("no member of the committee holds the pinned %s", pin))
		}
	}
	return nil
}

// PinError is a committee the node's pin refuses: the fault is the pin or
// the committee the proxy names, and the message names both by key. It
// wraps ErrCommitteePolicy.
type PinError struct{ Why string }

func (e *PinError) Error() string { return ErrCommitteePolicy.Error() + ": " + e.Why }
func (e *PinError) Unwrap() error { return ErrCommitteePolicy }

// count is n nouns, in words for one.
func count(n int, noun string) string {
	if n == 1 {
		return "one " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
