// Package pgtest starts a real PostgreSQL server for tests: Debian's
// postgresql binaries (initdb, pg_ctl) in a temporary directory, on a free
// loopback port, as the unprivileged user nobody when run as root. When no
// server can be started, Start skips the test saying why. FEDPCA_PG_BIN
// names the directory of the binaries (default: PATH, then
// /usr/lib/postgresql/*/bin, newest first).
package pgtest
