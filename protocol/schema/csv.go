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

// Computed is implemented by a source whose columns may be computed by a
// query rather than read from a table (a database query): Computed names
// those. A value that such a column cannot convert (a cast of a text that
// is not a number, a division by zero) stops the query part-way on that
// row, so whether the source can be read would depend on a row; the schema
// therefore reads no computed column (Schema.CheckSource) and converts the
// table's values itself, skipping a row it cannot convert.
type Computed interface {
	Computed() []string
}

// CheckSource refuses a source that computes a column the schema reads
// (see Computed), with a *RowError for line 1 (the header's: the source
// does not fit the schema) naming the column. It depends on the query, not
// on the rows.
func (s *Schema) CheckSource(src Rows, useClasses bool) error {
	c, ok := src.(Computed)
	if !ok {
		return nil
	}
	computed := c.Computed()
	for _, col := range s.Columns(useClasses) {
		for _, name := range computed {
			if strings.EqualFold(strings.TrimSpace(name), strings.TrimSpace(col)) {
				return &RowError{Line: 1, Column: col, Err: errors.New("computed by the query (an expression, a cast or a constant, not a column of a table): " +
					"a value it cannot convert would stop the query part-way; select the table's column itself and let the schema convert it " +
					"(its center, scale, bounds, missing-value and categorical options)")}
			}
		}
	}
	return nil
}

// CSVOptions say how a CSV file is written: its format, which one owner's
// export may have and another's not. None of them changes the values read
// (1,5 written with a decimal comma is 1.5), so they are not in the
// schema.
type CSVOptions struct {
	// Delimiter is ',', ';' or '\t'; 0 detects it from the header line
	// (the one of the three that appears most often outside quotes; ',' on
	// a tie).
	Delimiter rune
	// DecimalComma says that the file writes numbers with a decimal comma
	// ("1,5" is 1.5, European spreadsheets); the delimiter is then not ','.
	DecimalComma bool
}

// DecimalMarked is implemented by a source that says how it writes
// numbers: a CSV file exported with decimal commas (CSVOptions). The
// schema reads such a source's numbers with a decimal comma, as it reads
// every source's under its own decimal_comma option.
type DecimalMarked interface {
	DecimalComma() bool
}

// bom is the UTF-8 byte order mark that Excel's "CSV UTF-8" writes.
const bom = "\ufeff"

// CSVRows reads a CSV file with a header: a UTF-8 byte order mark is
// dropped, header names are trimmed, the delimiter is detected or given,
// quoted fields and CRLF line ends are read as RFC 4180 says. Every row
// must have as many fields as the header. Not safe for concurrent use.
//
// Rows are read one physical line at a time. A line without a double quote
// is split directly (one string per row, as encoding/csv makes, cells
// sliced out of it). A line with one is a record of its own when its
// quotes balance, or the start of a record whose quoted field goes on over
// the next lines until they do (at most maxQuotedSpan bytes more); that
// record is parsed by encoding/csv. A record that does not parse (a bare or
// stray quote, a quote never closed) is refused as a *RowError for its
// first line alone, and reading resumes at the line after it: one line with
// an unbalanced quote costs that line, never the rest of the file. On files
// encoding/csv reads without error both read the same records on the same
// lines (FuzzCSVRowsFastPath); empty lines are skipped, a trailing "\r\n"
// or, at the end of the file, "\r" dropped.
type CSVRows struct {
	br           *bufio.Reader
	comma        rune
	decimalComma bool
	header       []string
	line         int // the line the last row started on
	read         int // the physical lines read so far (the header's included)
	rec          []string
	// back holds lines read ahead for a record that did not parse, to be
	// read again.
	back []physLine
}

// physLine is a physical line, its "\n" included, and its number.
type physLine struct {
	b  []byte
	no int
}

