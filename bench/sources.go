package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/source"
	"github.com/fedpca/fedpca/source/pgtest"
)

// sources measures an owner reading its rows: for each source (CSV, gzip
// CSV, PostgreSQL through the cursor) and row count, a child process (this
// binary, -suite sources-child) opens the source and runs job.ReadRows (the
// owner's path for a DCA job: decode, map, clip, accumulate); its peak RSS
// (VmHWM) and wall time give the table.
func sources(ctx context.Context, counts []int, d int) {
	dir, err := os.MkdirTemp("", "fedpca-bench-sources-")
	check(err)
	defer os.RemoveAll(dir)
	srv, err := pgtest.StartE()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: SKIP PostgreSQL: %v\n", err)
	} else {
		defer srv.Stop()
	}
	self, err := os.Executable()
	check(err)
	fmt.Printf("| source | rows | d | read time | rows/s | owner peak RSS |\n|---|---|---|---|---|---|\n")
	for _, n := range counts {
		data, schPath, csvPath := writeSynthetic(dir, n, d)
		var z bytes.Buffer
		w := gzip.NewWriter(&z)
		_, _ = w.Write(data)
		check(w.Close())
		gzPath := csvPath + ".gz"
		check(os.WriteFile(gzPath, z.Bytes(), 0o644))
		specs := [][2]string{{"CSV", csvPath}, {"CSV gzip", gzPath}}
		if srv != nil {
			conn, err := srv.Connect(ctx)
			check(err)
			table := fmt.Sprintf("rows_%d", n)
			header := strings.Split(string(data[:bytes.IndexByte(data, '\n')]), ",")
			check(pgtest.CreateTable(ctx, conn, table, header, func(c string) bool { return c != "label" }))
			_, err = pgtest.Copy(ctx, conn, table, bytes.NewReader(data))
			check(err)
			_, err = conn.Exec(ctx, "VACUUM ANALYZE "+table)
			check(err)
			conn.Close(ctx)
			specs = append(specs, [2]string{"PostgreSQL (cursor, FETCH 1000)", srv.URL("table=" + table)})
		}
		data = nil
		for _, s := range specs {
			cmd := exec.CommandContext(ctx, self, "-suite", "sources-child", "-source", s[1], "-schema", schPath)
			cmd.Stderr = os.Stderr
			start := time.Now()
			out, err := cmd.Output()
			el := time.Since(start)
			check(err)
			var rows, hwm int64
			_, err = fmt.Sscan(string(out), &rows, &hwm)
			check(err)
			if rows != int64(n) {
				check(fmt.Errorf("%s: read %d rows of %d", s[0], rows, n))
			}
			rss := hwm * 1024
			fmt.Printf("| %s | %d | %d | %s | %.0f | %s |\n", s[0], n, d, dur(el.Seconds()), float64(n)/el.Seconds(), mib(float64(rss)))
		}
		check(os.Remove(csvPath))
		check(os.Remove(gzPath))
	}
}

// sourcesChild reads one source as an owner does for a DCA job and prints
// the number of rows used.
func sourcesChild(ctx context.Context, spec, schemaPath string) {
	b, err := os.ReadFile(schemaPath)
	check(err)
	sch, err := schema.Parse(b)
	check(err)
	rows, err := source.Open(ctx, spec)
	check(err)
	defer rows.Close()
	js := &job.Spec{Analysis: job.DCA, MaxRows: 1 << 40, MaxOwnerRows: 1 << 40}
	_, rep, err := job.ReadRows(js, sch, rows)
	check(err)
	hwm := peakRSSKiB()
	fmt.Println(rep.Rows, hwm)
}

// nthLine returns the offset just after the n-th newline, or -1.
func nthLine(b []byte, n int) int {
	off := 0
	for range n {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
	}
	return off
}

// writeSynthetic writes n synthetic rows of d features (sim.Synthetic) as
// dir/rows-n.csv and the schema inferred from their first 10,000 rows (public
// for the benchmark) as dir/schema.json.
func writeSynthetic(dir string, n, d int) (data []byte, schPath, csvPath string) {
	data = sim.Synthetic(n, d, 3, 1)
	sample := data
	if i := nthLine(data, 10001); i > 0 {
		sample = data[:i]
	}
	sch, err := schema.Infer(bytes.NewReader(sample), "synthetic", "label")
	check(err)
	schPath = filepath.Join(dir, "schema.json")
	check(os.WriteFile(schPath, sch.Canonical(), 0o644))
	csvPath = filepath.Join(dir, fmt.Sprintf("rows-%d.csv", n))
	check(os.WriteFile(csvPath, data, 0o644))
	return data, schPath, csvPath
}
