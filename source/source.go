package source

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/fedpca/fedpca/protocol/schema"
)

// Rows is an open source: a row stream to close when done. Not safe for
// concurrent use.
type Rows interface {
	schema.Rows
	Close() error
}

// Opener opens a spec of its scheme.
type Opener func(ctx context.Context, spec string) (Rows, error)

var (
	mu      sync.RWMutex
	openers = map[string]Opener{}
)

// Register makes Open use fn for specs with one of the schemes ("file" is
// the default for specs without a scheme).
func Register(fn Opener, schemes ...string) {
	mu.Lock()
	defer mu.Unlock()
	for _, s := range schemes {
		openers[s] = fn
	}
}

// Schemes lists the registered schemes.
func Schemes() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for s := range openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

var schemeRE = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*)://`)

// Scheme returns the scheme of a spec ("file" for a plain path).
func Scheme(spec string) string {
	if m := schemeRE.FindStringSubmatch(spec); m != nil {
		return strings.ToLower(m[1])
	}
	return "file"
}

// Open opens a source by its spec. Errors never quote a password.
func Open(ctx context.Context, spec string) (Rows, error) {
	sch := Scheme(spec)
	mu.RLock()
	fn := openers[sch]
	mu.RUnlock()
	if fn == nil {
		return nil, fmt.Errorf("source %s: no driver for scheme %q (have %s)", Redact(spec), sch, strings.Join(Schemes(), ", "))
	}
	r, err := fn(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("source %s: %w", Redact(spec), redactErr(spec, err))
	}
	return r, nil
}

// Redact returns a spec with any password (in the URL's user information
// or a password= parameter) replaced by xxxxx.
func Redact(spec string) string {
	u, err := url.Parse(spec)
	if err != nil {
		if Scheme(spec) == "file" && !strings.Contains(spec, "@") {
			return spec // a path
		}
		// Do not echo what we cannot parse: it may hold a password.
		return Scheme(spec) + "://(unparsable URL, redacted)"
	}
	q := u.Query()
	hasPW := false
	for k := range q {
		if strings.EqualFold(k, "password") {
			q.Set(k, "xxxxx")
			hasPW = true
		}
	}
	if _, ok := u.User.Password(); !ok && !hasPW {
		return spec
	}
	if hasPW {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// secrets returns the passwords a spec holds.
func secrets(spec string) []string {
	u, err := url.Parse(spec)
	if err != nil {
		return nil
	}
	var out []string
	if p, ok := u.User.Password(); ok && p != "" {
		out = append(out, p, url.QueryEscape(p), url.PathEscape(p))
	}
	for k, v := range u.Query() {
		if strings.EqualFold(k, "password") {
			for _, p := range v {
				if p != "" {
					out = append(out, p, url.QueryEscape(p))
				}
			}
		}
	}
	return out
}

// redactedError is an error whose text had passwords removed.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactErr removes any password of spec from err's text (keeping the
// chain for errors.Is/As).
func redactErr(spec string, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets(spec) {
		if strings.Contains(msg, s) {
			msg, changed = strings.ReplaceAll(msg, s, "xxxxx"), true
		}
	}
	if !changed {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// RowsOf wraps a schema.Rows with no resources as a Rows.
func RowsOf(r schema.Rows) Rows { return nopCloser{r} }

type nopCloser struct{ schema.Rows }

func (nopCloser) Close() error { return nil }

// Key names the rows a spec reads, for keeping one privacy ledger per
// source whatever schema reads it: a file by its absolute path with
// symbolic links resolved ("file:/data/x.csv"; its options, such as the
// delimiter, do not change the rows), a database by its host, port and
// database and the query with its white space collapsed
// ("postgres://host:5432/db?query=SELECT * FROM t"; a table= spec is its
// query; the user and password are not part of it). Two specs with the same
// key read the same rows. Two different queries over one table do not have
// the same key: an owner serving both must join their ledgers itself
// (owner.Dataset.Ledger).
func Key(spec string) (string, error) {
	switch Scheme(spec) {
	case "file":
		path, _, err := ParseCSVSpec(spec)
		if err != nil {
			return "", err
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return "", err
		}
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			abs = r
		}
		return "file:" + abs, nil
	case "plink":
		prefix := strings.TrimPrefix(spec, "plink://")
		for _, ext := range []string{".bed", ".bim", ".fam"} {
			prefix = strings.TrimSuffix(prefix, ext)
		}
		abs, err := filepath.Abs(prefix)
		if err != nil {
			return "", err
		}
		if r, err := filepath.EvalSymlinks(abs + ".bed"); err == nil {
			abs = strings.TrimSuffix(r, ".bed")
		}
		return "plink:" + abs, nil
	case "postgres", "postgresql":
		p, err := ParsePG(spec)
		if err != nil {
			return "", err
		}
		return p.key()
	}
	return "", fmt.Errorf("source %s: no key for scheme %q", Redact(spec), Scheme(spec))
}
