package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func init() { Register(openPostgres, "postgres", "postgresql") }

// PGSpec is a parsed postgres:// source spec.
type PGSpec struct {
	// Conn is the connection string for pgx (the URL without this
	// package's parameters); it may hold a password: never log it.
	Conn string
	// Query is the SQL to read: the query= or query_file= parameter, or
	// SELECT * FROM the table= parameter.
	Query string
	// Table is the table= parameter ("" with a query).
	Table string
	// PasswordFile is the password_file= parameter: a file whose first
	// line is the password.
	PasswordFile string
	// Fetch is how many rows each FETCH brings (fetch=, default 1000).
	Fetch int
}

// DefaultFetch is the number of rows a FETCH brings by default.
const DefaultFetch = 1000

// ParsePG parses postgres://USER@HOST:PORT/DB?table=NAME (or query=SQL,
// URL-encoded, or query_file=PATH), with optional password_file=PATH and
// fetch=N; other parameters (sslmode, ...) are libpq's and go to the
// driver. A password may be in the URL, in password_file, in PGPASSWORD or
// in the PGPASSFILE/.pgpass file (the driver reads the PG* environment
// variables).
func ParsePG(spec string) (*PGSpec, error) {
	u, err := url.Parse(spec)
	if err != nil {
		return nil, errors.New("not a valid URL (percent-encode special characters in the user, password and query)")
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("scheme %q is not postgres", u.Scheme)
	}
	q := u.Query()
	p := &PGSpec{Fetch: DefaultFetch}
	take := func(k string) string {
		v := q.Get(k)
		q.Del(k)
		return v
	}
	p.Table, p.Query = take("table"), take("query")
	qf := take("query_file")
	p.PasswordFile = take("password_file")
	if f := take("fetch"); f != "" {
		if p.Fetch, err = strconv.Atoi(f); err != nil || p.Fetch < 1 || p.Fetch > 1_000_000 {
			return nil, fmt.Errorf("fetch=%q: want a number of rows in 1..1000000", f)
		}
	}
	n := 0
	for _, v := range []string{p.Table, p.Query, qf} {
		if v != "" {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("give exactly one of table=NAME, query=SQL (URL-encoded) and query_file=PATH")
	}
	if qf != "" {
		b, err := os.ReadFile(qf)
		if err != nil {
			return nil, fmt.Errorf("query_file: %w", err)
		}
		p.Query = string(b)
	}
	if p.Table != "" {
		var id pgx.Identifier
		for _, part := range strings.Split(p.Table, ".") {
			if part == "" {
				return nil, fmt.Errorf("table=%q: empty name part", p.Table)
			}
			id = append(id, part)
		}
		p.Query = "SELECT * FROM " + id.Sanitize()
	}
	p.Query = strings.TrimRight(strings.TrimSpace(p.Query), ";")
	if strings.TrimSpace(p.Query) == "" {
		return nil, errors.New("the query is empty")
	}
	u.RawQuery = q.Encode()
	p.Conn = u.String()
	return p, nil
}

// key is the source's ledger key (Key): host, port, database and query.
func (p *PGSpec) key() (string, error) {
	cfg, err := pgx.ParseConfig(p.Conn)
	if err != nil {
		return "", fmt.Errorf("connection parameters: %w", err)
	}
	return fmt.Sprintf("postgres://%s:%d/%s?query=%s", cfg.Host, cfg.Port, cfg.Database, strings.Join(strings.Fields(p.Query), " ")), nil
}

// pgRows reads a query through a server-side cursor in a read-only
// transaction, Fetch rows at a time.
type pgRows struct {
	ctx   context.Context
	conn  *pgx.Conn
	tx    pgx.Tx
	fetch string
	cols  []string
	batch pgx.Rows
	cells []string
	// computed are the columns the query computes (no table's column).
	computed []string
	line     int
	inBatch  int
	done     bool
}

func openPostgres(ctx context.Context, spec string) (Rows, error) {
	p, err := ParsePG(spec)
	if err != nil {
		return nil, err
	}
	return OpenPG(ctx, p)
}

// OpenPG connects and declares the cursor.
func OpenPG(ctx context.Context, p *PGSpec) (Rows, error) {
	cfg, err := pgx.ParseConfig(p.Conn)
	if err != nil {
		return nil, fmt.Errorf("connection parameters: %w", err)
	}
	if p.PasswordFile != "" {
		b, err := os.ReadFile(p.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("password_file: %w", err)
		}
		cfg.Password, _, _ = strings.Cut(strings.TrimRight(string(b), "\r\n"), "\n")
		cfg.Password = strings.TrimRight(cfg.Password, "\r")
	}
	// Text results for every column: the statistics read exact decimal
	// text, never a float64 the driver decoded.
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", pgErr(err))
	}
	r := &pgRows{ctx: ctx, conn: conn, fetch: "FETCH FORWARD " + strconv.Itoa(p.Fetch) + " FROM fedpca_rows", line: 1}
	if r.tx, err = conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly}); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("begin read-only transaction: %w", pgErr(err))
	}
	// The columns, and which are a table's, from the statement's
	// description, before any row is read (schema.Computed).
	sd, err := r.tx.Conn().Prepare(ctx, "", p.Query)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("describe the query: %w", pgErr(err))
	}
	for _, f := range sd.Fields {
		if f.TableOID == 0 {
			r.computed = append(r.computed, strings.TrimSpace(f.Name))
		}
	}
	if _, err = r.tx.Exec(ctx, "DECLARE fedpca_rows NO SCROLL CURSOR FOR "+p.Query); err != nil {
		r.Close()
		return nil, fmt.Errorf("declare cursor: %w", pgErr(err))
	}
	// The description gives the column names: no row is read before the
	// reader has checked the columns (the first FETCH is Next's).
	for _, f := range sd.Fields {
		r.cols = append(r.cols, strings.TrimSpace(f.Name))
	}
	r.cells = make([]string, len(r.cols))
	return r, nil
}

