package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v3"

	"github.com/fedpca/fedpca/owner"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/source"
)

// datasetUsage describes a --dataset value.
const datasetUsage = `SCHEMA.json=SOURCE: SOURCE is a CSV file (plain or gzip; delimiter , ; or tab detected, or FILE#delimiter=;; decimal commas FILE#decimal_comma=true) or postgres://USER@HOST:PORT/DB?table=NAME (or query=SQL URL-encoded, query_file=PATH; password in the URL, password_file=PATH or PGPASSWORD/.pgpass) or plink://PREFIX (a PLINK 1 fileset, PREFIX.bed/.bim/.fam: a row an individual, a column a variant; its schema from fedpca schema genotypes)`

// parseDataset reads SCHEMA.json=SOURCE.
func parseDataset(s string) (*schema.Schema, string, error) {
	sp, src, ok := strings.Cut(s, "=")
	if !ok || sp == "" || src == "" {
		return nil, "", fmt.Errorf("--dataset %q: want SCHEMA.json=SOURCE", source.Redact(s))
	}
	sch, err := loadSchema(sp)
	if err != nil {
		return nil, "", err
	}
	return sch, src, nil
}

// checkDatasets reads every dataset's whole source through its schema and
// logs the local report; it fails on a source that does not fit its schema.
func checkDatasets(ctx context.Context, sets []*owner.Dataset, log hclog.Logger) error {
	for _, d := range sets {
		rep, err := d.Check(ctx)
		if err != nil {
			return fmt.Errorf("dataset %s: %w", d.Schema.ID, err)
		}
		// The owner's own log: counts only, and per-feature ranges, which
		// stay on this machine.
		log.Info("dataset checked (local report, never sent)", "dataset", d.Schema.ID, "source", d.Describe(),
			"rows", rep.Rows, "used", rep.Used, "skipped_unreadable", rep.Skipped, "dropped_missing_value", rep.Missing,
			"filled_missing_value", rep.Filled, "clamped_values", rep.Clamped, "clipped_rows", rep.Clipped)
		if rep.Skipped > 0 {
			log.Warn("rows the owner will skip", "dataset", d.Schema.ID, "first", strings.Join(rep.Examples, "; "))
		}
		if err := rep.Usable(); err != nil {
			return fmt.Errorf("dataset %s (%s): %w (fedpca owner check --dataset shows each column's problems)", d.Schema.ID, d.Describe(), err)
		}
	}
	return nil
}

func ownerCheckCommand() *cli.Command {
	return &cli.Command{
		Name:  "check",
		Usage: "read a dataset's whole source through its schema and print a local report (nothing is sent)",
		Description: `Reads every row as a job would and prints: rows read, used, skipped as unreadable
(by column, with the first few lines and what is wrong), dropped or filled by the
missing-value policy, values clamped to a feature's min/max, rows clipped, and each
feature's min and max after the map. The report describes private rows: it is for
the owner's operator. Fails, naming the column, when the source does not fit the
schema, and when no row of it is usable. "owner serve" runs the same check at start
and refuses to start on either.

  fedpca owner check --dataset wdbc.schema.json=hospital-a.csv
  fedpca owner check --dataset wdbc.schema.json='postgres://fedpca@db:5432/cdw?table=wdbc'`,
		Flags: []cli.Flag{
			strsFlag("dataset", datasetUsage+" (repeat for several)"),
			boolFlag("json", "print the reports as JSON"),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if len(cmd.StringSlice("dataset")) == 0 {
				return errors.New("give --dataset SCHEMA.json=SOURCE")
			}
			var reps []*schema.CheckReport
			for _, s := range cmd.StringSlice("dataset") {
				sch, src, err := parseDataset(s)
				if err != nil {
					return err
				}
				d := &owner.Dataset{Schema: sch, Source: src}
				rep, err := d.Check(ctx)
				if err != nil {
					return fmt.Errorf("dataset %s: %w", sch.ID, err)
				}
				reps = append(reps, rep)
				if !cmd.Bool("json") {
					fmt.Printf("%s (%s)\n%s\n", sch.ID, d.Describe(), rep)
				}
			}
			if cmd.Bool("json") {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(reps); err != nil {
					return err
				}
			}
			var errs []error
			for _, rep := range reps {
				if err := rep.Usable(); err != nil {
					errs = append(errs, fmt.Errorf("dataset %s: %w", rep.Schema, err))
				}
			}
			return errors.Join(errs...)
		},
	}
}

