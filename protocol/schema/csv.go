package schema

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Rows is a stream of rows of named string cells: a CSV file, a database
// query, any other source. Reading it keeps memory constant in the number
// of rows. Implementations are not safe for concurrent use.
type Rows interface {
	// Columns returns the column names (trimmed), in the order of the
	// cells of every row.
	Columns() []string
	// Next returns the cells of the next row (valid until the following
	// call), io.EOF at the end, a *RowError for a row that cannot be parsed
	// (reading can go on with the next row), or any other error, which is
	// final (the source cannot be read).
	Next() ([]string, error)
	// Line returns the position of the row Next returned last, counted as
	// lines of a CSV export with a header: the first row is line 2.
	Line() int
}

// CSVOptions say how to read a CSV file. None of them changes the values
// read (that is the schema's business), so they are not in the schema.
type CSVOptions struct {
	// Delimiter is ',', ';' or '\t'; 0 detects it from the header line
	// (the one of the three that appears most often outside quotes; ',' on
	// a tie).
	Delimiter rune
}

// bom is the UTF-8 byte order mark that Excel's "CSV UTF-8" writes.
const bom = "\ufeff"

// CSVRows reads a CSV file with a header: a UTF-8 byte order mark is
// dropped, header names are trimmed, the delimiter is detected or given,
// quoted fields and CRLF line ends are read as RFC 4180 says. Every row
// must have as many fields as the header. Not safe for concurrent use.
type CSVRows struct {
	csv    *csv.Reader
	header []string
	line   int
}

// NewCSVRows reads the header of a CSV file.
func NewCSVRows(r io.Reader, opt CSVOptions) (*CSVRows, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	if b, err := br.Peek(len(bom)); err == nil && string(b) == bom {
		_, _ = br.Discard(len(bom))
	}
	delim := opt.Delimiter
	if delim == 0 {
		delim = DetectDelimiter(peekLine(br))
	}
	switch delim {
	case ',', ';', '\t', '|':
	default:
		return nil, fmt.Errorf("csv: delimiter %q is not one of ',' ';' tab '|'", delim)
	}
	cr := csv.NewReader(br)
	cr.Comma = delim
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		if err == io.EOF {
			return nil, &RowError{Line: 1, Err: errors.New("empty file: no header")}
		}
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return nil, &RowError{Line: 1, Err: fmt.Errorf("header: %v", pe.Err)}
		}
		return nil, &RowError{Line: 1, Err: err}
	}
	h := make([]string, len(header))
	for i, c := range header {
		if !utf8.ValidString(c) {
			return nil, &RowError{Line: 1, Column: c, Err: errors.New("header name is not valid UTF-8 (save the file as UTF-8)")}
		}
		h[i] = strings.TrimSpace(c)
	}
	return &CSVRows{csv: cr, header: h, line: 1}, nil
}

// peekLine returns the first line of br without consuming it (at most
// what the buffer holds, 64 KiB).
func peekLine(br *bufio.Reader) []byte {
	for n := 4096; ; n *= 2 {
		b, err := br.Peek(n)
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			return b[:i]
		}
		if err != nil || n >= br.Size() {
			return b
		}
	}
}

// DetectDelimiter returns the delimiter of a header line: the one of ',',
// ';', tab and '|' that appears most often outside double quotes, ',' when
// none does or on a tie with ','.
func DetectDelimiter(line []byte) rune {
	var n [4]int
	quoted := false
	for _, c := range line {
		switch c {
		case '"':
			quoted = !quoted
		case ',':
			if !quoted {
				n[0]++
			}
		case ';':
			if !quoted {
				n[1]++
			}
		case '\t':
			if !quoted {
				n[2]++
			}
		case '|':
			if !quoted {
				n[3]++
			}
		}
	}
	best, delim := n[0], ','
	for i, d := range []rune{';', '\t', '|'} {
		if n[i+1] > best {
			best, delim = n[i+1], d
		}
	}
	return delim
}

// Columns returns the trimmed header names.
func (c *CSVRows) Columns() []string { return c.header }

// Line returns the line the last row started on.
func (c *CSVRows) Line() int { return c.line }

// Delimiter returns the delimiter in use.
func (c *CSVRows) Delimiter() rune { return c.csv.Comma }

// Next returns the next row's fields.
func (c *CSVRows) Next() ([]string, error) {
	rec, err := c.csv.Read()
	if err == io.EOF {
		return nil, io.EOF
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		c.line = pe.StartLine
		if c.line == 0 {
			c.line = pe.Line
		}
		return nil, &RowError{Line: c.line, Err: fmt.Errorf("%v (quote fields that hold the delimiter or a quote, and double the quotes inside)", pe.Err)}
	}
	if err != nil {
		return nil, fmt.Errorf("after line %d: %w", c.line, err)
	}
	c.line, _ = c.csv.FieldPos(0)
	if len(rec) != len(c.header) {
		return nil, &RowError{Line: c.line, Err: fmt.Errorf("wrong number of fields: the row has %d, the header %d", len(rec), len(c.header))}
	}
	return rec, nil
}
