package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
		Usage: "choose a schema's centers, scales and clip norm privately, by two small jobs through the protocol",
		Description: `The schema given must declare public bounds "min" and "max" on every feature (owners
clamp to them). Two jobs spend --share of the total budget (--epsilon, --delta, as
Gaussian DP: mu^2 adds): per-feature noisy sums and sums of squares, then a noisy
histogram of the row norms. Writes OUT/schema.json (centers, scales, C at --quantile
of the norms; bounds, label and classes kept: owners serving the declared schema
take part under it) and OUT/profile.json (what each round released, the estimates
and their noise), and prints the epsilon left for the main job at the same delta.
With --keep-scales the schema's centers and scales are public already: no bounds
are needed and one job, the norms histogram, spends the whole --share to choose C.

  fedpca user profile --certs certs/user-alice --keys keys --proxy localhost:7000 \
    --schema wdbc.bounds.json --owners hospital-a,hospital-b --epsilon 1 --out profile/ \
    --committee csp-1,csp-2,csp-3
  fedpca user run ... --schema profile/schema.json --epsilon <printed>`,
		Flags: append(append(userConnFlags(true),
			reqStr("schema", "the declared schema: bounds min and max on every feature"),
			strsFlag("owners", "the owners asked to take part (comma-separated or repeated)"),
			intFlag("min-owners", 0, "uploads needed (0: all owners)"),
			floatFlag("epsilon", 1, "the total budget of the profile and the main job: epsilon"),
			floatFlag("delta", job.DefaultDelta, "the total budget: delta, in (0, 1)"),
			floatFlag("share", 0, "the profile's share of the total (of mu^2; 0: 0.1, or 0.02 with --keep-scales)"),
			floatFlag("moments-share", profile.DefaultMomentsShare, "the first round's share of the profile's"),
			floatFlag("quantile", 0, "C is set at this quantile of the row norms (0: 0.05, 0.5 or 0.9 by the rows per unit of noise, see docs/BENCHMARKS.md)"),
			boolFlag("keep-scales", "the schema's centers and scales are public (a registry, a public reference sample): no bounds needed, the norms round alone takes --share and chooses only C"),
			noisePlanFlag(),
			strFlag("main-analysis", job.PCA, "the main job's analysis (pca, dca, lda, scatter): the epsilon left is computed for it, its discrete correction counted"),
			intFlag("tolerate", 0, "noise parties the user may collude with and still get the guarantee"),
			&cli.DurationFlag{Name: "deadline", Value: 10 * time.Minute, Usage: "how long each round accepts uploads", Sources: env("deadline")},
			&cli.IntFlag{Name: "max-owner-rows", Usage: "public per-owner row cap (0: the largest the plaintext range allows)", Sources: env("max-owner-rows")},
			reqStr("out", "directory for schema.json and profile.json"),
		), append(committeeFlags("creates the profile's jobs"), logFlags()...)...),
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if err := checkPrivacy(cmd); err != nil {
				return err
			}
			owners, declared, err := jobTargets(cmd)
			if err != nil {
				return err
			}
			if err := committeePolicy(cmd).Validate(); err != nil {
				return err
			}
			c, err := userClient(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.Profile(ctx, user.ProfileRequest{Declared: declared, Epsilon: cmd.Float64("epsilon"), Delta: cmd.Float64("delta"),
				Share: cmd.Float64("share"), MomentsShare: cmd.Float64("moments-share"), Quantile: cmd.Float64("quantile"),
				KeepScales: cmd.Bool("keep-scales"), MainAnalysis: cmd.String("main-analysis"), Plan: cmd.String("noise-plan"), Tolerate: cmd.Int("tolerate"), Owners: owners, MinOwners: cmd.Int("min-owners"),
				Deadline: time.Now().Add(cmd.Duration("deadline")), MaxOwnerRows: int64(cmd.Int("max-owner-rows"))}, nil)
			if err != nil {
				return err
			}
			out := cmd.String("out")
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(out, "schema.json"), append(res.Schema.Canonical(), '\n'), 0o644); err != nil {
				return err
			}
			if err := writeJSON(filepath.Join(out, "profile.json"), res); err != nil {
				return err
			}
			fmt.Printf("schema written to %s (C = %s at quantile %g of the norms)\n", filepath.Join(out, "schema.json"), res.Schema.ClipNorm, res.Quantile)
			fmt.Printf("the main job (%s) may spend epsilon %.6g at delta %g: with the profile's rounds (share %g of mu^2, epsilon %.6g alone), epsilon %.7g in all, discrete corrections included\n",
				cmd.String("main-analysis"), res.Budget.Main, res.Budget.Delta, res.Share, res.Budget.Spent.Epsilon(res.Budget.Delta), res.Budget.Total)
			if res.Estimate == nil {
				return nil
			}
			at := 0
			for _, b := range res.Estimate.AtNoise {
				if b {
					at++
				}
			}
			if 2*at > len(res.Estimate.AtNoise) {
				fmt.Fprintf(os.Stderr, "warning: %d of %d features' variances are below the profile's noise (%.3g of the declared half-range squared): "+
					"at this budget and row count the profile cannot see their spreads, and the main job's PCA will be noisy; "+
					"declare public scales if you have them, or run the main job with --standardize\n", at, len(res.Estimate.AtNoise), res.Estimate.VarNoise)
			}
			return nil
		},
	}
}