// inferFlags are schema infer's flags.
func inferFlags() []cli.Flag {
	return []cli.Flag{
		reqStr("data", "the rows: a CSV file (plain or gzip) or a postgres:// URL, as an owner's --dataset SOURCE"),
		reqStr("id", "dataset ID"),
		strFlag("label", "label", "label column (empty: no classes)"),
		strsFlag("exclude", "columns to leave out (an id, a date); repeat or comma-separate"),
		strsFlag("categorical", "columns to one-hot encode from their distinct values; repeat or comma-separate"),
		strFlag("missing", "", "schema-wide missing-value policy: drop (cells such as '', NA, NaN, null count as missing)"),
		boolFlag("trim", "trim white space around every cell"),
		boolFlag("ignore-case", "labels and categories without case"),
		boolFlag("decimal-comma", "the file writes decimal commas: read 1,5 as 1.5 (as --data FILE#decimal_comma=true; the file's format, not written into the schema)"),
		intFlag("bits", schema.DefaultBits, "fractional bits g"),
		strFlag("clip", schema.DefaultClipNorm, "row clip norm C"),
	}
}

func genotypesSchemaCommand() *cli.Command {
	return &cli.Command{
		Name:  "genotypes",
		Usage: "write the schema of a PLINK fileset's genotypes standardised by a public reference panel's allele frequencies (for the power-method job)",
		Description: `Each variant of the study's .bim becomes a feature: its dosage x (the count of
allele 1) maps to (x - 2p) / sqrt(2p(1 - p)) with p the reference frequency of
allele 1, a missing call reads as 2p (maps to 0); a variant monomorphic in the
reference is left out (said on standard error). Rows are clipped to C = clip-factor x sqrt(d). The
frequencies come from public data only: a reference panel's fileset (--panel)
or PLINK 1.9's --freq output for it (--frq), matched to the study by variant ID
(alleles swapped give 1 - p). Owners then serve SCHEMA.json=plink://PREFIX, and
the user runs the power-method job (user run --method power); a schema of more
than 4,096 variants takes only that job.

  fedpca schema genotypes --id cohort --bim study.bim --panel ref/panel \
      --start start.csv --columns 20 > cohort.schema.json
  fedpca user run --schema cohort.schema.json --method power -k 10 --oversample 10 --start start.csv ...`,
		Flags: []cli.Flag{
			reqStr("id", "dataset ID"),
			reqStr("bim", "the study's variants: a .bim file every owner's fileset shares"),
			strFlag("panel", "", "a public reference panel's PLINK fileset (PREFIX of .bed/.bim/.fam)"),
			strFlag("frq", "", "instead of --panel: the reference's allele frequencies as PLINK 1.9 --freq writes them (.frq)"),
			intFlag("bits", 8, "fractional bits g"),
			floatFlag("clip-factor", 1, "rows are clipped to C = clip-factor x sqrt(variants) (standardised genotypes have norms near sqrt(variants))"),
			strFlag("start", "", "with --panel: also write the panel's top --columns principal axes under this schema to this CSV file (d rows of p numbers), the public start of user run --method power --start"),
			intFlag("columns", 20, "with --start: p, the columns of the start (k + the job's --oversample)"),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			f, err := os.Open(cmd.String("bim"))
			if err != nil {
				return err
			}
			study, err := source.ReadBIM(f)
			f.Close()
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.String("bim"), err)
			}
			freqs, err := source.PanelFrequencies(study, cmd.String("panel"), cmd.String("frq"))
			if err != nil {
				return err
			}
			names := make([]string, len(study))
			for i, v := range study {
				names[i] = v.ID
			}
			if cmd.Float64("clip-factor") <= 0 {
				return fmt.Errorf("--clip-factor %v: want a positive factor", cmd.Float64("clip-factor"))
			}
			clip, err := fixedpoint.FromFloat(cmd.Float64("clip-factor") * math.Sqrt(float64(len(study))))
			if err != nil {
				return err
			}
			s, mono, err := schema.Genotypes(cmd.String("id"), names, freqs, uint(cmd.Int("bits")), clip)
			if err != nil {
				return err
			}
			if len(mono) > 0 {
				fmt.Fprintf(os.Stderr, "%d variants monomorphic in the reference left out (the first: %s); the schema has %d features\n", len(mono), mono[0], s.D())
			}
			if path := cmd.String("start"); path != "" {
				if err := writePanelStart(path, cmd.String("panel"), s, int(cmd.Int("columns"))); err != nil {
					return err
				}
			}
			fmt.Println(string(s.Canonical()))
			return nil
		},
	}
}

