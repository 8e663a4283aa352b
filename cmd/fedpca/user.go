package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v3"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

func loadResult(path string) (*job.Result, error) { return user.LoadResult(path) }

func userCommand() *cli.Command {
	return &cli.Command{
		Name:  "user",
		Usage: "data user: keys, jobs, results",
		Commands: []*cli.Command{{
			Name:  "keygen",
			Usage: "make the user's HE key pair (the committee re-encrypts results to it)",
			Flags: []cli.Flag{reqStr("keys", "directory for he-secret.key (0600) and he-public.key")},
			Action: func(_ context.Context, cmd *cli.Command) error {
				p, err := he.NewDefaultParams()
				if err != nil {
					return err
				}
				kp, err := user.GenerateKeys(cmd.String("keys"), p)
				if err != nil {
					return err
				}
				fmt.Printf("HE key pair written to %s (public key fingerprint %s)\n", cmd.String("keys"), job.Fingerprint(p.Codecs().PublicKey.Marshal(kp.Public)))
				return nil
			},
		}, {
			Name:  "run",
			Usage: "create and sign a job, wait for it, decrypt and analyse the result",
			Description: `Example:
  fedpca user run --certs certs/user-alice --keys keys --proxy proxy:7000 \
    --schema wdbc.schema.json --owners hospital-a,hospital-b,hospital-c \
    --analysis pca --k 5 --epsilon 1 --out out/

Writes OUT/result.json (components, privacy accounting with the collusion table,
and the noisy release), OUT/components.csv, OUT/components.npy, OUT/mean.npy,
OUT/eigenvalues.npy and OUT/release.json; with --plots DIR also the scree plot.
On a terminal a progress bar follows the uploads and the key switch.`,
			Flags: append([]cli.Flag{
				strFlag("certs", "", "the user's credentials directory"),
				boolFlag("insecure", "plaintext (local tests only)"),
				strFlag("id", "", "user ID (only with --insecure)"),
				reqStr("keys", "the user's HE key directory (fedpca user keygen)"),
				reqStr("proxy", "proxy address HOST:PORT"),
				reqStr("schema", "the dataset's schema file"),
				strsFlag("owners", "the owners asked to take part (comma-separated or repeated)"),
				strsFlag("committee", "pin the committee: create the job only under a key attested by exactly these CSP member IDs (default: any committee of the deployment's CSPs that attested it)"),
				intFlag("min-owners", 0, "uploads needed (default: all owners)"),
				strFlag("analysis", "pca", "pca, dca, lda or scatter"),
				intFlag("k", 5, "components wanted (0: all)"),
				floatFlag("epsilon", 1, "privacy: epsilon"),
				floatFlag("delta", job.DefaultDelta, "privacy: delta"),
				boolFlag("no-noise", "no DP noise (tests only: every party must allow it)"),
				strFlag("plan", dp.PlanServers, "noise plan: central, servers, owners or all"),
				intFlag("tolerate", 0, "noise parties the user may collude with and still get the guarantee"),
				strFlag("split", "", "budget split R/v/n, e.g. 0.95/0.04/0.01 (default: 0.95/0.04/0.01 for pca, 0.3/0.6/0.1 for dca and lda)"),
				&cli.DurationFlag{Name: "deadline", Value: 10 * time.Minute, Usage: "how long the job accepts uploads", Sources: env("deadline")},
				&cli.IntFlag{Name: "max-owner-rows", Usage: "public per-owner row cap: each owner uses at most this many rows and drops the rest, counting them in its own log (0: the largest the plaintext range allows for the job, printed)", Sources: env("max-owner-rows")},
				strFlag("out", "out", "directory for the outputs"),
				plotsFlag(),
				boolFlag("publish", "publish the result document for the owners"),
				boolFlag("quiet", "no progress display (a bar on a terminal, one line per change otherwise)"),
			}, logFlags()...),
			Action: runUser,
		}, {
			Name:  "analyze",
			Usage: "re-run an analysis on a saved result's noisy release (no privacy cost)",
			Flags: []cli.Flag{
				reqStr("result", "a result document (result.json)"),
				strFlag("analysis", "pca", "pca, dca, lda or scatter"),
				intFlag("k", 5, "components wanted (0: all)"),
				strFlag("out", "out", "directory for the outputs"),
				plotsFlag(),
			},
			Action: func(_ context.Context, cmd *cli.Command) error {
				if err := checkPlots(cmd, cmd.String("analysis")); err != nil {
					return err
				}
				res, err := user.LoadResult(cmd.String("result"))
				if err != nil {
					return err
				}
				again, err := job.Reanalyze(res, cmd.String("analysis"), cmd.Int("k"))
				if err != nil {
					return err
				}
				return writeResult(cmd, again)
			},
		}},
	}
}

func parseSplit(s string) (dp.Split, error) {
	if s == "" {
		return dp.Split{}, nil
	}
	var sp dp.Split
	if _, err := fmt.Sscanf(s, "%g/%g/%g", &sp.R, &sp.V, &sp.N); err != nil {
		return sp, fmt.Errorf("--split %q: want R/V/N, e.g. 0.95/0.04/0.01", s)
	}
	return sp, sp.Validate()
}

