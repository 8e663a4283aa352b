// Package source opens the rows an owner serves: a CSV file (plain or
// gzip) or a PostgreSQL table or query, as a schema.Rows stream whose memory
// stays constant in the number of rows.
//
// A source is named by a spec string: a file path (or file:// URL), or a
// URL whose scheme picks the driver (postgres://, postgresql://). Each
// driver is one file that registers its schemes (see Register): another
// source (Parquet, another database) is one new file.
//
// Specs may hold credentials (a database password): use Redact before
// writing a spec or an error that may quote it to any log.
package source