// writePanelStart writes the reference panel's top p axes under the
// schema as a CSV file of d rows of p numbers (source.PanelStart).
func writePanelStart(path, panel string, s *schema.Schema, p int) error {
	if panel == "" {
		return fmt.Errorf("--start needs the panel's fileset (--panel), not its frequencies alone")
	}
	g, err := source.OpenPLINK(panel)
	if err != nil {
		return err
	}
	start, err := source.PanelStart(g, s, p)
	if err != nil {
		return err
	}
	var b strings.Builder
	for i := range s.D() {
		for j := range p {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.FormatFloat(start.At(i, j), 'g', -1, 64))
		}
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// inferWarning is printed on every schema infer.
const inferWarning = `WARNING: schema infer computes centers, scales, category and class lists from the
rows it reads. Run on an owner's private rows, the schema it writes LEAKS them (means,
deviations, which categories and classes occur) to everyone who sees the schema. Use it
on public or reference data only; across owners, agree on a schema from their pooled
rows without revealing them with the profile job ("fedpca user profile").`

func inferAction(ctx context.Context, cmd *cli.Command) error {
	fmt.Fprintln(os.Stderr, inferWarning)
	split := func(v []string) []string {
		var out []string
		for _, s := range v {
			for _, p := range strings.Split(s, ",") {
				if p = strings.TrimSpace(p); p != "" {
					out = append(out, p)
				}
			}
		}
		return out
	}
	opt := schema.InferOptions{ID: cmd.String("id"), Label: cmd.String("label"), Exclude: split(cmd.StringSlice("exclude")),
		Categorical: split(cmd.StringSlice("categorical")), Trim: cmd.Bool("trim"), IgnoreCase: cmd.Bool("ignore-case"), DecimalComma: cmd.Bool("decimal-comma")}
	switch m := cmd.String("missing"); m {
	case "":
	case schema.MissingDrop:
		opt.Missing = &schema.Missing{Policy: m}
	default:
		return fmt.Errorf("--missing %q: only drop is schema-wide (fill values are per feature: edit the schema)", m)
	}
	rows, err := source.Open(ctx, cmd.String("data"))
	if err != nil {
		return err
	}
	defer rows.Close()
	s, err := schema.InferRows(rows, opt)
	if err != nil {
		return fmt.Errorf("%s: %w", source.Redact(cmd.String("data")), err)
	}
	s.Bits = uint(cmd.Int("bits"))
	if err := s.ClipNorm.UnmarshalText([]byte(cmd.String("clip"))); err != nil {
		return fmt.Errorf("--clip: %w", err)
	}
	if err := s.Validate(); err != nil {
		return err
	}
	fmt.Println(string(s.Canonical()))
	return nil
}
