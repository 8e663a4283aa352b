package user

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sbinet/npyio"
	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/protocol/job"
)

// Output file names written by WriteOutputs.
const (
	ResultFile     = "result.json"
	ComponentsFile = "components.csv"
	ReleaseFile    = "release.json"
	// The components, the mean row and the eigenvalues as NumPy arrays of
	// float64: components.npy is d x k in C order (row i is feature i,
	// column j component j+1, as in components.csv).
	ComponentsNPYFile  = "components.npy"
	MeanNPYFile        = "mean.npy"
	EigenvaluesNPYFile = "eigenvalues.npy"
)

// OutputFiles are the files WriteOutputs may write into dir.
func OutputFiles(dir string) []string {
	var ps []string
	for _, f := range []string{ResultFile, ComponentsFile, ComponentsNPYFile, MeanNPYFile, EigenvaluesNPYFile, ReleaseFile} {
		ps = append(ps, filepath.Join(dir, f))
	}
	return ps
}

// CheckNew refuses, unless force, when any of paths exists: no command
// overwrites an output without --force. Commands call it before any work
// (before a job is created), so that a refusal costs nothing.
func CheckNew(force bool, paths ...string) error {
	if force {
		return nil
	}
	var there []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			there = append(there, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	switch len(there) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s exists: give another output path, or --force to replace it", there[0])
	}
	return fmt.Errorf("%s and %d more output files exist (of an earlier run): give another output path, or --force to replace them", there[0], len(there)-1)
}

// WriteOutputs writes the result document, the components as CSV (one row
// per feature, one column per component) and as NumPy arrays with the mean
// and the eigenvalues, and the noisy release into dir, and returns the
// paths written. A components job's result has no mean and no release: the
// CSV has no mean column, eigenvalues.npy holds the covariance eigenvalues,
// and neither mean.npy nor release.json is written.
func WriteOutputs(dir string, res *job.Result) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	doc, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return nil, err
	}
	p := filepath.Join(dir, ResultFile)
	if err := os.WriteFile(p, append(doc, '\n'), 0o644); err != nil {
		return nil, err
	}
	written = append(written, p)
	if res.Output != nil {
		return writeTop(dir, res, written)
	}
	if c := res.Components; c != nil {
		p := filepath.Join(dir, ComponentsFile)
		if err := writeComponentsCSV(p, res); err != nil {
			return nil, err
		}
		written = append(written, p)
		for _, a := range []struct {
			name string
			val  any
		}{{ComponentsNPYFile, c.W}, {MeanNPYFile, c.Mean}, {EigenvaluesNPYFile, c.Eigenvalues}} {
			p := filepath.Join(dir, a.name)
			if err := writeNPY(p, a.val); err != nil {
				return nil, err
			}
			written = append(written, p)
		}
	}
	rel, err := json.MarshalIndent(res.Release, "", " ")
	if err != nil {
		return nil, err
	}
	p = filepath.Join(dir, ReleaseFile)
	if err := os.WriteFile(p, append(rel, '\n'), 0o644); err != nil {
		return nil, err
	}
	return append(written, p), nil
}

// writeTop writes a components job's components (CSV and NumPy) and
// covariance eigenvalues.
func writeTop(dir string, res *job.Result, written []string) ([]string, error) {
	t := res.Output
	d, k := t.Dims()
	p := filepath.Join(dir, ComponentsFile)
	header := []string{"feature"}
	for j := range k {
		header = append(header, fmt.Sprintf("component_%d", j+1))
	}
	table := [][]string{header}
	for i := range d {
		row := []string{res.Features[i]}
		for j := range k {
			row = append(row, strconv.FormatFloat(t.W[i][j], 'g', -1, 64))
		}
		table = append(table, row)
	}
	if err := writeCSV(p, table); err != nil {
		return nil, err
	}
	written = append(written, p)
	w := make([]float64, 0, d*k)
	for _, row := range t.W {
		w = append(w, row...)
	}
	for _, a := range []struct {
		name string
		val  any
	}{{ComponentsNPYFile, mat.NewDense(d, k, w)}, {EigenvaluesNPYFile, t.Eigenvalues}} {
		p := filepath.Join(dir, a.name)
		if err := writeNPY(p, a.val); err != nil {
			return nil, err
		}
		written = append(written, p)
	}
	return written, nil
}

func writeComponentsCSV(path string, res *job.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	d, k := res.Components.Dims()
	header := []string{"feature", "mean"}
	for j := range k {
		header = append(header, fmt.Sprintf("component_%d", j+1))
	}
	_ = w.Write(header)
	for i := range d {
		row := []string{res.Features[i], strconv.FormatFloat(res.Components.Mean[i], 'g', -1, 64)}
		for j := range k {
			row = append(row, strconv.FormatFloat(res.Components.W.At(i, j), 'g', -1, 64))
		}
		_ = w.Write(row)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeNPY writes a float64 array (a *mat.Dense or a []float64) in NumPy's
// .npy format.
func writeNPY(path string, val any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := npyio.Write(f, val); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// LoadResult reads and validates a result document (job.ParseResult).
func LoadResult(path string) (*job.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	res, err := job.ParseResult(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return res, nil
}
