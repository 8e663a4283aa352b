package job

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of MatchID.
var (
	ErrNoSuchJob    = errors.New("no job matches")
	ErrAmbiguousJob = errors.New("more than one job matches")
)

// MinPrefix is the shortest job ID prefix MatchID accepts: 4 hex digits
// (logs and listings print 16).
const MinPrefix = 4

// MatchID returns the one job ID of ids that starts with prefix, as git and
// docker resolve abbreviated IDs: the prefix is case-insensitive hex of at
// least MinPrefix digits (a trailing "…" as printed in logs is allowed);
// no match and several matches are errors that say so (ErrNoSuchJob,
// ErrAmbiguousJob), the latter listing the candidates.
func MatchID(ids []string, prefix string) (string, error) {
	p := strings.ToLower(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(prefix), "…")))
	if p == "" {
		return "", errors.New("job ID: empty (give the ID or a unique prefix of it, as `fedpca user jobs` lists them)")
	}
	if len(p) > 64 || strings.Trim(p, "0123456789abcdef") != "" {
		return "", fmt.Errorf("job ID %.70q: want hex digits (the ID or a unique prefix of it)", prefix)
	}
	if len(p) < MinPrefix {
		return "", fmt.Errorf("job ID prefix %q: give at least %d hex digits", p, MinPrefix)
	}
	var found []string
	for _, id := range ids {
		if strings.HasPrefix(id, p) && (len(found) == 0 || found[len(found)-1] != id) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("%w %s", ErrNoSuchJob, p)
	case 1:
		return found[0], nil
	}
	var b strings.Builder
	for i, id := range found {
		if i == 5 {
			fmt.Fprintf(&b, ", and %d more", len(found)-5)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(id[:min(len(id), 16)])
	}
	return "", fmt.Errorf("%w prefix %s (%s): give more digits", ErrAmbiguousJob, p, b.String())
}
