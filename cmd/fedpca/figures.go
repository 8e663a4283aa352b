package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v3"
	"gonum.org/v1/gonum/mat"

	"github.com/fedpca/fedpca/plots"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/user"
)

func plotsFlag() cli.Flag {
	return strFlag("plots", "", "directory for the figures (SVG and PNG): the scree plot, and the scatter of the rows where the command has rows")
}

// checkPlots refuses --plots for an analysis without components before any
// work (or privacy budget) is spent.
func checkPlots(cmd *cli.Command, analysis string) error {
	if cmd.String("plots") != "" && analysis == job.Scatter {
		return fmt.Errorf("--plots: analysis %s has no components to plot", analysis)
	}
	return nil
}

// checkPlotFiles refuses, before any work and unless --force, when --plots
// would replace a figure of an earlier run: those of dataset for each of
// analyses.
func checkPlotFiles(cmd *cli.Command, dataset string, analyses ...string) error {
	dir := cmd.String("plots")
	if dir == "" {
		return nil
	}
	var paths []string
	for _, a := range analyses {
		paths = append(paths, plots.Paths(dir, dataset, a)...)
	}
	return user.CheckNew(cmd.Bool("force"), paths...)
}

// writePlots draws a result's figures into dir, with the scatter of the
// projected rows coords (n x k; nil: none) when there are two components to
// draw, and says on msgs what it wrote.
func writePlots(msgs io.Writer, dir string, res *job.Result, coords *mat.Dense, labels []string) error {
	var rows *plots.Rows
	if coords != nil {
		if _, k := coords.Dims(); k < 2 {
			fmt.Fprintf(msgs, "plots: no scatter: the %s result has %d component\n", res.Analysis, k)
		} else {
			rows = &plots.Rows{Coords: coords, Labels: labels}
		}
	}
	paths, err := plots.Write(dir, res, rows)
	if err != nil {
		return err
	}
	fmt.Fprintf(msgs, "plots: %s\n", strings.Join(paths, ", "))
	return nil
}

// simPlots draws a simulated job's figures, the scatter from the
// simulator's rows.
func simPlots(sm *sim.Simulator, dir string, res *job.Result) error {
	coords, labels, err := sm.Projected(res)
	if err != nil {
		return err
	}
	return writePlots(os.Stdout, dir, res, coords, labels)
}