// pgErr keeps a server error's message and detail and drops the rest.
func pgErr(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		msg := pe.Message
		if pe.Detail != "" {
			msg += " (" + pe.Detail + ")"
		}
		if pe.Hint != "" {
			msg += "; hint: " + pe.Hint
		}
		return fmt.Errorf("postgres %s: %s: %w", pe.Code, msg, errPG)
	}
	return err
}

var errPG = errors.New("server error")

func (r *pgRows) nextBatch() error {
	rows, err := r.tx.Query(r.ctx, r.fetch)
	if err != nil {
		return fmt.Errorf("fetch: %w", pgErr(err))
	}
	r.batch, r.inBatch = rows, 0
	return nil
}

func (r *pgRows) Columns() []string { return r.cols }

// Computed names the columns the query computes (schema.Computed).
func (r *pgRows) Computed() []string { return r.computed }
func (r *pgRows) Line() int          { return r.line }

// Next returns the next row's cells as text; NULL reads as "".
func (r *pgRows) Next() ([]string, error) {
	for {
		if r.done {
			return nil, io.EOF
		}
		if r.batch == nil {
			if err := r.nextBatch(); err != nil {
				return nil, err
			}
		}
		if r.batch.Next() {
			r.inBatch++
			r.line++
			raw := r.batch.RawValues()
			for i, v := range raw {
				r.cells[i] = string(v) // nil (NULL) is ""
			}
			return r.cells, nil
		}
		r.batch.Close()
		if err := r.batch.Err(); err != nil {
			return nil, fmt.Errorf("after row %d: %w", r.line, pgErr(err))
		}
		if r.inBatch == 0 {
			r.done = true
			return nil, io.EOF
		}
		if err := r.nextBatch(); err != nil {
			return nil, err
		}
	}
}

// Close ends the transaction (a read-only one: rolling back changes
// nothing) and the connection.
func (r *pgRows) Close() error {
	if r.batch != nil {
		r.batch.Close()
	}
	ctx := context.WithoutCancel(r.ctx)
	if r.tx != nil {
		_ = r.tx.Rollback(ctx)
	}
	return r.conn.Close(ctx)
}
