package pgtest

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running PostgreSQL server with a superuser "fedpca"
// (password Password) and a database "fedpca".
type Server struct {
	Host string
	Port int
	dir  string
	bin  string
	cred *syscall.Credential
}

// Password is the superuser's password.
const Password = "s3cret-pw"

// URL returns a postgres:// URL of the database with the password in it.
func (s *Server) URL(params string) string {
	u := fmt.Sprintf("postgres://fedpca:%s@%s:%d/fedpca?sslmode=disable", Password, s.Host, s.Port)
	if params != "" {
		u += "&" + params
	}
	return u
}

// URLNoPassword returns the URL without the password.
func (s *Server) URLNoPassword(params string) string {
	u := fmt.Sprintf("postgres://fedpca@%s:%d/fedpca?sslmode=disable", s.Host, s.Port)
	if params != "" {
		u += "&" + params
	}
	return u
}

// Connect opens a connection as the superuser.
func (s *Server) Connect(ctx context.Context) (*pgx.Conn, error) {
	return pgx.Connect(ctx, s.URL(""))
}

// findBin returns the directory of initdb and pg_ctl.
func findBin() (string, error) {
	if d := os.Getenv("FEDPCA_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err != nil {
			return "", fmt.Errorf("FEDPCA_PG_BIN=%s: %w", d, err)
		}
		return d, nil
	}
	var dirs []string
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(m)))
	dirs = append(dirs, m...)
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("no initdb/pg_ctl in PATH or /usr/lib/postgresql/*/bin (install Debian's postgresql package)")
}

var (
	shared    *Server
	sharedErr error
	once      sync.Once
)

// Shared starts one server for the whole test binary (stopped by Stop from
// TestMain, or left for the process exit); it skips t when none starts.
func Shared(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, sharedErr = start() })
	if sharedErr != nil {
		t.Skipf("SKIP: no PostgreSQL server could be started: %v", sharedErr)
	}
	return shared
}

// StopShared stops the shared server, if one was started.
func StopShared() {
	if shared != nil {
		shared.Stop()
	}
}

// Start starts a server for one test and stops it at the test's end; it
// skips t when none starts.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := start()
	if err != nil {
		t.Skipf("SKIP: no PostgreSQL server could be started: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartE starts a server (for benchmarks and tools); Stop it when done.
func StartE() (*Server, error) { return start() }

func start() (*Server, error) {
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("pgtest runs on linux only")
	}
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "fedpca-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and no user nobody: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(Password+"\n"), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if s.cred != nil {
		_ = os.Chown(pw, int(s.cred.Uid), int(s.cred.Gid))
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "fedpca", "--pwfile", pw, "-A", "scram-sha-256", "-E", "UTF8", "--no-locale"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, lastLines(out))
	}
	for attempt := 0; ; attempt++ {
		if s.Port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off", s.Port, dir)
		out, err := s.run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "-t", "60", "start")
		if err == nil {
			break
		}
		if attempt == 2 {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pg_ctl start: %v: %s %s", err, lastLines(out), lastLines(log))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, fmt.Sprintf("postgres://fedpca:%s@%s:%d/postgres?sslmode=disable", Password, s.Host, s.Port))
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("connect: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE fedpca"); err != nil {
		s.Stop()
		return nil, fmt.Errorf("create database: %w", err)
	}
	return s, nil
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

// Stop stops the server and removes its directory.
func (s *Server) Stop() {
	_, _ = s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func lastLines(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// CreateTable creates table name with the given columns (quoted as they
// are): numeric ones of type numeric, the others text.
func CreateTable(ctx context.Context, conn *pgx.Conn, name string, header []string, numeric func(col string) bool) error {
	var cols []string
	for _, h := range header {
		t := "text"
		if numeric(h) {
			t = "numeric"
		}
		cols = append(cols, pgx.Identifier{h}.Sanitize()+" "+t)
	}
	if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{name}.Sanitize()); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, "CREATE TABLE "+pgx.Identifier{name}.Sanitize()+" ("+strings.Join(cols, ", ")+")")
	return err
}

// Copy streams CSV rows with a header (plain, comma-separated) into table
// name with COPY FROM STDIN: the values arrive as the text they are.
// Unquoted empty cells load as NULL.
func Copy(ctx context.Context, conn *pgx.Conn, name string, csv io.Reader) (int64, error) {
	tag, err := conn.PgConn().CopyFrom(ctx, csv, "COPY "+pgx.Identifier{name}.Sanitize()+" FROM STDIN (FORMAT csv, HEADER true)")
	return tag.RowsAffected(), err
}

// LoadCSV creates table name from a CSV file's header (a column is numeric
// when every value in it parses as a number) and copies the rows in.
func LoadCSV(ctx context.Context, conn *pgx.Conn, name string, data []byte) (int64, error) {
	recs, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil || len(recs) == 0 {
		return 0, fmt.Errorf("load %s: %v", name, err)
	}
	header := recs[0]
	numeric := map[string]bool{}
	for j, h := range header {
		numeric[h] = true
		for _, r := range recs[1:] {
			if _, err := strconv.ParseFloat(r[j], 64); err != nil {
				numeric[h] = false
				break
			}
		}
	}
	if err := CreateTable(ctx, conn, name, header, func(c string) bool { return numeric[c] }); err != nil {
		return 0, err
	}
	return Copy(ctx, conn, name, bytes.NewReader(data))
}
