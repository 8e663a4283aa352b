package main

import (
	"context"
	"crypto/rand"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v3"

	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/power"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

func loadResult(path string) (*job.Result, error) { return user.LoadResult(path) }

// splitText is a split as the flags write it.
func splitText(s dp.Split) string { return fmt.Sprintf("%g/%g/%g", s.R, s.V, s.N) }

// budgetSplitFlag is the budget split's flag, with the real defaults.
func budgetSplitFlag() cli.Flag {
	return strFlag("budget-split", "", fmt.Sprintf("how epsilon is split between R, the class sums v and the counts n, as R/v/n (default: %s for pca, %s for dca and lda)",
		splitText(dp.DefaultSplit), splitText(dp.DiscriminantSplit)))
}

// noisePlanFlag is the noise plan's flag.
func noisePlanFlag() cli.Flag {
	return strFlag("noise-plan", dp.PlanServers, "who adds the DP noise: central (the proxy), servers (the proxy and each CSP member), owners or all")
}

// releaseFlag is the flag that chooses what a job releases.
func releaseFlag() cli.Flag {
	return strFlag("release", "statistics", "what the user learns: statistics (the noisy scatter statistics, analysed here) or components (pca, dca or lda: the committee computes the top k components, their eigenvalues and n in secret-shared arithmetic and only those reach the user, sealed to KEYS/result.key; with --no-noise only owners that allow exact components take part)")
}

// randomnessFlag chooses where a components job's randomness comes from.
func randomnessFlag() cli.Flag {
	return strFlag("randomness", "", "a components job's correlated randomness: members (three members compute and make it themselves: nobody else can unmask their computation) or dealer (the proxy deals it: two members suffice, but the proxy with one member could learn the statistics, and owners decline it unless they allow it); default: members where the committee has three members or more")
}

// parseRandomness reads --randomness (for a components release only).
func parseRandomness(cmd *cli.Command, release string) (string, error) {
	r := cmd.String("randomness")
	switch {
	case r == "":
		return "", nil
	case release != job.ReleaseComponents:
		return "", errors.New("--randomness: for --release components only")
	case r == job.RandomnessMembers || r == job.RandomnessDealer:
		return r, nil
	}
	return "", fmt.Errorf("--randomness %q: want members or dealer", r)
}

// parseRelease reads --release for an analysis: the spec's Release.
func parseRelease(cmd *cli.Command, analysis string) (string, error) {
	switch r := cmd.String("release"); r {
	case "", "statistics":
		return job.ReleaseStatistics, nil
	case job.ReleaseComponents:
		if analysis != job.PCA && analysis != job.DCA && analysis != job.LDA {
			return "", fmt.Errorf("--release components: for --analysis pca, dca or lda, not %s", analysis)
		}
		if cmd.Bool("standardize") {
			return "", errors.New("--release components: not with --standardize (the committee computes the covariance's components)")
		}
		if cmd.String("plots") != "" {
			return "", errors.New("--plots: a components release has no figures (its scree plot needs every eigenvalue, of which only the top k are released)")
		}
		return job.ReleaseComponents, nil
	default:
		return "", fmt.Errorf("--release %q: want statistics or components", r)
	}
}

// userConnFlags connect a user command to the proxy; keys says whether the
// command needs the user's HE keys.
func userConnFlags(keys bool) []cli.Flag {
	fs := []cli.Flag{
		strFlag("certs", "", "the user's credentials directory (from fedpca certs)"),
		boolFlag("insecure", "plaintext (local tests only)"),
		strFlag("id", "", "user ID (only with --insecure)"),
		reqStr("proxy", "proxy address HOST:PORT"),
	}
	if keys {
		fs = append(fs, reqStr("keys", "the user's HE key directory (from fedpca user keygen)"))
	}
	return fs
}

// resultFlags are the flags of the commands that write a result.
func resultFlags() []cli.Flag {
	return []cli.Flag{
		strFlag("out", "out", "directory for the outputs"),
		plotsFlag(),
		boolFlag("publish", "publish the result document for the owners"),
		boolFlag("quiet", "print only the result and errors: no progress display (a bar on a terminal, one line per change otherwise), no notes on the job's parameters"),
		forceFlag(),
	}
}

// forceFlag lets a command replace output files; without it, a command
// that would overwrite one refuses before doing any work.
func forceFlag() cli.Flag {
	return boolFlag("force", "replace existing output files (without it the command refuses before doing anything)")
}

// checkOutputs refuses, before any work and unless --force, when the
// result files of --out exist.
func checkOutputs(cmd *cli.Command) error {
	return user.CheckNew(cmd.Bool("force"), user.OutputFiles(cmd.String("out"))...)
}

func userCommand() *cli.Command {
	return &cli.Command{
		Name:  "user",
		Usage: "data user: keys, jobs, results",
		Commands: []*cli.Command{profileCommand(), {
			Name:  "keygen",
			Usage: "make the user's HE key pair (the committee re-encrypts results to it) and result key",
			Description: `Writes KEYS/he-secret.key (0600), KEYS/he-public.key and KEYS/result.key (0600, the X25519
key that components jobs seal their output to; a directory made before it gets one on first
use); refuses to overwrite a key pair.

  fedpca user keygen --keys keys`,
			Flags: []cli.Flag{reqStr("keys", "directory for he-secret.key (0600), he-public.key and result.key (0600)")},
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
    --analysis pca -k 5 --epsilon 1 --out out/ --committee csp-1,csp-2,csp-3

The job is created only under a committee key that every member of the pinned
committee (--committee) attested, of at least --committee-min-members members
and a threshold of --committee-min-threshold.

Writes OUT/result.json (components, privacy accounting with the collusion table,
and the noisy release), OUT/components.csv, OUT/components.npy, OUT/mean.npy,
OUT/eigenvalues.npy and OUT/release.json; with --plots DIR also the scree plot.
With --release components (pca, dca or lda) the user learns only the top k components,
their eigenvalues and n: OUT/result.json, OUT/components.csv, OUT/components.npy
and OUT/eigenvalues.npy, no mean, no release, no figures.
On a terminal a progress bar follows the uploads and the key switch.

With --method power (pca, many features: docs/PROTOCOL.md section 13) the job is
the noisy power method: round 0 releases the rows' sum and count, then each of
--rounds rounds the product of the scatter with a public d x p matrix (p = k +
--oversample), which this command computes from the releases before it, signs
and opens on the proxy; the components come from the last round. Every owner's
ledger charges the composed cost of all the rounds once. Round 1's matrix comes
from --power-seed, or from a public start matrix (--start: a CSV of d rows of p
numbers, e.g. a reference panel's top components); each round accepts uploads
for --round-window after the one before it closed. It writes OUT/result.json,
OUT/components.csv, OUT/components.npy and OUT/eigenvalues.npy.

Ctrl-C stops waiting, not the job: it prints how to re-attach (fedpca user fetch)
or to cancel the job (fedpca user cancel), which returns the owners' budget.`,
			Flags: append(append(append(userConnFlags(true),
				reqStr("schema", "the dataset's schema file"),
				strsFlag("owners", "the owners asked to take part (comma-separated or repeated)"),
				intFlag("min-owners", 0, "uploads needed (0: all owners)"),
				strFlag("analysis", "pca", "pca, dca, lda or scatter"),
				intFlag("k", 5, "components wanted (0: all); at most the features for pca, classes - 1 for dca and lda"),
				floatFlag("epsilon", 1, "privacy: epsilon"),
				floatFlag("delta", job.DefaultDelta, "privacy: delta, in (0, 1)"),
				boolFlag("no-noise", "no DP noise (tests only: every party must allow it)"),
				noisePlanFlag(),
				intFlag("tolerate", 0, "noise parties the user may collude with and still get the guarantee"),
				budgetSplitFlag(),
				boolFlag("standardize", "pca: the components of the release's correlation matrix (the rows standardised by the release's own std; free post-processing, for a schema whose scales are rough, e.g. from user profile)"),
				releaseFlag(), randomnessFlag(),
				&cli.DurationFlag{Name: "deadline", Value: 10 * time.Minute, Usage: "how long the job accepts uploads", Sources: env("deadline")},
				&cli.IntFlag{Name: "max-owner-rows", Usage: "public per-owner row cap: each owner uses at most this many rows and drops the rest, counting them in its own log (0: the largest the plaintext range allows for the job, printed when it is below 10 million)", Sources: env("max-owner-rows")},
				strFlag("method", "release", "pca: release (the d x d statistics release) or power (the noisy power method for many features, in rounds: --oversample, --rounds, --power-seed or --start, --round-window)"),
				intFlag("oversample", 5, "with --method power: columns of the public matrices beyond k (p = k + oversample)"),
				intFlag("rounds", 3, "with --method power: power rounds T after round 0"),
				strFlag("power-seed", "", "with --method power: the public seed of round 1's matrix (empty: a random one, in the spec)"),
				strFlag("start", "", "with --method power: a CSV file of d rows of p numbers, a public matrix round 1 starts from (e.g. a reference panel's top p components) instead of the seed's; the components then come by Rayleigh-Ritz in the last matrix's span"),
				&cli.DurationFlag{Name: "round-window", Value: 10 * time.Minute, Usage: "with --method power: how long each round after round 0 accepts uploads (round t closes t windows after --deadline)", Sources: env("round-window")},
			), append(committeeFlags("creates jobs"), resultFlags()...)...), logFlags()...),
			Action: runUser,
		}, {
			Name:  "jobs",
			Usage: "list this user's jobs: ID prefix, analysis, state, uploads of expected, deadline",
			Description: `One line per job, oldest first; IDs are printed as their first 16 hex digits,
which every JOB argument accepts (any unique prefix of 4 digits or more is enough).

  fedpca user jobs --certs certs/user-alice --proxy localhost:7000`,
			Flags: append(userConnFlags(false), boolFlag("open", "only the open jobs")),
			Action: func(ctx context.Context, cmd *cli.Command) error {
				c, err := userClient(cmd)
				if err != nil {
					return err
				}
				defer c.Close()
				jobs, err := c.Jobs(ctx, !cmd.Bool("open"))
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "JOB\tANALYSIS\tDATASET\tSTATE\tUPLOADS\tDEADLINE")
				for _, j := range jobs {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d/%d\t%s\n", j.GetJobId()[:16], j.GetAnalysis(), j.GetDataset(), stateText(j.GetState()),
						j.GetOwnersUploaded(), j.GetOwnersExpected(), deadlineText(j))
				}
				return tw.Flush()
			},
		}, {
			Name:      "status",
			Usage:     "show one job: its state, the owners that uploaded, declined or are still awaited",
			ArgsUsage: "JOB",
			Description: `JOB is the job's ID or a unique prefix of it (fedpca user jobs lists them).

  fedpca user status --certs certs/user-alice --proxy localhost:7000 3f2a9c1e`,
			Flags: userConnFlags(false),
			Action: onJob(func(ctx context.Context, cmd *cli.Command, c *user.Client, id string) error {
				info, err := c.Job(ctx, id)
				if err != nil {
					return err
				}
				printStatus(info.GetStatus())
				return nil
			}),
		}, {
			Name:      "fetch",
			Usage:     "re-attach to a job: wait for it, decrypt and analyse the result, write the outputs as user run does",
			ArgsUsage: "JOB",
			Description: `For a job whose user run was interrupted, or to write a finished job's outputs
again. JOB is the job's ID or a unique prefix of it; --keys must be the HE keys the
job was created with.

  fedpca user fetch --certs certs/user-alice --keys keys --proxy localhost:7000 --out out/ 3f2a9c1e

A power-method job is followed from its parent: the rounds already released are
fetched and decoded again, the rest opened in turn, each before its deadline (a
job that starts from a public matrix needs it again, --start).`,
			Flags: append(append(append(userConnFlags(true), resultFlags()...), logFlags()...),
				strFlag("start", "", "for a power-method job that starts from a public matrix: the same CSV file user run was given")),
			Action: onJob(func(ctx context.Context, cmd *cli.Command, c *user.Client, id string) error {
				spec, sch, err := c.Ticket(ctx, id)
				if err != nil {
					return err
				}
				if err := checkPlots(cmd, spec.Analysis); err != nil {
					return err
				}
				if spec.Components() && cmd.String("plots") != "" {
					return errors.New("--plots: a components release has no figures (its scree plot needs every eigenvalue, of which only the top k are released)")
				}
				if err := checkPlotFiles(cmd, spec.Dataset, spec.Analysis); err != nil {
					return err
				}
				if err := checkOutputs(cmd); err != nil {
					return err
				}
				if spec.Power != nil {
					return fetchPower(ctx, cmd, c, spec, sch)
				}
				fmt.Fprintf(os.Stderr, "job %s: %s on %s, %d owner%s, deadline %s\n", id[:16], spec.Analysis, spec.Dataset, spec.NumOwners, plural(spec.NumOwners), spec.Deadline.Format(time.RFC3339))
				return waitAndWrite(ctx, cmd, c, spec, sch, time.Now())
			}),
		}, {
			Name:      "cancel",
			Usage:     "cancel an open job: it ends without a release and every owner returns its reserved budget",
			ArgsUsage: "JOB",
			Description: `Only an open job can be cancelled: once sealed, its key switch may have begun
and the budget is spent. JOB is the job's ID or a unique prefix of it.

  fedpca user cancel --certs certs/user-alice --proxy localhost:7000 3f2a9c1e`,
			Flags: userConnFlags(false),
			Action: onJob(func(ctx context.Context, cmd *cli.Command, c *user.Client, id string) error {
				st, err := c.Cancel(ctx, id)
				if err != nil {
					return err
				}
				fmt.Printf("job %s cancelled (%s, %d of %d owners had uploaded): nothing is released, and every owner returns its reservation or refunds its upload when it learns of the end\n",
					id[:16], stateText(st.GetState()), st.GetOwnersUploaded(), st.GetOwnersExpected())
				return nil
			}),
		}, analyzeCommand()},
	}
}

