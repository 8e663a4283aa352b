package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/user"
)

func datasetCommand() *cli.Command {
	return &cli.Command{
		Name:  "dataset",
		Usage: "the bundled real datasets",
		Commands: []*cli.Command{{
			Name:        "list",
			Usage:       "list the bundled datasets and where they come from",
			Description: `  fedpca dataset list`,
			Action: func(context.Context, *cli.Command) error {
				for _, n := range datasets.Names() {
					fmt.Printf("%-16s %s\n", n, datasets.About(n))
				}
				return nil
			},
		}, {
			Name:      "export",
			Usage:     "write a bundled dataset split among owners, with its schema",
			ArgsUsage: "NAME",
			Description: `Writes OUT/schema.json (the reference preprocessing: standardise with the pooled
mean and population std, clip rows to norm 1), OUT/all.csv and one OUT/OWNER.csv per
owner (--owners names them, or owner-1..N).

  fedpca dataset export wdbc --owners hospital-a,hospital-b --out data`,
			Flags: []cli.Flag{
				reqStr("out", "output directory"),
				strsFlag("owners", "owner IDs (comma-separated or repeated)"),
				intFlag("n", 3, "number of owners when --owners is not given"),
				strFlag("partition", "iid", "how rows are dealt to the owners: iid, class, dirichlet=ALPHA or sizes=W1,W2,..."),
				&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the split", Sources: env("seed")},
				forceFlag(),
			},
			Action: func(_ context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() != 1 {
					return fmt.Errorf("name one bundled dataset (%s), got %d arguments", strings.Join(datasets.Names(), ", "), cmd.Args().Len())
				}
				name := cmd.Args().First()
				data, err := datasets.CSV(name)
				if err != nil {
					return err
				}
				owners := splitList(cmd.StringSlice("owners"))
				if len(owners) == 0 {
					for i := range cmd.Int("n") {
						owners = append(owners, fmt.Sprintf("owner-%d", i+1))
					}
				}
				sch, err := schema.Infer(bytes.NewReader(data), name, "label")
				if err != nil {
					return err
				}
				parts, err := sim.Split(data, "label", len(owners), cmd.String("partition"), cmd.Uint64("seed"))
				if err != nil {
					return err
				}
				out := cmd.String("out")
				files := map[string][]byte{"schema.json": sch.Canonical(), "all.csv": data}
				var paths []string
				for i, o := range owners {
					files[o+".csv"] = parts[i]
				}
				for f := range files {
					paths = append(paths, filepath.Join(out, f))
				}
				slices.Sort(paths)
				if err := user.CheckNew(cmd.Bool("force"), paths...); err != nil {
					return err
				}
				if err := os.MkdirAll(out, 0o755); err != nil {
					return err
				}
				for f, b := range files {
					if err := os.WriteFile(filepath.Join(out, f), b, 0o644); err != nil {
						return err
					}
				}
				fmt.Printf("wrote %s: schema.json, all.csv and %d owner files (%s)\n", out, len(owners), strings.Join(owners, ", "))
				return nil
			},
		}},
	}
}

func splitList(in []string) []string {
	var out []string
	for _, s := range in {
		for _, x := range strings.Split(s, ",") {
			if x = strings.TrimSpace(x); x != "" {
				out = append(out, x)
			}
		}
	}
	return out
}

