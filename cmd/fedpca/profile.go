package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/profile"
	"github.com/fedpca/fedpca/user"
)

// profileCommand is "user profile": the profile job that chooses a schema's
// centers, scales and clip norm privately.
func profileCommand() *cli.Command {
	return &cli.Command{
		Name:  "profile",
		Usage: "choose a schema's centers, scales and clip norm privately, by small jobs through the protocol",
		Description: `The schema given must declare public bounds "min" and "max" on every feature (owners
clamp to them; a schema of bounds only, without centers or scales, will do). Three
jobs spend --share of the total budget (--epsilon, --delta, as Gaussian DP: mu^2
adds): per-feature noisy histograms over a grid on the bounds (locating each
feature), per-feature noisy sums and sums of squares inside the windows they found
(or the bounds, with few rows), then a noisy histogram of the row norms. Prints and
writes each center and scale with its standard error, warns when a scale's noise
is large or a feature's spread could not be resolved, and prints the epsilon left
for the main job at the same delta and the command to run it (standardised: the
PCA of the release's own correlation, which the noise of the scales does not
reach). Writes OUT/schema.json (centers, scales, C at --quantile of the norms;
bounds, label and classes kept: owners serving the declared schema take part
under it) and OUT/profile.json (each parameter with its noise, what each round
released). With --keep-scales the schema's centers and scales are public already:
no bounds are needed and one job, the norms histogram, spends the whole --share to
choose C.

  fedpca user profile --certs certs/user-alice --keys keys --proxy localhost:7000 \
    --schema wdbc.bounds.json --owners hospital-a,hospital-b --epsilon 1 --out profile/ \
    --committee csp-1,csp-2,csp-3
  fedpca user run ... --schema profile/schema.json --epsilon <printed> --standardize`,
		Flags: append(append(userConnFlags(true),
			reqStr("schema", "the declared schema: bounds min and max on every feature"),
			strsFlag("owners", "the owners asked to take part (comma-separated or repeated)"),
			intFlag("min-owners", 0, "uploads needed (0: all owners)"),
			floatFlag("epsilon", 1, "the total budget of the profile and the main job: epsilon"),
			floatFlag("delta", job.DefaultDelta, "the total budget: delta, in (0, 1)"),
			floatFlag("share", 0, "the profile's share of the total (of mu^2; 0: 0.1, or 0.02 with --keep-scales)"),
			strFlag("method", profile.Quantiles, "how centers and scales are estimated: quantiles (locate, then measure inside the windows found) or moments (sums and sums of squares over the whole bounds, the earlier method)"),
			floatFlag("quantile", 0, "C is set at this quantile of the row norms (0: 0.05, 0.5 or 0.9 by the rows per unit of noise, see docs/BENCHMARKS.md)"),
			boolFlag("keep-scales", "the schema's centers and scales are public (a registry, a public reference sample): no bounds needed, the norms round alone takes --share and chooses only C"),
			noisePlanFlag(),
			strFlag("main-analysis", job.PCA, "the main job's analysis (pca, dca, lda, scatter): the epsilon left is computed for it, its discrete correction counted"),
			intFlag("tolerate", 0, "noise parties the user may collude with and still get the guarantee"),
			&cli.DurationFlag{Name: "deadline", Value: 10 * time.Minute, Usage: "how long each round accepts uploads", Sources: env("deadline")},
			&cli.IntFlag{Name: "max-owner-rows", Usage: "public per-owner row cap (0: the largest the plaintext range allows)", Sources: env("max-owner-rows")},
			reqStr("out", "directory for schema.json and profile.json"),
			forceFlag(),
		), append(committeeFlags("creates the profile's jobs"), logFlags()...)...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkPrivacy(cmd); err != nil {
				return err
			}
			owners, declared, err := jobTargets(cmd)
			if err != nil {
				return err
			}
			if _, err := committeePolicy(cmd, nil); err != nil {
				return err
			}
			out := cmd.String("out")
			if err := user.CheckNew(cmd.Bool("force"), filepath.Join(out, "schema.json"), filepath.Join(out, "profile.json")); err != nil {
				return err
			}
			c, err := userClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.Profile(ctx, user.ProfileRequest{Declared: declared, Options: profile.Options{Epsilon: cmd.Float64("epsilon"), Delta: cmd.Float64("delta"),
				Share: cmd.Float64("share"), Method: cmd.String("method"), Quantile: cmd.Float64("quantile"), KeepScales: cmd.Bool("keep-scales")},
				MainAnalysis: cmd.String("main-analysis"), Plan: cmd.String("noise-plan"), Tolerate: cmd.Int("tolerate"), Owners: owners, MinOwners: cmd.Int("min-owners"),
				Deadline: time.Now().Add(cmd.Duration("deadline")), MaxOwnerRows: int64(cmd.Int("max-owner-rows"))}, nil)
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, "schema.json"), append(res.Schema.Canonical(), '\n'), 0o644); err != nil {
				return err
			}
			if err := writeJSON(filepath.Join(out, "profile.json"), res); err != nil {
				return err
			}
			writeProfile(os.Stdout, res)
			for _, w := range res.Warnings {
				fmt.Fprintf(os.Stderr, "warning: %s\n", w)
			}
			fmt.Printf("schema written to %s (C = %s at quantile %g of the norms)\n", filepath.Join(out, "schema.json"), res.Schema.ClipNorm, res.Quantile)
			fmt.Printf("the main job (%s) may spend epsilon %.6g at delta %g: with the profile's %d rounds (share %g of mu^2, epsilon %.6g alone), epsilon %.7g in all, discrete corrections included\n",
				cmd.String("main-analysis"), res.Budget.Main, res.Budget.Delta, len(res.Rounds), res.Share, res.Budget.Spent.Epsilon(res.Budget.Delta), res.Budget.Total)
			if a := res.Advice; a != nil && cmd.String("main-analysis") == job.PCA {
				printAdvice(os.Stdout, a, res, filepath.Join(out, "schema.json"))
			}
			return nil
		},
	}
}