// userClient connects to the proxy as the user of the flags (with the HE
// keys if the command has --keys).
func userClient(cmd *cli.Command) (*user.Client, error) {
	log := hclog.New(&hclog.LoggerOptions{Name: "user", Level: hclog.Warn, Output: os.Stderr})
	if cmd.String("log-level") != "" {
		log = logger(cmd, "user")
	}
	d, err := dialer(cmd, transport.RoleUser, log)
	if err != nil {
		return nil, err
	}
	p, err := he.NewDefaultParams()
	if err != nil {
		return nil, err
	}
	committee, err := resolveCommittee(cmd, d.Creds)
	if err != nil {
		return nil, err
	}
	cfg := user.Config{Dialer: d, ProxyAddr: cmd.String("proxy"), Committee: committee, Logger: log, Params: &p}
	if cmd.String("keys") != "" {
		if cfg.Keys, err = user.LoadKeys(cmd.String("keys"), p); err != nil {
			return nil, err
		}
		if cfg.ResultKey, err = user.LoadResultKey(cmd.String("keys")); err != nil {
			return nil, err
		}
	}
	return user.NewClient(cfg)
}

// userJob connects and resolves the command's one JOB argument (a unique
// prefix of one of this user's jobs).
// onJob is the action of a command on one job (user status, fetch, cancel):
// it connects, resolves the job argument and runs fn.
func onJob(fn func(ctx context.Context, cmd *cli.Command, c *user.Client, id string) error) cli.ActionFunc {
	return func(ctx context.Context, cmd *cli.Command) error {
		c, id, err := userJob(ctx, cmd)
		if err != nil {
			return err
		}
		defer c.Close()
		return fn(ctx, cmd, c, id)
	}
}

