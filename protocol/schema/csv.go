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
//
// Lines without a double quote are split directly (one string per row, as
// encoding/csv makes, cells sliced out of it); from the first line with a
// quote on, or a line longer than the buffer, encoding/csv reads the rest
// of the file. Both read quote-free lines alike (a trailing "\r\n" or, at
// the end of the file, "\r" is dropped; empty lines are skipped), which
// FuzzCSVRowsFastPath checks against encoding/csv alone.
type CSVRows struct {
	csv    *csv.Reader
	br     *bufio.Reader
	header []string
	line   int
	rec    []string
	// slow is set once encoding/csv reads the rest; its line numbers then
	// start after base lines.
	slow bool
	base int
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
	// cr read the header straight from br (csv.NewReader keeps a
	// *bufio.Reader of at least its size), so br is at the line after it:
	// the header started at line, after any empty lines, and spans one
	// more for each line break inside its quoted names.
	line, _ := cr.FieldPos(0)
	for _, c := range header {
		line += strings.Count(c, "\n")
	}
	return &CSVRows{csv: cr, br: br, header: h, line: line}, nil
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
	if !c.slow {
		rec, err := c.nextPlain()
		if err != nil || rec != nil {
			return rec, err
		}
	}
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
		c.line += c.base
		return nil, &RowError{Line: c.line, Err: fmt.Errorf("%v (quote fields that hold the delimiter or a quote, and double the quotes inside)", pe.Err)}
	}
	if err != nil {
		return nil, fmt.Errorf("after line %d: %w", c.line, err)
	}
	c.line, _ = c.csv.FieldPos(0)
	c.line += c.base
	return c.check(rec)
}

// nextPlain reads the next non-empty line if it has no double quote and
// splits it at the delimiter. Otherwise it hands the line and the rest of
// the file to encoding/csv (c.slow) and returns nil.
func (c *CSVRows) nextPlain() ([]string, error) {
	for {
		b, err := c.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull || bytes.IndexByte(b, '"') >= 0 {
			// Hand over: encoding/csv reads this line again, then the rest.
			rest := io.MultiReader(bytes.NewReader(bytes.Clone(b)), c.br)
			comma := c.csv.Comma
			c.csv = csv.NewReader(rest)
			c.csv.Comma, c.csv.ReuseRecord, c.csv.FieldsPerRecord = comma, true, -1
			c.slow, c.base = true, c.line
			return nil, nil
		}
		if len(b) == 0 && err == io.EOF {
			return nil, io.EOF
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("after line %d: %w", c.line, err)
		}
		c.line++
		// As encoding/csv: drop "\n" or "\r\n"; at the end of the file a
		// trailing "\r"; skip what is then empty.
		n := len(b)
		switch {
		case n >= 2 && b[n-2] == '\r' && b[n-1] == '\n':
			b = b[:n-2]
		case n >= 1 && b[n-1] == '\n':
			b = b[:n-1]
		case n >= 1 && b[n-1] == '\r' && err == io.EOF:
			b = b[:n-1]
		}
		if len(b) == 0 {
			if err == io.EOF {
				return nil, io.EOF
			}
			continue
		}
		line := string(b)
		rec := c.rec[:0]
		for {
			i := strings.IndexByte(line, byte(c.csv.Comma)) // an ASCII delimiter: NewCSVRows
			if i < 0 {
				break
			}
			rec = append(rec, line[:i])
			line = line[i+1:]
		}
		c.rec = append(rec, line)
		return c.check(c.rec)
	}
}

// check refuses a row whose number of fields is not the header's.
func (c *CSVRows) check(rec []string) ([]string, error) {
	if len(rec) != len(c.header) {
		return nil, &RowError{Line: c.line, Err: fmt.Errorf("wrong number of fields: the row has %d, the header %d", len(rec), len(c.header))}
	}
	return rec, nil
}
