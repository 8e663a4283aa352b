package user

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/fedpca/fedpca/protocol/job"
)

// Output file names written by WriteOutputs.
const (
	ResultFile     = "result.json"
	ComponentsFile = "components.csv"
	ReleaseFile    = "release.json"
)

// WriteOutputs writes the result document, the components as CSV (one row
// per feature, one column per component) and the noisy release into dir,
// and returns the paths written.
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
	if c := res.Components; c != nil {
		p := filepath.Join(dir, ComponentsFile)
		if err := writeComponentsCSV(p, res); err != nil {
			return nil, err
		}
		written = append(written, p)
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

// LoadResult reads a result document.
func LoadResult(path string) (*job.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res job.Result
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if res.Release == nil {
		return nil, fmt.Errorf("%s: no release in the result document", path)
	}
	return &res, nil
}