func userJob(ctx context.Context, cmd *cli.Command) (*user.Client, string, error) {
	switch cmd.Args().Len() {
	case 0:
		return nil, "", fmt.Errorf("name the job: fedpca user %s [options] JOB (an ID or a unique prefix, as fedpca user jobs lists them)", cmd.Name)
	case 1:
	default:
		return nil, "", fmt.Errorf("fedpca user %s takes one job, got %q too", cmd.Name, cmd.Args().Get(1))
	}
	c, err := userClient(cmd)
	if err != nil {
		return nil, "", err
	}
	id, err := c.Resolve(ctx, cmd.Args().First())
	if err != nil {
		c.Close()
		return nil, "", err
	}
	return c, id, nil
}

func stateText(s fedpcav1.JobState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "JOB_STATE_"))
}

// deadlineText is a job's deadline for a listing: the time left while it
// is open, the date otherwise.
func deadlineText(s *fedpcav1.JobStatus) string {
	d := time.Unix(s.GetDeadlineUnix(), 0)
	if s.GetState() == fedpcav1.JobState_JOB_STATE_OPEN {
		if left := time.Until(d); left > 0 {
			return fmt.Sprintf("in %s", left.Round(time.Second))
		}
		return "passed"
	}
	return d.UTC().Format(time.RFC3339)
}

