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

// CommitteePolicy is what an owner or a user requires of a committee before
// it accepts its key, besides every member's attestation of it
// (transport.VerifyCommittee). The proxy names the committee and relays
// the attestations, so its word alone never decides who the members are:
// the node pins them from its own configuration, and refuses a committee
// too small to spread trust. The zero value pins nothing and refuses every
// committee (Validate says why).
type CommitteePolicy struct {
	// Members pins the committee: the key must be attested by exactly these
	// CSP member IDs (in any order). Required unless AnyMembers.
	Members []string
	// AnyMembers accepts any committee of the deployment's CSPs whose
	// members all attested the key: which CSPs, the proxy decides. For
	// local tests only.
	AnyMembers bool
	// MinMembers and MinThreshold are the smallest committee and threshold
	// accepted (0: DefaultMinCommitteeMembers, DefaultMinCommitteeThreshold).
	MinMembers, MinThreshold int
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
		who = "members " + strings.Join(slices.Sorted(slices.Values(p.Members)), ",")
	}
	return fmt.Sprintf("%s; at least %d members, threshold at least %d", who, m, t)
}

// Key identifies the policy among others (a key cache shared by owners
// with different policies).
func (p CommitteePolicy) Key() string {
	m, t := p.Minimums()
	return fmt.Sprintf("%s/%t/%d/%d", strings.Join(slices.Sorted(slices.Values(p.Members)), ","), p.AnyMembers, m, t)
}

// The flags that set a node's policy (fedpca owner serve, user run, user
// profile), named in the errors that an operator fixes with them.
const (
	flagCommittee    = "--committee"
	flagAnyCommittee = "--any-committee"
	flagMinMembers   = "--committee-min-members"
	flagMinThreshold = "--committee-min-threshold"
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
		return fmt.Errorf("%w: no committee pinned: name the CSP members this node trusts with %s (for example %s csp-1,csp-2,csp-3, as your deployment lists them), "+
			"so that it accepts a committee key only from them and never on the proxy's word; for local tests only, %s accepts any committee of the deployment's CSPs",
			ErrCommitteePolicy, flagCommittee, flagCommittee, flagAnyCommittee)
	case len(p.Members) > 0 && p.AnyMembers:
		return fmt.Errorf("%w: %s and %s together: pin the committee or accept any, not both", ErrCommitteePolicy, flagCommittee, flagAnyCommittee)
	}
	if err := distinctNames(p.Members, ValidID); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrCommitteePolicy, flagCommittee, err)
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
	if len(p.Members) > 0 {
		want, got := slices.Sorted(slices.Values(p.Members)), slices.Sorted(slices.Values(st.Members))
		if !slices.Equal(want, got) {
			return fmt.Errorf("%w: the committee is csp/%s, and this node pins csp/%s (%s)",
				ErrCommitteePolicy, strings.Join(got, ", csp/"), strings.Join(want, ", csp/"), flagCommittee)
		}
	}
	return nil
}

// count is n nouns, in words for one.
func count(n int, noun string) string {
	if n == 1 {
		return "one " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
