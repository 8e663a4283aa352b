package job

import (
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fedpca/fedpca/protocol/power"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

// The owner's pipeline (ReadRowsWorkers) reads the source on one goroutine
// into batches of rows, in file order, and maps and accumulates them on
// `workers` goroutines, each with its own schema.RowMap and its own
// stats.Accumulator:
//
//  1. map: a worker decodes, quantizes and clips every row of its batch
//     and notes, per row, whether it is readable and what it changed in
//     the counters (clamped values, filled or dropped missing values,
//     clipped);
//  2. commit: batches are committed one at a time in file order (a worker
//     waits for the batches before its own), which applies the row policy
//     exactly as a single reader would: unreadable rows are skipped and
//     counted, and the rows after the first max_owner_rows readable ones
//     are dropped, whichever worker mapped them and whenever;
//  3. accumulate: the worker adds its batch's kept rows to its own
//     accumulator (stats.AddBatch).
//
// At the end the accumulators are merged (stats.Merge). Which rows are
// kept depends only on the file; the statistics are integer sums of the
// kept rows, which no grouping or order changes (no sum can overflow:
// package stats), so the result is identical for every number of workers
// and every schedule. Memory is a bounded number of batches in flight,
// whatever the number of rows.

// batchCells is about how many cells a batch holds.
const batchCells = 1 << 14

// rowBatch is a run of consecutive source rows and, once mapped, what
// each gave.
type rowBatch struct {
	seq   int
	n     int
	cols  int
	cells []string // n records of cols cells
	lines []int
	src   []error // a source's *schema.RowError for a record it could not parse
	fatal error   // the source failed after these rows

	q     []int64 // mapped rows, d each
	class []int
	res   []rowResult
}

// rowResult is what mapping one row gave.
type rowResult struct {
	err             error // *schema.RowError; nil when the row is readable
	clamped         int64
	filled, missing int64
	clipped         bool
}

type pipeline struct {
	spec    *Spec
	d       int
	maxRows int64 // the accumulator's: rows beyond it are dropped as beyond the cap (a checked spec's cap is below it)

	mu   sync.Mutex
	turn *sync.Cond
	next int // the batch to commit next
	rep  ReadReport
	kept int64
	err  error

	stop   atomic.Bool // the limit is reached or an error is set: map nothing more
	failed atomic.Bool // an error is set: read nothing more
	free   chan *rowBatch
}

// ReadRowsWorkers is ReadRows on the given number of goroutines (at least
// one; ReadRows uses GOMAXPROCS). The statistics and the report do not
// depend on the number.
func ReadRowsWorkers(s *Spec, sch *schema.Schema, rows schema.Rows, workers int) (*stats.Accumulator, ReadReport, error) {
	return readRows(s, sch, rows, workers, false)
}

// batchAdder is a worker's accumulator: the statistics' (stats) or a power
// round's (power).
type batchAdder interface {
	AddBatch(q []int64, classes []int) error
}

// readRows runs the pipeline; exact makes every row map use the
// big-integer paths only (for tests).
func readRows(s *Spec, sch *schema.Schema, rows schema.Rows, workers int, exact bool) (*stats.Accumulator, ReadReport, error) {
	workers = max(workers, 1)
	l, err := s.Layout(sch)
	if err != nil {
		return nil, ReadReport{}, err
	}
	accs := make([]*stats.Accumulator, workers)
	adders := make([]batchAdder, workers)
	for i := range accs {
		if accs[i], err = stats.NewAccumulator(l, sch.Bound(), sch.Bits); err != nil {
			return nil, ReadReport{}, err
		}
		adders[i] = accs[i]
	}
	var bucket func() func([]int64) int
	switch l.Kind {
	case stats.Histogram:
		bucket = func() func([]int64) int { return NormBuckets(s.NormEdges, sch.Bits) }
	case stats.Marginals:
		bucket = func() func([]int64) int {
			// Each value becomes its bucket in place; the row's class is 0.
			marginal := MarginalBuckets(s, l.D, sch.Bits)
			return func(q []int64) int { marginal(q); return 0 }
		}
	}
	rep, err := runPipeline(s, sch, rows, l.K > 1 && l.Kind == stats.Full, bucket, adders, accs[0].MaxRows(), exact)
	return mergeWorkers(accs, rep, err)
}

// mergeWorkers merges the pipeline's workers' statistics into the first
// and counts its rows in the report.
func mergeWorkers[A interface {
	Merge(A) error
	Rows() int64
}](accs []A, rep ReadReport, err error) (A, ReadReport, error) {
	var none A
	if err != nil {
		return none, rep, err
	}
	for _, a := range accs[1:] {
		if err := accs[0].Merge(a); err != nil {
			return none, rep, err
		}
	}
	rep.Rows = accs[0].Rows()
	return accs[0], rep, nil
}

// ReadPowerRows streams an owner's rows into its statistic of round r of a
// power-method job (power.Accumulator: [v | n] for round 0, Y = sum q (q^T
// Qq) under the round's public matrix q for r >= 1), by the same pipeline,
// row policy and report as ReadRows, on GOMAXPROCS goroutines.
func ReadPowerRows(s *Spec, sch *schema.Schema, rows schema.Rows, q *power.QMatrix) (*power.Accumulator, ReadReport, error) {
	pr, err := s.PowerParams(sch)
	if err != nil {
		return nil, ReadReport{}, err
	}
	workers := runtime.GOMAXPROCS(0)
	accs := make([]*power.Accumulator, workers)
	adders := make([]batchAdder, workers)
	for i := range accs {
		if accs[i], err = power.NewAccumulator(pr, q, s.MaxOwnerRows); err != nil {
			return nil, ReadReport{}, err
		}
		adders[i] = accs[i]
	}
	rep, err := runPipeline(s, sch, rows, false, nil, adders, s.MaxOwnerRows, false)
	return mergeWorkers(accs, rep, err)
}

// runPipeline reads rows through the schema's row map (with classes when
// useClasses; each value mapped to its bucket by the worker's own
// bucket() when set) into one accumulator per worker, at most maxRows
// kept in all.
func runPipeline(s *Spec, sch *schema.Schema, rows schema.Rows, useClasses bool, bucket func() func([]int64) int, accs []batchAdder, maxRows int64, exact bool) (ReadReport, error) {
	rm, err := sch.NewRowMap(rows, useClasses)
	if err != nil {
		return ReadReport{}, err
	}
	if exact {
		rm.Exact()
	}
	if s.ClampBox {
		rm.ClampBox()
	}
	workers := len(accs)
	p := &pipeline{spec: s, d: sch.D(), maxRows: maxRows, free: make(chan *rowBatch, 2*workers+2)}
	p.turn = sync.NewCond(&p.mu)
	cols := len(rows.Columns())
	per := min(max(batchCells/max(cols, 1), 16), 1024)

	work := make(chan *rowBatch, workers)
	var wg sync.WaitGroup
	for w := range workers {
		m := rm
		if w > 0 {
			m = rm.Clone()
		}
		var bk func([]int64) int
		if bucket != nil {
			bk = bucket()
		}
		wg.Add(1)
		go func(m *schema.RowMap, acc batchAdder) {
			defer wg.Done()
			for b := range work {
				p.process(b, m, bk, acc)
				p.free <- b
			}
		}(m, accs[w])
	}
	p.produce(rows, per, work)
	close(work)
	wg.Wait()
	return p.rep, p.err
}

// produce reads the source into batches in file order. After the limit of
// rows (or an error) it only counts the records, which the commit drops.
func (p *pipeline) produce(rows schema.Rows, per int, work chan<- *rowBatch) {
	made := 0
	for seq := 0; ; seq++ {
		// Batches are made as they are needed, at most cap(p.free): a
		// small source fills one.
		var b *rowBatch
		select {
		case b = <-p.free:
		default:
			if made < cap(p.free) {
				made++
				b = &rowBatch{cols: len(rows.Columns()), cells: make([]string, 0, per*len(rows.Columns()))}
			} else {
				b = <-p.free
			}
		}
		b.seq, b.n, b.fatal = seq, 0, nil
		b.cells, b.lines, b.src = b.cells[:0], b.lines[:0], b.src[:0]
		eof := false
		for b.n < per {
			rec, err := rows.Next()
			var re *schema.RowError
			switch {
			case err == nil && p.stop.Load():
				b.cells = append(b.cells, make([]string, b.cols)...) // dropped: only counted
				b.src = append(b.src, nil)
			case err == nil:
				b.cells = append(b.cells, rec...)
				b.src = append(b.src, nil)
			case errors.Is(err, io.EOF):
				eof = true
			case errors.As(err, &re):
				b.cells = append(b.cells, make([]string, b.cols)...)
				b.src = append(b.src, re)
			default:
				b.fatal, eof = err, true
			}
			if eof {
				break
			}
			b.lines = append(b.lines, rows.Line())
			b.n++
		}
		work <- b
		if eof || p.failed.Load() {
			return
		}
	}
}

// process maps, commits and accumulates one batch.
func (p *pipeline) process(b *rowBatch, m *schema.RowMap, bucket func([]int64) int, acc batchAdder) {
	d := p.d
	if cap(b.q) < b.n*d {
		b.q = make([]int64, b.n*d)
	}
	if cap(b.res) < b.n {
		b.class, b.res = make([]int, b.n), make([]rowResult, b.n)
	}
	b.q, b.class, b.res = b.q[:b.n*d], b.class[:b.n], b.res[:b.n]
	clear(b.class)
	clear(b.res)
	if !p.stop.Load() {
		for r := range b.n {
			res := &b.res[r]
			if b.src[r] != nil {
				res.err = b.src[r]
				continue
			}
			clamped, filled, missing := m.Clamped(), m.Filled(), m.MissingDropped()
			q := b.q[r*d : (r+1)*d]
			b.class[r], res.clipped, res.err = m.Map(b.cells[r*b.cols:(r+1)*b.cols], b.lines[r], q)
			res.clamped, res.filled, res.missing = m.Clamped()-clamped, m.Filled()-filled, m.MissingDropped()-missing
			if res.err == nil && bucket != nil {
				b.class[r] = bucket(q)
			}
		}
	}
	cut := p.commit(b)
	// Keep the readable rows before the cut, compacted to the front.
	kept := 0
	for r := range cut {
		if b.res[r].err != nil {
			continue
		}
		if kept != r {
			copy(b.q[kept*d:(kept+1)*d], b.q[r*d:(r+1)*d])
			b.class[kept] = b.class[r]
		}
		kept++
	}
	if kept == 0 {
		return
	}
	if err := acc.AddBatch(b.q[:kept*d], b.class[:kept]); err != nil {
		p.fail(err)
	}
}

// commit applies the row policy to a mapped batch once every batch before
// it is committed, and returns how many of its rows (a prefix) are not
// dropped. Counters and examples are kept in file order.
func (p *pipeline) commit(b *rowBatch) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.next != b.seq {
		p.turn.Wait()
	}
	defer func() {
		p.next++
		p.turn.Broadcast()
	}()
	if p.err != nil {
		return 0
	}
	rep := &p.rep
	for r := range b.n {
		if p.kept >= min(p.spec.MaxOwnerRows, p.maxRows) {
			// The rows used are complete: what follows (a source that
			// fails further on included) changes nothing.
			rep.Dropped += int64(b.n - r)
			p.stop.Store(true)
			return r
		}
		res := &b.res[r]
		rep.Clamped += res.clamped
		rep.Filled += res.filled
		rep.Missing += res.missing
		switch {
		case res.err == nil:
			p.kept++
			if res.clipped {
				rep.Clipped++
			}
		case errors.Is(res.err, schema.ErrMissing):
		default:
			rep.Skipped++
			if len(rep.Examples) < maxExamples {
				rep.Examples = append(rep.Examples, res.err.Error())
			}
		}
	}
	if b.fatal != nil {
		p.failLocked(b.fatal)
		return 0
	}
	return b.n
}

func (p *pipeline) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failLocked(err)
}

func (p *pipeline) failLocked(err error) {
	if p.err == nil {
		p.err = err
	}
	p.stop.Store(true)
	p.failed.Store(true)
}