// printStatus prints a job's full status for people.
func printStatus(st *fedpcav1.JobStatus) {
	fmt.Printf("job       %s\n", st.GetJobId())
	fmt.Printf("state     %s\n", stateText(st.GetState()))
	if r := st.GetReason(); r != "" {
		fmt.Printf("reason    %s\n", r)
	}
	fmt.Printf("analysis  %s on %s\n", st.GetAnalysis(), st.GetDataset())
	fmt.Printf("user      %s\n", st.GetUser())
	fmt.Printf("created   %s\n", time.Unix(st.GetCreatedUnix(), 0).UTC().Format(time.RFC3339))
	if st.GetState() == fedpcav1.JobState_JOB_STATE_OPEN {
		fmt.Printf("deadline  %s (%s)\n", time.Unix(st.GetDeadlineUnix(), 0).UTC().Format(time.RFC3339), deadlineText(st))
	} else {
		fmt.Printf("deadline  %s\n", time.Unix(st.GetDeadlineUnix(), 0).UTC().Format(time.RFC3339))
	}
	if st.GetState() == fedpcav1.JobState_JOB_STATE_OPEN {
		// Who uploaded, and when, is the proxy's alone while the job runs.
		fmt.Printf("uploads   %d of %d expected (%d needed), %d declined, as of %s (the proxy tells progress at fixed instants; who took part is listed once the job is sealed)\n",
			st.GetOwnersUploaded(), st.GetOwnersExpected(), st.GetMinOwners(), st.GetOwnersDeclined(), time.Unix(st.GetUpdatedUnix(), 0).UTC().Format(time.TimeOnly))
	} else {
		fmt.Printf("uploads   %d of %d expected (%d needed)\n", len(st.GetUploadedOwners()), len(st.GetExpectedOwnerRefs()), st.GetMinOwners())
	}
	if u := st.GetUploadedOwners(); len(u) > 0 {
		fmt.Printf("uploaded  %s\n", strings.Join(u, ", "))
	}
	for _, d := range st.GetDeclinedOwners() {
		fmt.Printf("declined  %s %s\n", d.GetOwner(), transport.ExplainDecline(d, nil))
	}
	if a := user.Awaited(st); len(a) > 0 {
		fmt.Printf("missing   %s\n", strings.Join(a, ", "))
	}
	if m := st.GetCspMembers(); len(m) > 0 {
		fmt.Printf("committee %s\n", strings.Join(m, ", "))
	}
}

// parseOwners reads --owners: comma-separated or repeated.
func parseOwners(cmd *cli.Command) ([]string, error) {
	owners := splitList(cmd.StringSlice("owners"))
	if len(owners) == 0 {
		return nil, errors.New("name the owners with --owners a,b,c")
	}
	return owners, nil
}

// maxDelta is the largest delta a user may ask for: above it (epsilon,
// delta)-DP says little (delta is the chance that the guarantee fails).
const maxDelta = 1e-3

// checkPrivacy refuses what would otherwise be replaced silently, and what
// no owner would accept.
func checkPrivacy(cmd *cli.Command) error {
	if cmd.Bool("no-noise") {
		return nil
	}
	if d := cmd.Float64("delta"); !(d > 0 && d < 1) {
		return fmt.Errorf("--delta %g: want a delta in (0, 1), e.g. %g", d, job.DefaultDelta)
	} else if d > maxDelta {
		return fmt.Errorf("--delta %g: a delta above %g gives no meaningful guarantee (it is the chance the guarantee fails, and should be far below 1 over the rows); owners accept at most %g per job unless their --max-delta allows more",
			d, maxDelta, owner.DefaultMaxDelta)
	} else if d > owner.DefaultMaxDelta && !cmd.Bool("quiet") {
		fmt.Fprintf(os.Stderr, "note: --delta %g is above %g, the most an owner accepts per job unless its --max-delta allows more: owners with the default policy decline this job\n", d, owner.DefaultMaxDelta)
	}
	if e := cmd.Float64("epsilon"); !(e > 0) {
		return fmt.Errorf("--epsilon %g: want a positive epsilon (or --no-noise for a test job)", e)
	}
	return nil
}

// checkK refuses a number of components the analysis cannot give, before
// any budget is spent: PCA gives at most d (the features), DCA and LDA at
// most K - 1 (K classes), and scatter none.
func checkK(analysis string, k, d, classes int) error {
	if k < 0 {
		return fmt.Errorf("-k %d: must not be negative (0: all)", k)
	}
	switch analysis {
	case job.PCA:
		if k > d {
			return fmt.Errorf("-k %d: pca of %d features gives at most %d components (0: all)", k, d, d)
		}
	case job.DCA, job.LDA:
		if classes < 2 {
			return fmt.Errorf("--analysis %s needs a dataset with classes (a label column); this one has none: use pca", analysis)
		}
		if most := min(classes-1, d); k > most {
			return fmt.Errorf("-k %d: %s on %d classes gives at most %d component%s (0: all)", k, analysis, classes, most, plural(most))
		}
	case job.Scatter:
	default:
		return fmt.Errorf("--analysis %q: want pca, dca, lda or scatter", analysis)
	}
	return nil
}