func runUser(ctx context.Context, cmd *cli.Command) error {
	if err := checkPlots(cmd, cmd.String("analysis")); err != nil {
		return err
	}
	log := logger(cmd, "user")
	d, err := dialer(cmd, transport.RoleUser, log)
	if err != nil {
		return err
	}
	p, err := he.NewDefaultParams()
	if err != nil {
		return err
	}
	kp, err := user.LoadKeys(cmd.String("keys"), p)
	if err != nil {
		return err
	}
	sch, err := loadSchema(cmd.String("schema"))
	if err != nil {
		return err
	}
	split, err := parseSplit(cmd.String("split"))
	if err != nil {
		return err
	}
	var owners []string
	for _, o := range cmd.StringSlice("owners") {
		for _, x := range strings.Split(o, ",") {
			if x = strings.TrimSpace(x); x != "" {
				owners = append(owners, x)
			}
		}
	}
	if len(owners) == 0 {
		return errors.New("name the owners with --owners a,b,c")
	}
	c, err := user.NewClient(user.Config{Dialer: d, ProxyAddr: cmd.String("proxy"), Keys: kp, Committee: cmd.StringSlice("committee"), Logger: log, Params: &p})
	if err != nil {
		return err
	}
	defer c.Close()
	req := user.Request{Schema: sch, Analysis: cmd.String("analysis"), K: cmd.Int("k"), Epsilon: cmd.Float64("epsilon"), Delta: cmd.Float64("delta"),
		NoNoise: cmd.Bool("no-noise"), Plan: cmd.String("plan"), Tolerate: cmd.Int("tolerate"), Split: split, Owners: owners,
		MinOwners: cmd.Int("min-owners"), Deadline: time.Now().Add(cmd.Duration("deadline")), MaxOwnerRows: int64(cmd.Int("max-owner-rows"))}
	spec, err := c.Spec(ctx, req)
	if err != nil {
		return err
	}
	if req.MaxOwnerRows == 0 {
		fmt.Fprintf(os.Stderr, "max-owner-rows: %d (the largest the plaintext range allows for this job; owners drop rows beyond it)\n", spec.MaxOwnerRows)
	}
	start := time.Now()
	if _, err := c.Submit(ctx, spec, sch); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "job %s created: %s on %s, %d owners, deadline %s\n", spec.ID(), spec.Analysis, spec.Dataset, len(spec.Owners), spec.Deadline.Format(time.RFC3339))
	// On a terminal a bar; otherwise (logs) one line per change.
	var bar *progress
	if !cmd.Bool("quiet") {
		bar = newProgress(len(spec.Owners), "uploads")
	}
	lines := !cmd.Bool("quiet") && !stderrIsTerminal()
	var last string
	st, err := c.Wait(ctx, spec.ID(), func(s *fedpcav1.JobStatus) {
		bar.job(s)
		line := progressLine(s)
		if line != last && lines {
			fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(start).Seconds(), line)
		}
		last = line
	})
	bar.done()
	if err != nil {
		return err
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		return fmt.Errorf("job %s failed: %s%s", spec.ID(), st.GetReason(), declinedText(st))
	}
	res, err := c.Fetch(ctx, spec, sch)
	if err != nil {
		return err
	}
	if cmd.Bool("publish") {
		doc, _ := json.Marshal(res)
		if err := c.Publish(ctx, res, doc); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	return writeResult(cmd, res)
}

// writeResult writes a user's result files (and figures, with --plots) and
// prints its summary.
func writeResult(cmd *cli.Command, res *job.Result) error {
	paths, err := user.WriteOutputs(cmd.String("out"), res)
	if err != nil {
		return err
	}
	printSummary(res)
	fmt.Printf("wrote %s\n", strings.Join(paths, ", "))
	if dir := cmd.String("plots"); dir != "" {
		return writePlots(os.Stdout, dir, res, nil, nil)
	}
	return nil
}

func progressLine(s *fedpcav1.JobStatus) string {
	state := strings.ToLower(strings.TrimPrefix(s.GetState().String(), "JOB_STATE_"))
	return fmt.Sprintf("%s: %d/%d owners uploaded, %d declined — %s", state, s.GetOwnersUploaded(), s.GetOwnersExpected(), s.GetOwnersDeclined(), s.GetReason())
}

func declinedText(s *fedpcav1.JobStatus) string {
	var b strings.Builder
	for _, d := range s.GetDeclinedOwners() {
		code := job.Decline(d.GetReason())
		fmt.Fprintf(&b, "\n  owner %s declined (%s): %s", d.GetOwner(), code, code.Text())
	}
	return b.String()
}

// printSummary prints the result for a human.
func printSummary(res *job.Result) {
	fmt.Printf("job %s: %s on %s, %d owners, noisy n = %.1f\n", res.JobID, res.Analysis, res.Dataset, res.NumOwners, res.NoisyN)
	if c := res.Components; c != nil {
		fmt.Printf("eigenvalues:")
		for _, v := range c.Eigenvalues {
			fmt.Printf(" %.4g", v)
		}
		fmt.Println()
		if c.ExplainedVarianceRatio != nil {
			fmt.Printf("explained variance ratio:")
			for _, v := range c.ExplainedVarianceRatio {
				fmt.Printf(" %.4f", v)
			}
			fmt.Println()
		}
	}
	pr := res.Privacy
	if pr.NoNoise {
		fmt.Println("privacy: NO NOISE (test job)")
		return
	}
	fmt.Printf("privacy: (epsilon %.4g, delta %.3g)-DP, rho %.4g zCDP, plan %s tolerating %d\n", float64(pr.Epsilon), pr.Delta, float64(pr.Rho), pr.Plan, pr.Tolerate)
	for _, row := range pr.Collusion {
		fmt.Printf("  user colluding with %-16s epsilon %.4g\n", row.With+":", float64(row.Epsilon))
	}
}
