package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v3"

	"github.com/fedpca/fedpca/csp"
	"github.com/fedpca/fedpca/owner"
	"github.com/fedpca/fedpca/transport"
)

// A running node holds its bbolt store locked: a second process cannot open
// it, not even read-only (bbolt's shared lock waits for the writer's
// exclusive one), and reading the file without the lock could meet a page
// half written. So a node serves what its operator's offline commands read
// (csp audit, owner ledger) on a unix socket in its state directory,
// from its own open store in a read transaction: the same records, read
// consistently, without stopping it. The socket is 0600 in a 0700
// directory: whoever can connect can read the store itself (the key share,
// the ledger), so the directory's permissions are the access control, and
// nothing listens on the network. Each connection gets the whole document
// and is closed; the client sends nothing.
const (
	auditSocket  = "audit.sock"
	ledgerSocket = "ledger.sock"
)

// serveLocal serves write's document on the socket name in the node's
// state directory dir until ctx is done. The node holds its store, so no
// other node of this directory runs: a socket file left by a crash is
// removed first. A path too long for a unix socket is logged, and the node
// runs without it.
func serveLocal(ctx context.Context, log hclog.Logger, dir, name string, write func(io.Writer) error) {
	path := filepath.Join(dir, name)
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	l, err := net.Listen("unix", path)
	if err == nil {
		err = os.Chmod(path, 0o600)
	}
	if err != nil {
		log.Warn("cannot serve the local operator socket: read the state directory with the node stopped", "socket", path, "error", err)
		if l != nil {
			l.Close()
		}
		return
	}
	go func() {
		<-ctx.Done()
		l.Close()
	}()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return // closed
			}
			go func() {
				defer c.Close()
				_ = c.SetWriteDeadline(time.Now().Add(time.Minute))
				if err := write(c); err != nil {
					log.Warn("local operator socket", "socket", path, "error", err)
				}
			}()
		}
	}()
}

// readStateDir reads a node's state directory with read, offline; when the
// node runs (its store is locked) it reads the document the node serves on
// its socket name instead, into w. It says which it did.
func readStateDir(dir, name string, read func() error, w io.Writer) (live bool, err error) {
	err = read()
	if !errors.Is(err, transport.ErrStoreLocked) {
		return false, err
	}
	path := filepath.Join(dir, name)
	c, derr := net.DialTimeout("unix", path, 3*time.Second)
	if derr != nil {
		return false, fmt.Errorf("%w; and the running node does not answer on %s (%v): stop it to read its state directory", err, path, derr)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.Copy(w, c); err != nil {
		return true, fmt.Errorf("read %s: %w", path, err)
	}
	return true, nil
}

// writeAudit writes a member's switch records as JSON lines (csp audit).
func writeAudit(w io.Writer, recs []csp.SwitchRecord) error {
	enc := json.NewEncoder(w)
	for _, r := range recs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

func ownerLedgerCommand() *cli.Command {
	return &cli.Command{
		Name:  "ledger",
		Usage: "print this owner's privacy ledgers: what each job spent, in epsilon and rho, and what is left (offline)",
		Description: `Reads the owner's state directory, without the network: its store when the owner
is stopped (the budget is its configuration, not stored: give the owner's
--budget-epsilon and --budget-delta), or, while it runs, the ledgers it serves on the
socket ledger.sock in that directory, with its own budget. One ledger per source of
rows; every job that reserved budget, with its state (reserved: in progress;
committed: spent; released or refunded: nothing spent), its cost as epsilon at the
budget's delta and as rho, and the epsilon and delta it asked for. Epsilons of
several jobs do not add up: the totals compose the costs exactly, as the ledger
admits jobs.

  fedpca owner ledger --state state/hospital-a`,
		Flags: []cli.Flag{
			reqStr("state", "the owner's state directory"),
			floatFlag("budget-epsilon", 10, "the owner's --budget-epsilon, when it is stopped"),
			floatFlag("budget-delta", 1e-6, "the owner's --budget-delta, when it is stopped: every epsilon is at it"),
			boolFlag("json", "print the ledgers as JSON"),
		},
		Action: func(_ context.Context, cmd *cli.Command) error {
			dir := cmd.String("state")
			var views []owner.LedgerView
			var served bytes.Buffer
			live, err := readStateDir(dir, ledgerSocket, func() (err error) {
				views, err = owner.ReadLedgers(dir, cmd.Float64("budget-epsilon"), cmd.Float64("budget-delta"))
				return err
			}, &served)
			if err != nil {
				return err
			}
			if live {
				if err := json.Unmarshal(served.Bytes(), &views); err != nil {
					return fmt.Errorf("the owner's ledger socket: %w", err)
				}
			}
			if cmd.Bool("json") {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", " ")
				return enc.Encode(views)
			}
			budget := "as given (--budget-epsilon, --budget-delta: the owner's own decide)"
			if live {
				budget = "the running owner's"
			}
			printLedgers(os.Stdout, views, budget)
			return nil
		},
	}
}

// printLedgers writes ledgers for a governance officer.
func printLedgers(w io.Writer, views []owner.LedgerView, budget string) {
	if len(views) == 0 {
		fmt.Fprintln(w, "no ledger: this owner has taken part in no job")
		return
	}
	for i, v := range views {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "ledger %s (datasets %s)\n", v.Ledger, strings.Join(v.Datasets, ", "))
		fmt.Fprintf(w, "  budget              epsilon %.4g at delta %.3g, %s\n", v.EpsilonBudget, v.Delta, budget)
		fmt.Fprintf(w, "  spent               epsilon %.4g (rho %.4g)\n", v.Spent.Epsilon, v.Spent.Rho)
		fmt.Fprintf(w, "  spent and reserved  epsilon %.4g (rho %.4g)\n", v.SpentAndReserved.Epsilon, v.SpentAndReserved.Rho)
		fmt.Fprintf(w, "  remaining           rho %.4g: one more job of epsilon up to %.4g\n", max(v.Remaining, 0), v.EpsilonRemaining)
		tw := tabwriter.NewWriter(w, 0, 2, 2, ' ', 0)
		fmt.Fprintln(tw, "  job\tdataset\tstate\tat\tcost epsilon\tcost rho\tasked (epsilon, delta)")
		for _, j := range v.Jobs {
			asked := fmt.Sprintf("(%.4g, %.3g)", j.JobEpsilon, j.JobDelta)
			if j.Release != "" {
				asked = j.Release // no noise: what it released instead
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%.4g\t%.4g\t%s\n", j.Job[:min(16, len(j.Job))], j.Dataset, j.State, j.At.Format(time.RFC3339), j.Cost.Epsilon, j.Cost.Rho, asked)
		}
		tw.Flush()
	}
}