// resolveK checks -k against what the analysis can give: an explicit -k
// too large is an error; the default is lowered to the most there are, and
// stderr says so.
func resolveK(cmd *cli.Command, analysis string, d, classes int) (int, error) {
	if err := checkK(analysis, 0, d, classes); err != nil {
		return 0, err // an unknown analysis, or one the dataset cannot have
	}
	k := cmd.Int("k")
	err := checkK(analysis, k, d, classes)
	if err == nil || cmd.IsSet("k") || k < 0 {
		return k, err
	}
	most := d
	if analysis == job.DCA || analysis == job.LDA {
		if classes < 2 {
			return k, err
		}
		most = min(classes-1, d)
	}
	fmt.Fprintf(os.Stderr, "k: %d (the default %d is more than %s on %d features and %d classes gives)\n", most, k, analysis, d, max(classes, 1))
	return most, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// jobTargets reads what a job is asked of: --owners and --schema.
func jobTargets(cmd *cli.Command) ([]string, *schema.Schema, error) {
	owners, err := parseOwners(cmd)
	if err != nil {
		return nil, nil, err
	}
	sch, err := loadSchema(cmd.String("schema"))
	if err != nil {
		return nil, nil, err
	}
	return owners, sch, nil
}

func runUser(ctx context.Context, cmd *cli.Command) error {
	if err := checkPlots(cmd, cmd.String("analysis")); err != nil {
		return err
	}
	if err := checkPrivacy(cmd); err != nil {
		return err
	}
	release, err := parseRelease(cmd, cmd.String("analysis"))
	if err != nil {
		return err
	}
	randomness, err := parseRandomness(cmd, release)
	if err != nil {
		return err
	}
	if err := checkOutputs(cmd); err != nil {
		return err
	}
	if d := cmd.Duration("deadline"); d <= 0 {
		return fmt.Errorf("--deadline %s: want how long the job accepts uploads, a positive duration such as 10m", d)
	}
	split, err := dp.ParseSplit(cmd.String("budget-split"))
	if err != nil {
		return fmt.Errorf("--budget-split: %w", err)
	}
	owners, sch, err := jobTargets(cmd)
	if err != nil {
		return err
	}
	k, err := resolveK(cmd, cmd.String("analysis"), len(sch.Features), len(sch.Classes))
	if err != nil {
		return err
	}
	if _, err := committeePolicy(cmd, nil); err != nil {
		return err
	}
	c, err := userClient(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	req := user.Request{Schema: sch, Analysis: cmd.String("analysis"), K: k, Epsilon: cmd.Float64("epsilon"), Delta: cmd.Float64("delta"),
		NoNoise: cmd.Bool("no-noise"), Plan: cmd.String("noise-plan"), Tolerate: cmd.Int("tolerate"), Split: split, Owners: owners,
		MinOwners: cmd.Int("min-owners"), Deadline: time.Now().Add(cmd.Duration("deadline")), MaxOwnerRows: int64(cmd.Int("max-owner-rows")),
		Standardize: cmd.Bool("standardize"), Release: release, Randomness: randomness}
	if req.Power, req.PowerStart, err = powerRequest(cmd, sch, k); err != nil {
		return err
	}
	spec, err := c.Spec(ctx, req)
	if err != nil {
		return err
	}
	if err := checkPlotFiles(cmd, spec.Dataset, spec.Analysis); err != nil {
		return err
	}
	quiet := cmd.Bool("quiet")
	if !quiet && (req.MaxOwnerRows != 0 || spec.MaxOwnerRows < ownerRowsWorthSaying) {
		what := "as given"
		if req.MaxOwnerRows == 0 {
			what = "the largest the plaintext range allows for this job"
		}
		fmt.Fprintf(os.Stderr, "max-owner-rows: %d (%s; owners drop rows beyond it)\n", spec.MaxOwnerRows, what)
	}
	if split == (dp.Split{}) && !req.NoNoise && !quiet {
		fmt.Fprintf(os.Stderr, "budget split: %s (the default for %s)\n", splitText(spec.Split), spec.Analysis)
	}
	start := time.Now()
	if spec.Power != nil {
		return runPower(ctx, cmd, c, spec, sch, req.PowerStart, start, c.RunPower)
	}
	if _, err := c.Submit(ctx, spec, sch); err != nil {
		return err
	}
	if !quiet {
		fmt.Fprintf(os.Stderr, "job %s created: %s on %s, %d owner%s, deadline %s\n", spec.ID()[:16], spec.Analysis, spec.Dataset, spec.NumOwners, plural(spec.NumOwners), spec.Deadline.Format(time.RFC3339))
	}
	return waitAndWrite(ctx, cmd, c, spec, sch, start)
}

// powerRequest reads user run's power-method flags: nil for --method
// release; the parent's power part and the public start matrix (nil: the
// seed's) for --method power.
func powerRequest(cmd *cli.Command, sch *schema.Schema, k int) (*job.PowerSpec, *mat.Dense, error) {
	switch m := cmd.String("method"); {
	case m == "release":
		for _, f := range []string{"start", "power-seed"} {
			if cmd.IsSet(f) {
				return nil, nil, fmt.Errorf("--%s: only with --method power", f)
			}
		}
		return nil, nil, nil
	case m != "power":
		return nil, nil, fmt.Errorf("--method %q: want release or power", m)
	case cmd.String("analysis") != job.PCA:
		return nil, nil, fmt.Errorf("--method power: the power method computes pca only, not %s", cmd.String("analysis"))
	case cmd.IsSet("release") || cmd.Bool("standardize") || cmd.String("plots") != "":
		return nil, nil, errors.New("--method power: its result is the components it computes from the rounds: no --release, --standardize or --plots")
	case cmd.Int("rounds") < 1 || cmd.Int("rounds") > power.MaxRounds:
		return nil, nil, fmt.Errorf("--rounds %d: want 1 to %d", cmd.Int("rounds"), power.MaxRounds)
	case cmd.Int("oversample") < 0 || k+cmd.Int("oversample") > sch.D():
		return nil, nil, fmt.Errorf("--oversample %d: p = k + oversample = %d must be between k and the %d features", cmd.Int("oversample"), k+cmd.Int("oversample"), sch.D())
	}
	w := cmd.Duration("round-window")
	if w < time.Second || w > job.MaxRoundSeconds*time.Second {
		return nil, nil, fmt.Errorf("--round-window %s: want 1s to %s", w, time.Duration(job.MaxRoundSeconds)*time.Second)
	}
	seed := cmd.String("power-seed")
	if seed == "" {
		seed = rand.Text()
	}
	ps := &job.PowerSpec{Oversample: cmd.Int("oversample"), Rounds: cmd.Int("rounds"), Seed: seed, RoundSeconds: int(w / time.Second)}
	path := cmd.String("start")
	if path == "" {
		return ps, nil, nil
	}
	start, err := readMatrixCSV(path, sch.D(), k+ps.Oversample)
	return ps, start, err
}

// readMatrixCSV reads a d x p matrix of numbers, one row a line.
func readMatrixCSV(path string, d, p int) (*mat.Dense, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--start: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = p
	out := mat.NewDense(d, p, nil)
	for i := 0; ; i++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			if i != d {
				return nil, fmt.Errorf("--start %s: %d rows, want one per feature, %d", path, i, d)
			}
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("--start %s: want %d rows of p = %d numbers: %w", path, d, p, err)
		}
		if i >= d {
			return nil, fmt.Errorf("--start %s: more than the %d rows, one per feature", path, d)
		}
		for j, cell := range rec {
			x, err := strconv.ParseFloat(strings.TrimSpace(cell), 64)
			if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
				return nil, fmt.Errorf("--start %s: row %d, column %d: %q is not a finite number", path, i+1, j+1, cell)
			}
			out.Set(i, j, x)
		}
	}
}

