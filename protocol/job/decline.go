package job

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/fedpca/fedpca/protocol/schema"
)

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
	DeclinePolicy:         {"policy", "the owner's policy refuses this job (its epsilon, delta, noise or what it releases)"},
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

// The policy limits a decline's detail may name (DeclineDetail.Limit),
// with the wire enum fedpca.v1.PolicyLimit's values.
type PolicyLimit int32

const (
	// LimitMaxEpsilon: the job's epsilon is above the owner's per-job
	// limit (owner serve --max-epsilon), the detail's value.
	LimitMaxEpsilon PolicyLimit = 1
	// LimitMaxDelta: the job's delta is above the owner's per-job limit
	// (--max-delta), the detail's value.
	LimitMaxDelta PolicyLimit = 2
	// LimitNoNoise: the job has no DP noise, and the owner takes part in
	// no such job (--allow-no-noise, tests only).
	LimitNoNoise PolicyLimit = 3
	// LimitExactComponents: the job releases exact components, and the
	// owner takes part in no such job (--allow-exact-components).
	LimitExactComponents PolicyLimit = 4
	// LimitExactMaxK: the job asks for more exact components than the
	// owner releases (--exact-components-max-k), the detail's value.
	LimitExactMaxK PolicyLimit = 5
	// LimitExactJobs: the owner's source of rows has taken part in as many
	// exact components jobs as it takes per period (--exact-components-jobs,
	// the detail's value, per --exact-components-period). It depends on the
	// jobs the owner took part in, never on its rows.
	LimitExactJobs PolicyLimit = 6
	// LimitComponentsDealer: the components job's randomness is dealt by
	// the proxy, and the owner takes part only in jobs whose members make
	// their own (--allow-dealer-components).
	LimitComponentsDealer PolicyLimit = 7
)

var limits = map[PolicyLimit]struct {
	name   string
	valued bool
}{
	LimitMaxEpsilon:       {"max_epsilon", true},
	LimitMaxDelta:         {"max_delta", true},
	LimitNoNoise:          {"no_noise", false},
	LimitExactComponents:  {"exact_components", false},
	LimitExactMaxK:        {"exact_components_max_k", true},
	LimitExactJobs:        {"exact_components_jobs", true},
	LimitComponentsDealer: {"components_dealer", false},
}

// String returns the limit's name, e.g. "max_epsilon".
func (l PolicyLimit) String() string {
	if x, ok := limits[l]; ok {
		return x.name
	}
	return fmt.Sprintf("limit(%d)", int32(l))
}

// DeclineDetail is what an owner may say about a decline besides its code:
// facts of its own configuration and of the job's public spec and schema,
// which no row of its can change. Asked of every field, "could one row
// change it?", the answer is no: a policy limit and its value are the
// owner's configuration; a schema field that differs compares two public
// schemas; a column the source lacks is in its header, not in a row. No
// count, value, line or label of its rows has a place here. The zero value
// says nothing more than the code.
type DeclineDetail struct {
	// Limit (code policy) is the policy limit the job exceeds, and
	// LimitValue the owner's limit for the valued ones (max_epsilon,
	// max_delta), 0 for the others.
	Limit      PolicyLimit `json:"limit,omitempty"`
	LimitValue float64     `json:"limit_value,omitempty"`
	// Field (code schema_mismatch) is where the owner reads rows otherwise
	// than the job's schema says (one of schema.ReadingFields), and
	// Feature the index in the job's schema of the feature it belongs to
	// (-1 for the schema's own; unused without a Field).
	Field   string `json:"field,omitempty"`
	Feature int    `json:"feature,omitempty"`
}

// IsZero says whether the detail says nothing.
func (d DeclineDetail) IsZero() bool { return d.Limit == 0 && d.Field == "" }