// printAdvice says how to run the main PCA job and what to expect of it:
// with public reference scales when most spreads are unresolved, then
// standardised (the PCA of the release's own correlation, which the noise
// of the scales does not reach), with what the pipeline captured at as
// many rows per unit of noise.
func printAdvice(w io.Writer, a *profile.Advice, res *user.ProfileResult, schemaPath string) {
	b := a.Band
	expect := fmt.Sprintf("at %.0f rows per unit of its noise (n mu/sqrt(d)), the pipeline captured %.2f to %.2f of the top components' variance of the standardised rows, %.2f to %.2f less than public scales (measured on %s: docs/BENCHMARKS.md, profile job)",
		a.RowsPerNoise, b.Captured[0], b.Captured[1], b.BelowPublic[0], b.BelowPublic[1], b.Datasets)
	run := fmt.Sprintf("  fedpca user run ... --schema %s --epsilon %.6g --delta %g --standardize\n", schemaPath, res.Budget.Main, res.Budget.Delta)
	if a.PublicScales {
		fmt.Fprintf(w, "%d of %d spreads are unresolved: the scales are upper estimates, at the noise's level; %s.\n", a.Unresolved, a.Features, expect)
		fmt.Fprintf(w, "if public reference centers and scales exist for these features (a registry, published reference ranges), put them in the schema and spend what is left on them (its norms round chooses C, the main job runs unstandardised):\n  fedpca user profile ... --schema REFERENCE.json --keep-scales --epsilon %.6g --delta %g\n",
			res.Budget.Main, res.Budget.Delta)
		fmt.Fprintf(w, "otherwise run it standardised, and expect as much:\n%s", run)
		return
	}
	fmt.Fprintf(w, "run it standardised (the scales above are noisy; the PCA of the release's own correlation is not):\n%s", run)
	fmt.Fprintf(w, "what to expect: %s\n", expect)
}

// writeProfile prints each feature's center and scale with its standard
// error.
func writeProfile(w io.Writer, res *user.ProfileResult) {
	if len(res.Features) == 0 {
		return
	}
	fmt.Fprintf(w, "%d rows (noisy); each parameter with its standard error (%s):\n", int(math.Round(res.N)), res.Method)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "feature\tcenter\t+-\tscale\t+-\t\t")
	for _, f := range res.Features {
		note := ""
		if f.Unresolved {
			note = "unresolved: an upper estimate"
		}
		fmt.Fprintf(tw, "%s\t%.4g\t%.2g\t%.4g\t%.2g\t%s\t\n", f.Name, f.Center, f.CenterSE, f.Scale, f.ScaleSE, note)
	}
	tw.Flush()
}
