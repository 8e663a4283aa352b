package power

import (
	"errors"
	"fmt"
	"math/bits"
	"runtime"
	"sync"
)

// Accumulator sums an owner's statistic for one round, exactly in int64:
// round 0 (q == nil) [v | n] with v = sum q and n = 2^g count; a power round
// Y = sum q (q^T Qq), row-major d x p. Rows are quantised and clipped
// already (package fixedpoint); Add checks ||q|| <= B in integers. Not safe
// for concurrent use.
type Accumulator struct {
	pr   Params
	q    *QMatrix
	out  []int64
	rows int64
	cap  int64
}

// ErrRowCap is returned by Add past the accumulator's row cap: the reader
// drops such rows (the row policy), so a caller meeting it has a bug.
var ErrRowCap = errors.New("power: row beyond the cap")

// NewAccumulator returns an accumulator for round 0 (q nil) or a power round
// under the public matrix q, which must pass CheckQ. Rows beyond maxRows
// (the job's max_owner_rows, at most pr.MaxRows) are refused.
func NewAccumulator(pr Params, q *QMatrix, maxRows int64) (*Accumulator, error) {
	if err := pr.Validate(); err != nil {
		return nil, err
	}
	if maxRows < 1 || maxRows > pr.MaxRows {
		return nil, fmt.Errorf("power: owner row cap %d outside [1, %d]", maxRows, pr.MaxRows)
	}
	n := pr.Round0Len()
	if q != nil {
		if err := CheckQ(q, pr.D, pr.P, pr.QBits); err != nil {
			return nil, err
		}
		n = pr.Len()
	}
	return &Accumulator{pr: pr, q: q, out: make([]int64, n), cap: maxRows}, nil
}

// Rows is the number of rows added.
func (a *Accumulator) Rows() int64 { return a.rows }

// checkRow verifies a row's length and ||q||^2 <= B^2 in 128-bit integers.
func (a *Accumulator) checkRow(q []int64) error {
	if len(q) != a.pr.D {
		return fmt.Errorf("power: row has %d values, the job has %d features", len(q), a.pr.D)
	}
	var hi, lo uint64
	b := a.pr.Bound
	for _, x := range q {
		if x > b || x < -b {
			return errors.New("power: row outside the clip bound")
		}
		h, l := bits.Mul64(uint64(abs(x)), uint64(abs(x)))
		var c uint64
		lo, c = bits.Add64(lo, l, 0)
		hi += h + c
	}
	bh, bl := bits.Mul64(uint64(b), uint64(b))
	if hi > bh || (hi == bh && lo > bl) {
		return errors.New("power: row outside the clip bound")
	}
	return nil
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// Add adds rows (each d values) on up to GOMAXPROCS goroutines. The sum is
// the same integers whatever the grouping: no partial sum can overflow
// (Params.Validate bounds every row's contribution by B^2 2^h and their
// number by MaxRows). On an error nothing is added.
func (a *Accumulator) Add(rows [][]int64) error {
	if err := a.check(rows); err != nil {
		return err
	}
	workers := min(runtime.GOMAXPROCS(0), len(rows))
	if a.q == nil || workers <= 1 {
		a.add(a.out, rows)
		a.rows += int64(len(rows))
		return nil
	}
	parts := make([][]int64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lo, hi := w*len(rows)/workers, (w+1)*len(rows)/workers
			parts[w] = make([]int64, len(a.out))
			a.add(parts[w], rows[lo:hi])
		}()
	}
	wg.Wait()
	for _, part := range parts {
		for i, x := range part {
			a.out[i] += x
		}
	}
	a.rows += int64(len(rows))
	return nil
}

// AddBatch adds rows packed one after the other (d values each) on the
// calling goroutine: the owner's row pipeline (package job) runs one
// accumulator per worker and merges them (Merge). The classes are ignored
// (a power job has one class); it matches the statistics accumulator's
// AddBatch. On an error nothing is added.
func (a *Accumulator) AddBatch(q []int64, _ []int) error {
	d := a.pr.D
	if len(q)%d != 0 {
		return fmt.Errorf("power: batch of %d values is not rows of %d", len(q), d)
	}
	rows := make([][]int64, len(q)/d)
	for i := range rows {
		rows[i] = q[i*d : (i+1)*d]
	}
	if err := a.check(rows); err != nil {
		return err
	}
	a.add(a.out, rows)
	a.rows += int64(len(rows))
	return nil
}

// Merge adds b's statistic (of the same round and matrix) to a's.
func (a *Accumulator) Merge(b *Accumulator) error {
	if len(a.out) != len(b.out) || a.q != b.q {
		return errors.New("power: merge of accumulators of different rounds")
	}
	if b.rows > a.cap-a.rows {
		return ErrRowCap
	}
	for i, x := range b.out {
		a.out[i] += x
	}
	a.rows += b.rows
	return nil
}

// check refuses rows beyond the cap or outside the clip bound.
func (a *Accumulator) check(rows [][]int64) error {
	if int64(len(rows)) > a.cap-a.rows {
		return ErrRowCap
	}
	for _, q := range rows {
		if err := a.checkRow(q); err != nil {
			return err
		}
	}
	return nil
}

// add adds checked rows' statistic to out: [v | n] for round 0, Y for a
// power round.
func (a *Accumulator) add(out []int64, rows [][]int64) {
	if a.q != nil {
		addRows(out, a.q, rows, make([]int64, a.pr.P))
		return
	}
	one := int64(1) << a.pr.Bits
	for _, q := range rows {
		for j, x := range q {
			out[j] += x
		}
		out[a.pr.D] += one
	}
}

// addRows adds q (q^T Qq) for each row to y; t is scratch of p values.
// |q^T Qq_c| <= ||q|| ||Qq_c|| <= B 2^h at every partial sum (the
// Cauchy-Schwarz bound holds for the absolute products), and each product
// q_j t_c is at most B^2 2^h.
func addRows(y []int64, qq *QMatrix, rows [][]int64, t []int64) {
	p := qq.P
	for _, q := range rows {
		clear(t)
		for j, x := range q {
			if x == 0 {
				continue
			}
			for c, m := range qq.Data[j*p : (j+1)*p] {
				t[c] += x * m
			}
		}
		for j, x := range q {
			if x == 0 {
				continue
			}
			yj := y[j*p : (j+1)*p]
			for c, tc := range t {
				yj[c] += x * tc
			}
		}
	}
}

// Values returns the statistic (not a copy): [v | n] for round 0, Y
// row-major for a power round.
func (a *Accumulator) Values() []int64 { return a.out }