// Validate checks a detail received with a decline of the given code, for
// a job whose schema has features features: a known limit with a code
// policy, valued (finite, positive) exactly when the limit has a value; or
// a known schema field with a code schema_mismatch, of a feature of the
// job's schema exactly when the field is a feature's.
func (d DeclineDetail) Validate(code Decline, features int) error {
	switch {
	case d.IsZero():
		if d.LimitValue != 0 {
			return fmt.Errorf("decline detail: a value (%g) without a limit", d.LimitValue)
		}
		return nil
	case d.Limit != 0 && d.Field != "":
		return errors.New("decline detail: both a policy limit and a schema field")
	case d.Limit != 0:
		l, ok := limits[d.Limit]
		switch {
		case !ok:
			return fmt.Errorf("decline detail: policy limit %d is not one of the known limits", int32(d.Limit))
		case code != DeclinePolicy:
			return fmt.Errorf("decline detail: a policy limit with code %s", code)
		case l.valued && !(d.LimitValue > 0 && !math.IsInf(d.LimitValue, 0)):
			return fmt.Errorf("decline detail: %s = %v is not a positive number", l.name, d.LimitValue)
		case !l.valued && d.LimitValue != 0:
			return fmt.Errorf("decline detail: %s takes no value, got %v", l.name, d.LimitValue)
		}
		return nil
	}
	switch {
	case code != DeclineSchemaMismatch:
		return fmt.Errorf("decline detail: a schema field with code %s", code)
	case !slices.Contains(schema.ReadingFields, d.Field):
		return fmt.Errorf("decline detail: schema field %.40q is not one of %s", d.Field, strings.Join(schema.ReadingFields, ", "))
	case d.Feature < -1 || d.Feature >= features:
		return fmt.Errorf("decline detail: feature %d of a schema of %d features", d.Feature, features)
	case (d.Feature >= 0) != slices.Contains(schema.FeatureFields, d.Field) && !(d.Field == "missing" && d.Feature == -1):
		return fmt.Errorf("decline detail: field %s with feature %d", d.Field, d.Feature)
	}
	return nil
}

// Explain says a decline with its detail for the user who can fix the job:
// the code's description, then the owner's limit, or the schema field that
// differs (with the name of its feature when features, the job's, are
// given).
func (d Decline) Explain(detail DeclineDetail, features []string) string {
	text := d.Text()
	switch {
	case detail.Limit == LimitMaxEpsilon:
		return fmt.Sprintf("%s: its epsilon is above the owner's limit of %g per job (owner serve --max-epsilon)", text, detail.LimitValue)
	case detail.Limit == LimitMaxDelta:
		return fmt.Sprintf("%s: its delta is above the owner's limit of %g per job (owner serve --max-delta)", text, detail.LimitValue)
	case detail.Limit == LimitNoNoise:
		return text + ": the owner takes part in no job without DP noise"
	case detail.Limit == LimitExactComponents:
		return text + ": the owner takes part in no exact components job (owner serve --allow-exact-components)"
	case detail.Limit == LimitExactMaxK:
		return fmt.Sprintf("%s: it releases at most %g exact components (owner serve --exact-components-max-k)", text, detail.LimitValue)
	case detail.Limit == LimitExactJobs:
		return fmt.Sprintf("%s: its source of rows has taken part in its limit of %g exact components jobs for the period (owner serve --exact-components-jobs)", text, detail.LimitValue)
	case detail.Limit == LimitComponentsDealer:
		return text + ": its randomness is dealt by the proxy, and the owner takes part only in components jobs whose members make their own (owner serve --allow-dealer-components; user run --randomness members)"
	case detail.Field == "id":
		return text + ": the owner serves no dataset of this name"
	case detail.Field != "" && detail.Feature >= 0:
		name := ""
		if detail.Feature < len(features) {
			name = " (" + features[detail.Feature] + ")"
		}
		return fmt.Sprintf("%s: it reads features[%d]%s otherwise, its %q differs from the job's schema", text, detail.Feature, name, detail.Field)
	case detail.Field != "":
		return fmt.Sprintf("%s: it reads the rows otherwise, its %q differs from the job's schema", text, detail.Field)
	}
	return text
}

// SchemaDetail is the detail of a schema_mismatch where a schema reads rows
// otherwise (the zero detail for nil).
func SchemaDetail(d *schema.Difference) DeclineDetail {
	if d == nil {
		return DeclineDetail{}
	}
	return DeclineDetail{Field: d.Field, Feature: d.Feature}
}

// DetailOf builds a detail from its wire fields (fedpca.v1.DeclineDetail;
// a field without a feature is the schema's own, -1); validate it with
// Validate.
func DetailOf(limit int32, value float64, field string, feature int32, hasFeature bool) DeclineDetail {
	d := DeclineDetail{Limit: PolicyLimit(limit), LimitValue: value, Field: field}
	if field != "" {
		d.Feature = -1
		if hasFeature {
			d.Feature = int(feature)
		}
	}
	return d
}

// Wire returns the detail's wire fields (see DetailOf).
func (d DeclineDetail) Wire() (limit int32, value float64, field string, feature *int32) {
	if d.Field != "" && d.Feature >= 0 {
		f := int32(d.Feature)
		feature = &f
	}
	return int32(d.Limit), d.LimitValue, d.Field, feature
}
