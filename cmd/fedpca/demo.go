package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v3"

	"github.com/fedpca/fedpca/datasets"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/sim"
)

func demoCommand() *cli.Command {
	return &cli.Command{
		Name:  "demo",
		Usage: "run the whole protocol in one process on a bundled real dataset (no flags, files or network needed)",
		Description: `Starts a CSP committee of 3 (any 2 can re-encrypt), the proxy and 5 data owners
holding random slices of the UCI Wine data, all talking gRPC over in-memory
connections with mutual TLS, then runs a PCA and a DCA job at epsilon 1 as a data
user, and a PCA job whose user learns only the components (exact, then at
epsilon 1), and prints the components, the explained variance, the utility against the
non-private result on the same rows, the privacy accounting with its collusion
table, and the time of each phase. With --plots DIR it also draws each job's scree
plot and the rows on the first two components (SVG and PNG); the figures in the
README were made with

  fedpca demo --plots docs/ --force   # --force: they replace the committed ones`,
		Flags: []cli.Flag{
			strFlag("dataset", "wine", "bundled dataset: "+fmt.Sprint(datasets.Names())),
			intFlag("owners", 5, "number of owners"),
			floatFlag("epsilon", 1, "epsilon of each job"),
			plotsFlag(),
			forceFlag(),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			name := cmd.String("dataset")
			data, err := datasets.CSV(name)
			if err != nil {
				return err
			}
			if err := checkPlotFiles(cmd, name, job.PCA, job.DCA); err != nil {
				return err
			}
			fmt.Printf("fedpca demo: federated, differentially private PCA and DCA\n\n")
			fmt.Printf("dataset     %s: %s\n", name, datasets.About(name))
			fmt.Printf("deployment  %d data owners (rows dealt at random), a proxy, a CSP committee of 3 (any 2 re-encrypt)\n", cmd.Int("owners"))
			fmt.Printf("            and a data user; gRPC with mutual TLS 1.3 over in-memory connections; BGV (lattigo v5)\n")
			fmt.Printf("            preprocessing: standardise with the pooled mean/std, clip rows to norm 1, 16 fractional bits\n")
			start := time.Now()
			sm, err := startSimulator(ctx, sim.Simulation{Data: data, Name: name, Label: "label", Owners: cmd.Int("owners"),
				How: "iid", Seed: 1, CSPs: 3, Threshold: 2, AllowExactComponents: true})
			if err != nil {
				return err
			}
			defer sm.Close()
			fmt.Printf("setup       certificates, key ceremony and owners ready in %.2f s\n", time.Since(start).Seconds())
			for _, analysis := range []string{job.PCA, job.DCA} {
				fmt.Printf("\n==== %s at epsilon %g ====\n\n", analysis, cmd.Float64("epsilon"))
				p := newProgress(cmd.Int("owners"), "uploads")
				rep, err := sm.Run(ctx, sim.JobOptions{Analysis: analysis, K: 3, Epsilon: cmd.Float64("epsilon"), Plan: dp.PlanServers, Progress: p.job})
				p.done()
				if err != nil {
					return err
				}
				rep.WriteText(os.Stdout, true)
				if dir := cmd.String("plots"); dir != "" {
					fmt.Println()
					if err := simPlots(sm, dir, rep.Result); err != nil {
						return err
					}
				}
			}
			// The components-only release: the committee computes the top
			// components on shares and only those reach the user, exact
			// (the owners here allow it) and at the same epsilon.
			for _, exact := range []bool{true, false} {
				title := fmt.Sprintf("epsilon %g", cmd.Float64("epsilon"))
				if exact {
					title = "exact (no DP noise; owners allow exact components)"
				}
				fmt.Printf("\n==== PCA, components only, %s ====\n\n", title)
				p := newProgress(cmd.Int("owners"), "uploads")
				o := sim.JobOptions{Analysis: job.PCA, K: 3, Release: job.ReleaseComponents, NoNoise: exact, Progress: p.job}
				if !exact {
					o.Epsilon, o.Plan = cmd.Float64("epsilon"), dp.PlanServers
				}
				rep, err := sm.Run(ctx, o)
				p.done()
				if err != nil {
					return err
				}
				rep.WriteText(os.Stdout, true)
			}
			fmt.Printf("\nNext: `fedpca simulate --help` to try other datasets, owners, noise plans and budgets.\n")
			return nil
		},
	}
}