// fetchPower re-attaches to a power-method job (user fetch): its rounds
// already released are fetched again and the rest opened, each before its
// deadline; a job that starts from a public matrix needs it again (--start).
func fetchPower(ctx context.Context, cmd *cli.Command, c *user.Client, spec *job.Spec, sch *schema.Schema) error {
	var start *mat.Dense
	switch path := cmd.String("start"); {
	case spec.Power.Start != "" && path == "":
		return fmt.Errorf("job %s starts from a public matrix (%s…): give it again with --start", spec.ID()[:16], spec.Power.Start[:12])
	case spec.Power.Start == "" && path != "":
		return fmt.Errorf("--start: job %s starts from its seed, not from a matrix", spec.ID()[:16])
	case path != "":
		var err error
		if start, err = readMatrixCSV(path, sch.D(), spec.K+spec.Power.Oversample); err != nil {
			return err
		}
	}
	return runPower(ctx, cmd, c, spec, sch, start, time.Now(), c.ResumePower)
}

// runPower runs a power-method job (user run --method power: c.RunPower;
// user fetch: c.ResumePower) and writes its result.
func runPower(ctx context.Context, cmd *cli.Command, c *user.Client, spec *job.Spec, sch *schema.Schema, start *mat.Dense, t0 time.Time,
	run func(context.Context, *job.Spec, *schema.Schema, *mat.Dense, user.PowerProgress) (*job.Result, error)) error {
	quiet := cmd.Bool("quiet")
	if !quiet {
		fmt.Fprintf(os.Stderr, "power-method job %s: pca on %s, k = %d, p = %d, %d rounds after round 0, %d owner%s; round 0 closes %s, each round %d s after the one before\n",
			spec.ID()[:16], spec.Dataset, spec.K, spec.K+spec.Power.Oversample, spec.Power.Rounds, spec.NumOwners, plural(spec.NumOwners),
			spec.Deadline.Format(time.RFC3339), spec.Power.RoundSeconds)
	}
	lines := !quiet
	var last string
	res, err := run(ctx, spec, sch, start, func(round int, s *fedpcav1.JobStatus) {
		line := fmt.Sprintf("round %d: %s", round, progressLine(s))
		if line != last && lines {
			fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(t0).Seconds(), line)
		}
		last = line
	})
	return finishRun(ctx, cmd, c, spec, res, err)
}

// ownerRowsWorthSaying is the per-owner row cap below which user run says
// what cap the plaintext range left the job: a source of that many rows
// (a large registry's) may reach it. Above it (2.3 billion rows at 16 bits
// and three owners, 67 million at epsilon 0.5 and two) the cap binds no
// source this user is likely to meet, and the line was noise.
const ownerRowsWorthSaying = 10_000_000

