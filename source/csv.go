package source

import (
	"bufio"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/fedpca/fedpca/protocol/schema"
)

func init() { Register(openCSV, "file") }

// openCSV opens a CSV file: a path, or file://PATH. Options go after a '?'
// in a file:// URL, or after '#' on a plain path, joined by '&': the file's
// format, delimiter=; (or semicolon, comma, tab, pipe) and
// decimal_comma=true (numbers written 1,5). A file is gunzipped when its
// name ends in .gz or it starts with gzip's magic bytes.
func openCSV(_ context.Context, spec string) (Rows, error) {
	path, opt, err := ParseCSVSpec(spec)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := newCSV(f, opt, strings.HasSuffix(strings.ToLower(path), ".gz"))
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// ParseCSVSpec splits a CSV spec into the path and the options.
func ParseCSVSpec(spec string) (string, schema.CSVOptions, error) {
	var opt schema.CSVOptions
	path, query := spec, ""
	if strings.HasPrefix(spec, "file://") {
		u, err := url.Parse(spec)
		if err != nil {
			return "", opt, err
		}
		path, query = u.Path, u.RawQuery
		if u.Host != "" && u.Host != "localhost" {
			return "", opt, fmt.Errorf("file URL with host %q: use file:///absolute/path", u.Host)
		}
	} else if i := strings.LastIndexByte(spec, '#'); i >= 0 && strings.Contains(spec[i:], "=") {
		path, query = spec[:i], spec[i+1:]
	}
	// Options are KEY=VALUE joined by '&', values URL-escaped or not: ';'
	// is a delimiter here, not a separator (url.ParseQuery refuses it).
	for _, kv := range strings.Split(query, "&") {
		if kv == "" {
			continue
		}
		k, raw, _ := strings.Cut(kv, "=")
		v, err := url.QueryUnescape(raw)
		if err != nil {
			return "", opt, fmt.Errorf("option %q: %w", kv, err)
		}
		switch k {
		case "delimiter", "delim", "sep":
			if opt.Delimiter, err = ParseDelimiter(v); err != nil {
				return "", opt, err
			}
		case "decimal_comma":
			if opt.DecimalComma, err = strconv.ParseBool(v); err != nil {
				return "", opt, fmt.Errorf("decimal_comma=%q: want true or false", v)
			}
		default:
			return "", opt, fmt.Errorf("unknown CSV option %q (known: delimiter, decimal_comma)", k)
		}
	}
	if path == "" {
		return "", opt, fmt.Errorf("no file name")
	}
	return path, opt, nil
}

// ParseDelimiter reads a delimiter: one of , ; tab | or its name.
func ParseDelimiter(s string) (rune, error) {
	switch strings.ToLower(s) {
	case ",", "comma":
		return ',', nil
	case ";", "semicolon":
		return ';', nil
	case "\t", "tab", `\t`:
		return '\t', nil
	case "|", "pipe":
		return '|', nil
	case "", "auto":
		return 0, nil
	}
	return 0, fmt.Errorf("delimiter %q: want one of , ; tab | (or auto)", s)
}

type csvRows struct {
	*schema.CSVRows
	closers []io.Closer
}

func (c *csvRows) Close() error {
	var first error
	for _, cl := range c.closers {
		if err := cl.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// NewCSV reads CSV rows from r (gunzipping it when it starts with gzip's
// magic bytes, whatever its name); closing the Rows closes r when it is an io.Closer.
func NewCSV(r io.Reader, opt schema.CSVOptions) (Rows, error) { return newCSV(r, opt, false) }

func newCSV(r io.Reader, opt schema.CSVOptions, mustGzip bool) (Rows, error) {
	out := &csvRows{}
	if c, ok := r.(io.Closer); ok {
		out.closers = append(out.closers, c)
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var in io.Reader = br
	if b, err := br.Peek(2); err == nil && b[0] == 0x1f && b[1] == 0x8b {
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		out.closers = append([]io.Closer{z}, out.closers...)
		in = z
	} else if mustGzip {
		return nil, fmt.Errorf("the name ends in .gz but the file is not gzip (rename it, or compress it)")
	}
	rows, err := schema.NewCSVRows(in, opt)
	if err != nil {
		return nil, err
	}
	out.CSVRows = rows
	return out, nil
}
