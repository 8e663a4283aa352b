package job

import "fmt"

// Decline is why an owner does not take part in a job: one code of a short,
// closed, public list. It is all an owner ever says about a job besides its
// upload, so it must not depend on the owner's rows: no free text, counts,
// line numbers, values or labels travel with it. Under add/remove-one-row
// adjacency, one row changes neither whether an owner uploads nor which code
// it sends (bad rows are skipped and rows beyond the job's per-owner cap are
// dropped, both counted in the owner's own log only). The detail of a
// decline stays in the owner's log and local status.
//
// The values are those of the wire enum fedpca.v1.DeclineReason.
type Decline int32

// The decline codes.
const (
	// DeclinePolicy: the owner's policy refuses the job (its epsilon or
	// delta above the owner's per-job limit, or a job without noise).
	DeclinePolicy Decline = 1
	// DeclineBudget: the owner's privacy budget for the dataset is short.
	DeclineBudget Decline = 2
	// DeclineSchemaMismatch: the owner does not serve the dataset with this
	// schema (another schema hash, or its data source's columns do not
	// match the schema).
	DeclineSchemaMismatch Decline = 3
	// DeclineUserNotAllowed: the job's user is not one the owner accepts.
	DeclineUserNotAllowed Decline = 4
	// DeclineInvalidJob: the job fails the owner's checks (malformed spec,
	// ID not its hash, signature, parameters, noise plan or overflow bound).
	DeclineInvalidJob Decline = 5
	// DeclineCommitteeKey: the job's committee key is not the one every
	// committee member attested.
	DeclineCommitteeKey Decline = 6
	// DeclineUnavailable: the owner cannot take part for a reason of its own
	// (its data source cannot be opened, a local failure).
	DeclineUnavailable Decline = 7
	// DeclineNotNamed: the job does not name this owner, as far as it can
	// tell: the proxy gave it no inclusion proof of its ID that verifies
	// against the owner list the user signed (Spec.CheckMember).
	DeclineNotNamed Decline = 8
	// DeclineCommitteePin: the committee the proxy names, every member of
	// which attested the key, is not the one the owner pins by key (its
	// --committee): the owner's configuration, or a committee it does not
	// trust. Its own code, so that the user's error names the owner whose
	// pin refused, not the committee.
	DeclineCommitteePin Decline = 9
)

var declines = map[Decline]struct{ name, text string }{
	DeclinePolicy:         {"policy", "the owner's policy refuses this job (its epsilon, delta or noise)"},
	DeclineBudget:         {"budget", "the owner's privacy budget for the dataset is too small for this job"},
	DeclineSchemaMismatch: {"schema_mismatch", "the owner does not serve this dataset with this schema"},
	DeclineUserNotAllowed: {"user_not_allowed", "the owner does not accept jobs from this user"},
	DeclineInvalidJob:     {"invalid_job", "the job fails the owner's checks (spec, signature, parameters or overflow bound)"},
	DeclineCommitteeKey:   {"committee_key", "the job's committee key is not attested by every member of the committee the proxy names (a substituted key, or an attestation missing or forged)"},
	DeclineUnavailable:    {"unavailable", "the owner cannot take part for a local reason (its operator's log says which)"},
	DeclineNotNamed:       {"not_named", "the job's signed owner list does not name this owner by its key (no valid inclusion proof: the user's roster may hold another key for it)"},
	DeclineCommitteePin:   {"committee_pin", "the owner's committee pin (its --committee, by key) does not match the committee's members: the owner's operator checks its pin against the members' fingerprints"},
}

// ParseDecline checks a decline code received from another party.
func ParseDecline(v int32) (Decline, error) {
	d := Decline(v)
	if _, ok := declines[d]; !ok {
		return 0, fmt.Errorf("decline reason %d is not one of the known codes", v)
	}
	return d, nil
}

// ParseDeclineName returns the code with the given name (as String gives it).
func ParseDeclineName(name string) (Decline, error) {
	for d, x := range declines {
		if x.name == name {
			return d, nil
		}
	}
	return 0, fmt.Errorf("decline reason %q is not one of the known codes", name)
}

// Declines returns every code, in order.
func Declines() []Decline {
	out := make([]Decline, 0, len(declines))
	for d := DeclinePolicy; d <= DeclineCommitteePin; d++ {
		out = append(out, d)
	}
	return out
}

// String returns the code's short name, e.g. "budget".
func (d Decline) String() string {
	if x, ok := declines[d]; ok {
		return x.name
	}
	return fmt.Sprintf("decline(%d)", int32(d))
}

// Text returns the code's public description.
func (d Decline) Text() string {
	if x, ok := declines[d]; ok {
		return x.text
	}
	return "unknown reason"
}