// waitAndWrite follows a job to its end, then fetches, decrypts and
// analyses its result and writes the outputs (user run, user fetch). An
// interrupt (ctx cancelled) stops the waiting, not the job: it says how to
// re-attach or cancel, and the command exits non-zero.
func waitAndWrite(ctx context.Context, cmd *cli.Command, c *user.Client, spec *job.Spec, sch *schema.Schema, start time.Time) error {
	// On a terminal a bar; otherwise (logs) one line per change.
	var bar *progress
	if !cmd.Bool("quiet") {
		bar = newProgress(spec.NumOwners, "uploads")
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
	if ctx.Err() != nil {
		return interrupted(cmd, spec.ID())
	}
	if err != nil {
		return err
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		return fmt.Errorf("job %s failed: %s%s", spec.ID()[:16], st.GetReason(), declinedText(st, sch.FeatureNames()))
	}
	if len(st.GetDeclinedOwners()) > 0 && !cmd.Bool("quiet") {
		fmt.Fprintf(os.Stderr, "the job went on without the owners that declined:%s\n", declinedText(st, sch.FeatureNames()))
	}
	res, err := c.Fetch(ctx, spec, sch)
	return finishRun(ctx, cmd, c, spec, res, err)
}

// interrupted says, after Ctrl-C, that the job goes on and how to come back
// to it or end it.
func interrupted(cmd *cli.Command, id string) error {
	conn := ""
	if cmd.Bool("insecure") {
		conn = " --insecure --id " + cmd.String("id")
	} else {
		conn = " --certs " + cmd.String("certs")
	}
	conn += " --proxy " + cmd.String("proxy")
	prefix := id[:16]
	fmt.Fprintf(os.Stderr, `
interrupted: job %s goes on without this command (the owners' budget stays reserved for it).
  re-attach and get the result:  fedpca user fetch%s --keys %s --out %s %s
  see its progress:              fedpca user status%s %s
  cancel it (budget returned):   fedpca user cancel%s %s
`, prefix, conn, cmd.String("keys"), cmd.String("out"), prefix, conn, prefix, conn, prefix)
	return errInterrupted
}

// writeResult writes a user's result files (and figures, with --plots) and
// prints its summary.
func writeResult(cmd *cli.Command, res *job.Result) error {
	if err := checkOutputs(cmd); err != nil {
		return err
	}
	if err := checkPlotFiles(cmd, res.Dataset, res.Analysis); err != nil {
		return err
	}
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

func analyzeCommand() *cli.Command {
	return &cli.Command{
		Name:  "analyze",
		Usage: "re-run an analysis, or derive statistics, from a saved result's noisy release (no privacy cost)",
		Description: `Reads --result and writes into --out, which must be another directory than the
result's (it is never overwritten). --analysis pca, dca, lda or scatter writes the
files user run writes; covariance, correlation, means or regression writes
KIND.json and KIND.csv, each with its noise scale. Every number is in the schema's
units (each feature as z = (x - center) / scale, clamped to its min/max, each row
clipped), not the data's: KIND.json's "units" says so for each. DCA and LDA need a release with
classes: that of a dca or lda job (a pca job releases no class statistics).

  fedpca user analyze --result out/result.json --analysis pca -k 2 --out out/pca-k2
  fedpca user analyze --result out/result.json --analysis regression --target radius_mean --out out/regression`,
		Flags: []cli.Flag{
			reqStr("result", "a result document (result.json)"),
			strFlag("analysis", "pca", "pca, dca, lda or scatter; or covariance, correlation, means or regression"),
			intFlag("k", 5, "components wanted (0: all)"),
			reqStr("out", "directory for the outputs (not the result's own)"),
			strFlag("target", "", "the feature regressed on the others (regression)"),
			floatFlag("ridge", -1, "the regression's ridge lambda (default: the noise's spectral norm 2 sqrt(d) sigma_R, 0 without noise)"),
			plotsFlag(),
			forceFlag(),
		},
		Action: runAnalyze,
	}
}

func runAnalyze(_ context.Context, cmd *cli.Command) error {
	name := cmd.String("analysis")
	derived := false
	for _, d := range user.Derivations {
		derived = derived || d == name
	}
	if !derived {
		if err := checkPlots(cmd, name); err != nil {
			return err
		}
	}
	if (cmd.IsSet("target") || cmd.IsSet("ridge")) && name != user.DeriveRegression {
		return fmt.Errorf("--target and --ridge are for --analysis regression, not %s", name)
	}
	in, out := cmd.String("result"), cmd.String("out")
	if same, err := sameDir(filepath.Dir(in), out); err != nil {
		return err
	} else if same {
		return fmt.Errorf("--out %s is the directory of --result %s: give another directory, so that the result is not overwritten", out, in)
	}
	res, err := user.LoadResult(in)
	if err != nil {
		return err
	}
	classes := 0
	if res.Release != nil {
		classes = res.Release.K
	}
	if derived {
		if name == user.DeriveRegression && cmd.String("target") == "" {
			return fmt.Errorf("--analysis regression needs --target FEATURE (one of %s)", strings.Join(res.Features, ", "))
		}
		if err := user.CheckNew(cmd.Bool("force"), filepath.Join(out, name+".json"), filepath.Join(out, name+".csv")); err != nil {
			return err
		}
		paths, err := user.Derive(out, res, name, user.DeriveOptions{Target: cmd.String("target"), Ridge: cmd.Float64("ridge")})
		if err != nil {
			return err
		}
		fmt.Printf("%s of the release of job %s (no privacy cost)\nunits: %s\nwrote %s\n", name, res.JobID[:min(16, len(res.JobID))], user.Units[name], strings.Join(paths, ", "))
		return nil
	}
	if (name == job.DCA || name == job.LDA) && classes < 2 {
		return fmt.Errorf("--analysis %s: this release has one class (it is from a %s job, which releases no per-class statistics); run a %s job for it (fedpca user run --analysis %s)", name, res.Analysis, name, name)
	}
	k, err := resolveK(cmd, name, len(res.Features), classes)
	if err != nil {
		return err
	}
	again, err := job.Reanalyze(res, name, k)
	if err != nil {
		return err
	}
	return writeResult(cmd, again)
}

// sameDir says whether two paths name the same directory (either may not
// exist yet).
func sameDir(a, b string) (bool, error) {
	ia, erra := os.Stat(a)
	ib, errb := os.Stat(b)
	if erra == nil && errb == nil {
		return os.SameFile(ia, ib), nil
	}
	aa, err := filepath.Abs(a)
	if err != nil {
		return false, err
	}
	bb, err := filepath.Abs(b)
	if err != nil {
		return false, err
	}
	return aa == bb, nil
}

func progressLine(s *fedpcav1.JobStatus) string {
	line := fmt.Sprintf("%s: %d/%d owners uploaded, %d declined", stateText(s.GetState()), s.GetOwnersUploaded(), s.GetOwnersExpected(), s.GetOwnersDeclined())
	if r := s.GetReason(); r != "" {
		line += " — " + r
	}
	return line
}

// declinedText lists the declines of a failed job, each with what its owner
// said (features: the job's, to name the one a schema field belongs to).
func declinedText(s *fedpcav1.JobStatus, features []string) string {
	var b strings.Builder
	for _, d := range s.GetDeclinedOwners() {
		fmt.Fprintf(&b, "\n  owner %s declined %s", d.GetOwner(), transport.ExplainDecline(d, features))
	}
	return b.String()
}

// printSummary prints the result for a human.
func printSummary(res *job.Result) {
	if res.Output != nil {
		printComponentsSummary(res)
		return
	}
	fmt.Printf("job %s: %s on %s, %d owner%s, noisy n = %.1f\n", res.JobID, res.Analysis, res.Dataset, res.NumOwners, plural(res.NumOwners), res.NoisyN)
	if c := res.Components; c != nil {
		fmt.Printf("eigenvalues:")
		for _, v := range c.Eigenvalues {
			fmt.Printf(" %.4g", v)
		}
		fmt.Println()
		if c.ExplainedVarianceRatio != nil {
			fmt.Printf("explained variance ratio (%s):", job.VarianceOf(res))
			for _, v := range c.ExplainedVarianceRatio {
				fmt.Printf(" %.4f", v)
			}
			if q := res.Quality; q != nil && c.TotalVariance > 0 {
				fmt.Printf(" (each ± %.2g from the noise)", q.EigenvalueStd/c.TotalVariance)
			}
			fmt.Println()
		}
	}
	pr := res.Privacy
	if pr.NoNoise {
		fmt.Println("privacy: NO NOISE (test job)")
		return
	}
	printDP(pr, "")
	printQuality(res)
}

// printDP prints a DP result's accounting (note follows its first line):
// the guarantee, the neighbour relation, and what each collusion with the
// user leaves.
func printDP(pr job.Privacy, note string) {
	fmt.Printf("privacy: (epsilon %.4g, delta %.3g)-DP, rho %.4g zCDP, plan %s tolerating %d%s\n", float64(pr.Epsilon), pr.Delta, float64(pr.Rho), pr.Plan, pr.Tolerate, note)
	if pr.Neighbours != "" {
		fmt.Printf("  neighbours: %s\n", pr.Neighbours)
	}
	for _, row := range pr.Collusion {
		fmt.Printf("  user colluding with %-16s epsilon %.4g\n", row.With+":", float64(row.Epsilon))
	}
}

// printComponentsSummary prints a components job's result: the top
// components' eigenvalues, n and the privacy accounting, and what the
// release does not hold.
func printComponentsSummary(res *job.Result) {
	t := res.Output
	_, k := t.Dims()
	n := "n"
	if !res.Privacy.NoNoise {
		n = "noisy n"
	}
	if pw := res.Power; pw != nil {
		fmt.Printf("job %s: %s on %s by the power method (p = %d, %d rounds after round 0, %s), top %d, %d owner%s, %s = %.1f\n", res.JobID, res.Analysis, res.Dataset,
			pw.P, pw.Rounds, pw.Finish, k, res.NumOwners, plural(res.NumOwners), n, res.NoisyN)
	} else {
		fmt.Printf("job %s: %s on %s, components only (top %d), %d owner%s, %s = %.1f\n", res.JobID, res.Analysis, res.Dataset, k, res.NumOwners, plural(res.NumOwners), n, res.NoisyN)
	}
	fmt.Printf("%s:", job.EigenvaluesName(res.Analysis))
	for _, v := range t.Eigenvalues {
		fmt.Printf(" %.4g", v)
	}
	fmt.Println()
	if res.Power != nil {
		fmt.Println("released: round 0's noisy sum and count, then each round's noisy product with its public matrix; the user kept the components computed from them")
	} else {
		fmt.Println("released: these components, their eigenvalues and n only; no statistic, mean or total variance (so no explained-variance ratio)")
	}
	pr := res.Privacy
	if pr.Computed != "" {
		fmt.Println("computed " + pr.Computed)
	}
	switch {
	case pr.NoNoise && res.Power != nil:
		fmt.Println("privacy: NO NOISE (test job)")
		return
	case pr.NoNoise:
		fmt.Println("privacy: EXACT components (no DP noise): nothing but them left the committee, but they are not differentially private")
		return
	}
	if res.Power != nil {
		printDP(pr, fmt.Sprintf(" (all %d rounds composed, charged once by every owner's ledger)", res.Power.Rounds+1))
		return
	}
	printDP(pr, " (the noise is added before the eigensolver; the components are its post-processing)")
	printQuality(res)
}

// printQuality says what a result is worth: the noise in it, and a warning
// wherever the noise dominates (result.json's quality).
func printQuality(res *job.Result) {
	q := res.Quality
	if q == nil {
		return
	}
	fmt.Printf("noise in the result: noisy n %.1f ± %.3g; scatter entries ± %.3g (spectral norm ~%.3g)", res.NoisyN, q.NoisyNStd, q.EntryStd, q.NoiseSpectralNorm)
	if q.CovarianceNoiseNorm > 0 {
		fmt.Printf("; on the covariance spectral norm ~%.3g", q.CovarianceNoiseNorm)
	}
	if q.CorrelationNoiseNorm > 0 {
		fmt.Printf("; on the correlation matrix, spectral norm ~%.3g", q.CorrelationNoiseNorm)
	}
	if q.EigenvalueStd > 0 {
		fmt.Printf("; eigenvalues ± %.3g", q.EigenvalueStd)
	}
	if len(q.DirectionNoise) > 0 {
		fmt.Printf("; eigenvalues ±")
		for _, v := range q.ComponentEigenvalueStd {
			fmt.Printf(" %.3g", v)
		}
		fmt.Printf("; directions turned by about")
		for _, v := range q.DirectionNoise {
			fmt.Printf(" %.0f", v)
		}
		fmt.Printf(" degrees")
	}
	fmt.Println()
	for _, w := range q.Warnings {
		fmt.Printf("warning: %s\n", w)
	}
	if len(q.Warnings) > 0 {
		fmt.Println("  (the noise dominates there: a larger epsilon, more rows, or fewer features would help; result.json's quality has the figures)")
	}
	for _, n := range q.Notes {
		fmt.Printf("note: %s\n", n)
	}
}

// finishRun ends user run and user fetch: an interrupted wait says how to
// resume, a result is published when asked and written.
func finishRun(ctx context.Context, cmd *cli.Command, c *user.Client, spec *job.Spec, res *job.Result, err error) error {
	if ctx.Err() != nil {
		return interrupted(cmd, spec.ID())
	}
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
