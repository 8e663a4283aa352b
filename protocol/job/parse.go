package job

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/fedpca/fedpca/protocol/stats"
)

// MaxResultBytes bounds an encoded result document (the release dominates:
// d(d+1)/2 + K(d+1) integers).
const MaxResultBytes = 64 << 20

// ParseResult decodes a result document (result.json, or one a user
// published through the proxy) and validates it (Validate), so that
// everything that reads it afterwards (re-analysis, projection) can rely on
// its shape.
func ParseResult(b []byte) (*Result, error) {
	if len(b) > MaxResultBytes {
		return nil, fmt.Errorf("result: %d bytes exceed %d", len(b), MaxResultBytes)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("result: %w", err)
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return &r, nil
}

// Validate checks that a result document is consistent: its identifiers are
// well formed, the release has a valid layout, the feature and class names
// match it, and the components (if any) are of the analysis and dimension
// of the release. Errors name the field.
func (r *Result) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("result: %s: %s", field, fmt.Sprintf(format, args...))
	}
	if !ValidJobID(r.JobID) {
		return bad("job_id", "want 64 lower-case hex digits")
	}
	if !ValidID(r.Dataset) {
		return bad("dataset", "%q is not a valid id", r.Dataset)
	}
	if !hexHash.MatchString(r.SchemaHash) {
		return bad("schema_hash", "want 64 lower-case hex digits")
	}
	if !slices.Contains(Analyses, r.Analysis) {
		return bad("analysis", "%q, want one of %s", r.Analysis, strings.Join(Analyses, ", "))
	}
	if r.HEParams == "" {
		return bad("he_params", "missing")
	}
	switch r.Released {
	case ReleaseStatistics:
		if r.Output != nil || r.Power != nil {
			return bad("output", "present in a result of the statistics")
		}
	case ReleaseComponents, ReleasePower:
		return r.validateComponents(bad)
	default:
		return bad("released", "%q, want none (the statistics), %q or %q", r.Released, ReleaseComponents, ReleasePower)
	}
	if r.Release == nil {
		return bad("release", "missing")
	}
	rel, err := r.Release.Release()
	if err != nil {
		return bad("release", "%v", err)
	}
	d, k := rel.Layout.D, rel.Layout.K
	if len(r.Features) != d {
		return bad("features", "%d names for d = %d", len(r.Features), d)
	}
	if err := distinctNames(r.Features, func(string) bool { return true }); err != nil {
		return bad("features", "%v", err)
	}
	switch {
	case (rel.Layout.Kind == stats.Histogram || rel.Layout.Kind == stats.Marginals) && len(r.Classes) != 0:
		return bad("classes", "%d names for a %s release (its buckets are not classes)", len(r.Classes), rel.Layout.Kind)
	case rel.Layout.Kind == stats.Histogram || rel.Layout.Kind == stats.Marginals:
	case k == 1 && len(r.Classes) != 0:
		return bad("classes", "%d names for a release without classes", len(r.Classes))
	case k > 1 && len(r.Classes) != k:
		return bad("classes", "%d names for k = %d", len(r.Classes), k)
	}
	if err := distinctNames(r.Classes, func(string) bool { return true }); err != nil {
		return bad("classes", "%v", err)
	}
	if err := r.validateParties(bad); err != nil {
		return err
	}
	c := r.Components
	switch {
	case !r.solved() && c != nil:
		return bad("components", "present for analysis %s", r.Analysis)
	case r.solved() && c == nil:
		return bad("components", "missing for analysis %s", r.Analysis)
	case c != nil && c.Analysis != r.Analysis:
		return bad("components", "of analysis %s in a %s result", c.Analysis, r.Analysis)
	case c != nil:
		if cd, _ := c.Dims(); cd != d {
			return bad("components", "of dimension %d for d = %d", cd, d)
		}
	}
	return nil
}

// validateComponents checks a components job's result: PCA, DCA or LDA,
// the output of the features' dimension, and nothing derived from the
// statistics (no release, components' fields or classes; quality figures
// only with noise).
func (r *Result) validateComponents(bad func(field, format string, args ...any) error) error {
	switch {
	case r.Analysis != PCA && r.Analysis != DCA && r.Analysis != LDA:
		return bad("analysis", "%s in a components result, want %s, %s or %s", r.Analysis, PCA, DCA, LDA)
	case r.Release != nil:
		return bad("release", "present in a components result")
	case r.Components != nil:
		return bad("mean", "statistics' components (mean, all eigenvalues) in a components result")
	case r.Quality != nil && r.Privacy.NoNoise:
		return bad("quality", "present in an exact components result")
	case len(r.Classes) != 0:
		return bad("classes", "%d names in a components result", len(r.Classes))
	case r.Output == nil:
		return bad("output", "missing")
	case (r.Released == ReleasePower) != (r.Power != nil):
		return bad("power", "a power-method result, and only one, says how its rounds ran")
	case r.Released == ReleasePower && r.Analysis != PCA:
		return bad("analysis", "%s in a power-method result, want %s", r.Analysis, PCA)
	}
	if len(r.Features) == 0 {
		return bad("features", "none")
	}
	if err := distinctNames(r.Features, func(string) bool { return true }); err != nil {
		return bad("features", "%v", err)
	}
	if err := r.Output.Validate(len(r.Features)); err != nil {
		return bad("output", "%v", err)
	}
	return r.validateParties(bad)
}

// validateParties checks what every result says of its parties: distinct
// valid owner IDs, their number, and the privacy's ranges.
func (r *Result) validateParties(bad func(field, format string, args ...any) error) error {
	if err := distinctNames(r.Owners, ValidID); err != nil {
		return bad("owners", "%v", err)
	}
	if r.NumOwners != len(r.Owners) {
		return bad("num_owners", "%d, but %d owners are named", r.NumOwners, len(r.Owners))
	}
	if r.Privacy.Tolerate < 0 || !(r.Privacy.Delta >= 0 && r.Privacy.Delta < 1) {
		return bad("privacy", "tolerate %d, delta %v out of range", r.Privacy.Tolerate, r.Privacy.Delta)
	}
	return nil
}

// distinctNames checks that names are non-empty, distinct and valid.
func distinctNames(names []string, valid func(string) bool) error {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if n == "" || !valid(n) {
			return fmt.Errorf("%q is not a valid name", n)
		}
		if seen[n] {
			return fmt.Errorf("%q appears twice", n)
		}
		seen[n] = true
	}
	return nil
}

// solved reports whether the result's analysis has components (the release
// only, for scatter and the profile rounds).
func (r *Result) solved() bool {
	return r.Analysis == PCA || r.Analysis == DCA || r.Analysis == LDA
}
