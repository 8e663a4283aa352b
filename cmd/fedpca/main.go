package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v3"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app().Run(ctx, os.Args); err != nil {
		if !errors.Is(err, errInterrupted) {
			fmt.Fprintln(os.Stderr, "fedpca:", errorText(err))
		}
		os.Exit(exitCode(err))
	}
}

// app is the command tree, made strict (see strict).
func app() *cli.Command {
	cli.VersionPrinter = func(*cli.Command) { fmt.Println(versionInfo()) }
	root := &cli.Command{
		Name:    "fedpca",
		Version: versionLine(), // --version prints versionInfo
		Usage:   "federated, differentially private PCA and discriminant analysis",
		Description: `Data owners encrypt local scatter statistics under a CSP committee's key; a
proxy sums them, adds DP noise and blinds the sum; the committee re-encrypts it to
the data user, who decrypts the noisy release and solves the eigenproblems.

Start with "fedpca demo". Every flag can also be set with an environment variable
FEDPCA_<FLAG> (upper case, dashes as underscores), e.g. FEDPCA_LISTEN=:7000.`,
		Commands: []*cli.Command{
			demoCommand(), simulateCommand(), certsCommand(), cspCommand(), proxyCommand(),
			ownerCommand(), userCommand(), schemaCommand(), datasetCommand(), referenceCommand(), compareCommand(), healthCommand(),
			versionCommand(), cliReferenceCommand(),
		},
	}
	strict(root, root.Name)
	return root
}

// env returns the environment variable of a flag.
func env(name string) cli.ValueSourceChain {
	return cli.EnvVars("FEDPCA_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
}

func strFlag(name, value, usage string) *cli.StringFlag {
	return &cli.StringFlag{Name: name, Value: value, Usage: usage, Sources: env(name)}
}

func reqStr(name, usage string) *cli.StringFlag {
	return &cli.StringFlag{Name: name, Usage: usage, Sources: env(name), Required: true}
}

func strsFlag(name, usage string) *cli.StringSliceFlag {
	return &cli.StringSliceFlag{Name: name, Usage: usage, Sources: env(name)}
}

func intFlag(name string, value int, usage string) *cli.IntFlag {
	return &cli.IntFlag{Name: name, Value: value, Usage: usage, Sources: env(name)}
}

func floatFlag(name string, value float64, usage string) *cli.Float64Flag {
	return &cli.Float64Flag{Name: name, Value: value, Usage: usage, Sources: env(name)}
}

func boolFlag(name, usage string) *cli.BoolFlag {
	return &cli.BoolFlag{Name: name, Usage: usage, Sources: env(name)}
}

// logFlags are common to every command that logs.
func logFlags() []cli.Flag {
	return []cli.Flag{
		boolFlag("log-json", "log JSON lines instead of text"),
		strFlag("log-level", "info", "log level: trace, debug, info, warn, error"),
	}
}

func logger(cmd *cli.Command, name string) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       name,
		Level:      hclog.LevelFromString(cmd.String("log-level")),
		JSONFormat: cmd.Bool("log-json"),
		Output:     os.Stderr,
	})
}