// maxQuotedSpan bounds how far past its first line a quoted field may
// reach (bytes): a quote left open is given up there, not at the end of the
// file.
const maxQuotedSpan = 1 << 20

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
	if delim == ',' && opt.DecimalComma {
		return nil, errors.New("csv: decimal commas with ',' as the delimiter: a file that writes 1,5 for 1.5 separates its cells with ';' or a tab (give it as delimiter=;)")
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
	return &CSVRows{br: br, comma: delim, decimalComma: opt.DecimalComma, header: h, line: line, read: line}, nil
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
func (c *CSVRows) Delimiter() rune { return c.comma }

// DecimalComma says whether the file writes decimal commas (DecimalMarked).
func (c *CSVRows) DecimalComma() bool { return c.decimalComma }

// Next returns the next row's fields.
func (c *CSVRows) Next() ([]string, error) {
	for {
		l, err := c.physical()
		if err != nil {
			return nil, err
		}
		b := trimEOL(l.b)
		if len(b) == 0 {
			continue // an empty line
		}
		c.line = l.no
		if bytes.IndexByte(b, '"') < 0 {
			return c.check(c.split(string(b)))
		}
		return c.quoted(l)
	}
}

// physical returns the next physical line: one read ahead before, or the
// next of the file; io.EOF at its end.
func (c *CSVRows) physical() (physLine, error) {
	if len(c.back) > 0 {
		l := c.back[0]
		c.back = c.back[1:]
		return l, nil
	}
	var long []byte // a line longer than br's buffer, gathered
	for {
		frag, err := c.br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long, frag...)
			continue
		}
		b := frag // valid until the next read
		if long != nil {
			b = append(long, frag...)
		}
		switch {
		case len(b) == 0 && err == io.EOF:
			return physLine{}, io.EOF
		case err != nil && err != io.EOF:
			return physLine{}, fmt.Errorf("after line %d: %w", c.read, err)
		}
		c.read++
		return physLine{b: b, no: c.read}, nil
	}
}

// trimEOL drops what encoding/csv drops at the end of a line: "\n" or
// "\r\n", or a "\r" at the end of the file.
func trimEOL(b []byte) []byte {
	n := len(b)
	switch {
	case n >= 2 && b[n-2] == '\r' && b[n-1] == '\n':
		return b[:n-2]
	case n >= 1 && b[n-1] == '\n':
		return b[:n-1]
	case n >= 1 && b[n-1] == '\r':
		return b[:n-1] // the last line (a line read whole ends in "\n")
	}
	return b
}

// split cuts a quote-free line at the delimiter.
func (c *CSVRows) split(line string) []string {
	rec := c.rec[:0]
	for {
		i := strings.IndexByte(line, byte(c.comma)) // an ASCII delimiter: NewCSVRows
		if i < 0 {
			break
		}
		rec = append(rec, line[:i])
		line = line[i+1:]
	}
	c.rec = append(rec, line)
	return c.rec
}

// quoted reads a record that starts with a line holding a quote: the
// lines until its quotes balance, parsed by encoding/csv. A record that
// does not parse is refused for its first line; the lines after it are
// read again.
func (c *CSVRows) quoted(first physLine) ([]string, error) {
	text := append([]byte(nil), first.b...)
	var more []physLine
	quotes := bytes.Count(first.b, []byte{'"'})
	for quotes%2 == 1 && len(text)-len(first.b) <= maxQuotedSpan {
		l, err := c.physical()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		l.b = append([]byte(nil), l.b...) // read ahead: keep it
		more = append(more, l)
		text = append(text, l.b...)
		quotes += bytes.Count(l.b, []byte{'"'})
	}
	bad := func(why error) ([]string, error) {
		c.back = append(more, c.back...)
		return nil, &RowError{Line: first.no, Err: fmt.Errorf("%v (the line is skipped; quote fields that hold the delimiter or a quote, and double the quotes inside)", why)}
	}
	if quotes%2 == 1 {
		if len(text)-len(first.b) > maxQuotedSpan {
			return bad(fmt.Errorf("a quoted field is still open %d bytes further on", maxQuotedSpan))
		}
		return bad(errors.New("a quoted field is never closed"))
	}
	cr := csv.NewReader(bytes.NewReader(text))
	cr.Comma, cr.FieldsPerRecord = c.comma, -1
	rec, err := cr.Read()
	if err != nil {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return bad(err)
	}
	if _, err := cr.Read(); err != io.EOF {
		return bad(errors.New("a line break outside quotes within the record"))
	}
	return c.check(rec)
}

// check refuses a row whose number of fields is not the header's.
func (c *CSVRows) check(rec []string) ([]string, error) {
	if len(rec) != len(c.header) {
		return nil, &RowError{Line: c.line, Err: fmt.Errorf("wrong number of fields: the row has %d, the header %d", len(rec), len(c.header))}
	}
	return rec, nil
}