func referenceCommand() *cli.Command {
	return &cli.Command{
		Name:  "reference",
		Usage: "compute the non-private result centrally from pooled rows (to check a deployment)",
		Description: `Runs the same preprocessing (the schema's quantization and clipping) and analysis
as a job, on all the rows at once, without encryption or noise. A job run with
--no-noise on the same rows must give the same result (fedpca compare).

  fedpca reference --schema data/schema.json --data data/all.csv --analysis pca -k 5 --out reference`,
		Flags: []cli.Flag{
			reqStr("schema", "the dataset's schema"),
			reqStr("data", "all the rows (CSV)"),
			strFlag("analysis", "pca", "pca, dca or lda"),
			intFlag("k", 5, "components"),
			strFlag("out", "reference", "output directory"),
			forceFlag(),
		},
		Action: func(_ context.Context, cmd *cli.Command) error {
			if err := checkOutputs(cmd); err != nil {
				return err
			}
			sch, err := loadSchema(cmd.String("schema"))
			if err != nil {
				return err
			}
			f, err := os.Open(cmd.String("data"))
			if err != nil {
				return err
			}
			defer f.Close()
			spec := &job.Spec{Analysis: cmd.String("analysis"), K: cmd.Int("k"), MaxRows: math.MaxInt32, MaxOwnerRows: math.MaxInt32}
			res, rep, err := job.Central(spec, sch, f)
			if err != nil {
				return err
			}
			rows := rep.Rows
			if rep.Skipped > 0 {
				fmt.Fprintf(os.Stderr, "skipped %d rows that cannot be read, as owners do (first: %s)\n", rep.Skipped, strings.Join(rep.Examples, "; "))
			}
			paths, err := user.WriteOutputs(cmd.String("out"), res)
			if err != nil {
				return err
			}
			fmt.Printf("non-private %s of %d rows: eigenvalues %v\nwrote %s\n", spec.Analysis, rows, fmtFloats(res.Components.Eigenvalues), strings.Join(paths, ", "))
			return nil
		},
	}
}

func fmtFloats(v []float64) string {
	var s []string
	for _, x := range v {
		s = append(s, fmt.Sprintf("%.6g", x))
	}
	return strings.Join(s, " ")
}

func compareCommand() *cli.Command {
	return &cli.Command{
		Name:  "compare",
		Usage: "compare two results: eigenvalues, and components up to sign",
		Description: `Exits non-zero when they differ by more than --tolerance.

  fedpca compare --result out/result.json --reference reference/result.json --tolerance 1e-6`,
		Flags: []cli.Flag{
			reqStr("result", "a result document"),
			reqStr("reference", "the reference result document"),
			floatFlag("tolerance", 1e-9, "largest relative difference allowed (eigenvalues and component entries)"),
		},
		Action: func(_ context.Context, cmd *cli.Command) error {
			a, err := user.LoadResult(cmd.String("result"))
			if err != nil {
				return err
			}
			b, err := user.LoadResult(cmd.String("reference"))
			if err != nil {
				return err
			}
			worst, k, err := compareResults(a, b)
			if err != nil {
				return err
			}
			tol := cmd.Float64("tolerance")
			fmt.Printf("%s vs reference, the top %d components: largest relative difference %.3g (tolerance %.3g)\n", a.Analysis, k, worst, tol)
			if worst > tol {
				return fmt.Errorf("results differ by %.3g > %.3g", worst, tol)
			}
			return nil
		},
	}
}

// compareResults returns the largest relative difference between two
// results' eigenvalues and component entries (components up to sign), of
// either release: a components release's eigenvalues are taken on the
// statistics release's scale (job.Result.Top), and the first k components
// both hold are compared. It says how many.
func compareResults(a, b *job.Result) (float64, int, error) {
	wa, ea := a.Top(0)
	wb, eb := b.Top(0)
	if wa == nil || wb == nil {
		return 0, 0, errors.New("both results need components (a statistics release of pca, dca or lda, or a components release)")
	}
	if a.Analysis != b.Analysis || len(wa) != len(wb) {
		return 0, 0, fmt.Errorf("results are %s of %d features and %s of %d", a.Analysis, len(wa), b.Analysis, len(wb))
	}
	d, k := len(wb), min(len(ea), len(eb))
	worst := 0.0
	scale := math.Abs(eb[0])
	for i := range k {
		worst = math.Max(worst, math.Abs(ea[i]-eb[i])/math.Max(math.Abs(eb[i]), 1e-6*scale))
	}
	for j := range k {
		norm, sign, dot := 0.0, 1.0, 0.0
		for i := range d {
			norm = math.Max(norm, math.Abs(wb[i][j]))
			dot += wa[i][j] * wb[i][j]
		}
		if dot < 0 {
			sign = -1
		}
		for i := range d {
			worst = math.Max(worst, math.Abs(sign*wa[i][j]-wb[i][j])/norm)
		}
	}
	return worst, k, nil
}
