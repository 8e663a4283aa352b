package source

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParsePG: any string as a postgres:// source spec. An accepted spec
// has a query and a connection string without this package's parameters;
// Redact never leaves a password in what it returns, and never panics.
func FuzzParsePG(f *testing.F) {
	f.Add("postgres://u:pw@h:5432/db?table=t")
	f.Add("postgresql://u@h/db?query=SELECT%20*%20FROM%20x%3B&sslmode=disable")
	f.Add("postgres://u@h/db?table=s.t&fetch=10&password_file=/p")
	f.Add("postgres://u:p%40ss@h/db?table=%22weird%22.t")
	f.Add("postgres://h/db?table=a&query=b")
	f.Add("postgres://u:pw@[::1]:5432/db?password=pw2&table=t")
	f.Fuzz(func(t *testing.T, spec string) {
		red := Redact(spec)
		if u, err := url.Parse(spec); err == nil {
			if p, ok := u.User.Password(); ok && len(p) >= 6 && strings.Contains(red, p) && !strings.Contains(spec[len(u.Scheme):], p+p) {
				ru, _ := url.Parse(red)
				if ru != nil {
					if rp, ok := ru.User.Password(); ok && rp != "xxxxx" {
						t.Fatalf("Redact(%q) = %q keeps the password", spec, red)
					}
				}
			}
		}
		p, err := ParsePG(spec)
		if err != nil {
			return
		}
		if strings.TrimSpace(p.Query) == "" || p.Fetch < 1 {
			t.Fatalf("accepted %q with query %q fetch %d", spec, p.Query, p.Fetch)
		}
		u, err := url.Parse(p.Conn)
		if err != nil {
			t.Fatalf("connection string %q does not parse: %v", p.Conn, err)
		}
		for _, k := range []string{"table", "query", "query_file", "password_file", "fetch"} {
			if u.Query().Has(k) {
				t.Fatalf("connection string %q keeps %s", p.Conn, k)
			}
		}
		if p.Table != "" && !strings.HasPrefix(p.Query, `SELECT * FROM "`) {
			t.Fatalf("table %q gives query %q", p.Table, p.Query)
		}
	})
}

// FuzzCSVSpec: any string as a CSV source spec (path, file:// URL,
// #delimiter= and decimal_comma= options).
func FuzzCSVSpec(f *testing.F) {
	f.Add("data/x.csv")
	f.Add("data/x.csv#delimiter=;")
	f.Add("data/x.csv#delimiter=;&decimal_comma=true")
	f.Add("file:///tmp/x.csv?decimal_comma=1&sep=tab")
	f.Add("file:///tmp/x.csv?delimiter=tab")
	f.Add("file://host/x")
	f.Add("x.csv#sep=%3B")
	f.Fuzz(func(t *testing.T, spec string) {
		path, opt, err := ParseCSVSpec(spec)
		if err != nil {
			return
		}
		if path == "" {
			t.Fatal("empty path accepted")
		}
		switch opt.Delimiter {
		case 0, ',', ';', '\t', '|':
		default:
			t.Fatalf("delimiter %q", opt.Delimiter)
		}
	})
}
