package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/urfave/cli/v3"
	"gonum.org/v1/gonum/mat"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/fedpca/fedpca/csp"
	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/proxy"
	"github.com/fedpca/fedpca/source"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// nodeFlags are common to the daemons.
func nodeFlags(defaultListen string) []cli.Flag {
	return append([]cli.Flag{
		strFlag("certs", "", "directory with this node's ca.pem, cert.pem and key.pem (from fedpca certs)"),
		reqStr("state", "state directory (created if missing; keep it on persistent storage)"),
		strFlag("listen", defaultListen, "address to serve gRPC on"),
		boolFlag("insecure", "run WITHOUT TLS and trust claimed identities: local tests only, never in production"),
		strFlag("id", "", "this node's ID (only with --insecure; otherwise the certificate's)"),
		strFlag("metrics-listen", "", "address to serve Prometheus /metrics and /debug/pprof on (empty: off): plain HTTP on a loopback address, otherwise HTTPS for operator certificates of a trust domain this node accepts role operator from (fedpca certs issue operator/NAME)"),
	}, logFlags()...)
}

// metricsListener opens the --metrics-listen address, if any.
func metricsListener(cmd *cli.Command) (net.Listener, error) {
	return optionalListener(cmd, "metrics-listen")
}

// optionalListener opens the address of a listen flag, if it is set.
func optionalListener(cmd *cli.Command, flag string) (net.Listener, error) {
	addr := cmd.String(flag)
	if addr == "" {
		return nil, nil
	}
	return net.Listen("tcp", addr)
}

// allowedUsers resolves an owner's --users to keys (by name only in
// insecure mode).
func allowedUsers(names []string, creds *transport.Credentials) ([]transport.Peer, error) {
	var out []transport.Peer
	for _, n := range names {
		n = strings.TrimPrefix(n, "user/")
		if creds == nil {
			id, err := transport.ParseIdentity("user/" + n)
			if strings.HasPrefix(n, "spiffe://") {
				id, err = transport.ParseIdentity(n)
			}
			if err != nil {
				return nil, fmt.Errorf("--users %s: %w", n, err)
			}
			out = append(out, transport.Peer{Identity: id})
			continue
		}
		p, err := creds.Trust.Resolve(transport.RoleUser, n)
		if err != nil {
			return nil, fmt.Errorf("--users %s: %w", n, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// identity loads the node's credentials or, with --insecure, its claimed
// identity, and says loudly when TLS is off.
func identity(cmd *cli.Command, role string, log hclog.Logger) (*transport.Credentials, transport.Identity, error) {
	if cmd.Bool("insecure") {
		id := transport.Identity{Role: role, ID: cmd.String("id")}
		if err := id.Validate(); err != nil {
			return nil, id, fmt.Errorf("--insecure needs --id: %w", err)
		}
		log.Warn("RUNNING WITHOUT TLS (--insecure): identities are not authenticated and traffic is plaintext; use only for local tests")
		fmt.Fprintln(os.Stderr, "*** WARNING: fedpca is running with --insecure: no TLS, no authentication. Never use this in production. ***")
		return nil, id, nil
	}
	if cmd.String("certs") == "" {
		return nil, transport.Identity{}, errors.New("--certs is required (or --insecure for local tests)")
	}
	creds, err := transport.LoadCredentials(cmd.String("certs"))
	if err != nil {
		return nil, transport.Identity{}, err
	}
	if creds.Identity.Role != role {
		return nil, transport.Identity{}, fmt.Errorf("the certificate in %s is for %s, not a %s", cmd.String("certs"), creds.Identity.Short(), role)
	}
	if role != transport.RoleUser { // a daemon's, for its operator; a user's commands print their result alone
		log.Info("identity", "id", creds.Identity.String(), "key", creds.Key, "trust_domains", strings.Join(creds.Trust.Names(), ","))
	}
	return creds, creds.Identity, nil
}

func dialer(cmd *cli.Command, role string, log hclog.Logger) (transport.Dialer, error) {
	creds, id, err := identity(cmd, role, log)
	if err != nil {
		return transport.Dialer{}, err
	}
	return transport.Dialer{Creds: creds, Insecure: creds == nil, Self: id}, nil
}

func cspCommand() *cli.Command {
	return &cli.Command{
		Name:  "csp",
		Usage: "crypto service provider committee member",
		Commands: []*cli.Command{{
			Name:  "serve",
			Usage: "serve as a committee member (the proxy runs the key ceremony)",
			Description: `A member holds its share of the committee key in --state and answers only the
proxy; it keeps an audit record of every key switch it makes.

  fedpca csp serve --certs certs/csp-csp-1 --state state/csp-1 --listen :7001`,
			Flags: append(nodeFlags(":7001"), boolFlag("allow-no-noise", "switch jobs that have no DP noise (tests only)"),
				strsFlag("committee", "the committee this member takes part in, by key (as owners pin it: IDs its trust store lists, SPIFFE IDs or ID=FINGERPRINT, itself included): it reveals its key share only to a ceremony of exactly these members (default: any members its trust store accepts as csp)")),
			Action: func(ctx context.Context, cmd *cli.Command) error {
				log := logger(cmd, "csp")
				creds, id, err := identity(cmd, transport.RoleCSP, log)
				if err != nil {
					return err
				}
				peers, err := memberPins(cmd.StringSlice("committee"), creds)
				if err != nil {
					return err
				}
				l, err := net.Listen("tcp", cmd.String("listen"))
				if err != nil {
					return err
				}
				ml, err := metricsListener(cmd)
				if err != nil {
					return err
				}
				m, err := csp.New(csp.Config{ID: id.ID, Listener: l, Creds: creds, Insecure: creds == nil, Store: cmd.String("state"), Peers: peers,
					AllowNoNoise: cmd.Bool("allow-no-noise"), Logger: log.With("id", id.ID), MetricsListener: ml})
				if err != nil {
					return err
				}
				serveLocal(ctx, log, cmd.String("state"), auditSocket, func(w io.Writer) error {
					recs, err := m.Audit()
					if err != nil {
						return err
					}
					return writeAudit(w, recs)
				})
				return m.Run(ctx)
			},
		}, {
			Name:  "audit",
			Usage: "print the audit record of every key switch this member made (JSON lines)",
			Description: `Reads the member's state directory: its store when the member is stopped, or,
while it runs (its store is locked), the records it serves from its store on the
socket audit.sock in that directory (0600: the state directory's own users).

  fedpca csp audit --state state/csp-1`,
			Flags: []cli.Flag{reqStr("state", "the member's state directory"),
				strFlag("id", "audit", "unused (the records name their jobs; kept for existing scripts)")},
			Action: func(_ context.Context, cmd *cli.Command) error {
				var recs []csp.SwitchRecord
				dir := cmd.String("state")
				live, err := readStateDir(dir, auditSocket, func() (err error) { recs, err = csp.ReadAudit(dir); return err }, os.Stdout)
				if err != nil || live {
					return err
				}
				return writeAudit(os.Stdout, recs)
			},
		}},
	}
}

func proxyCommand() *cli.Command {
	return &cli.Command{
		Name:  "proxy",
		Usage: "the proxy: key ceremony, jobs, uploads, sealing and key switch",
		Commands: []*cli.Command{{
			Name:  "serve",
			Usage: "serve as the proxy",
			Description: `The committee is given in Shamir-point order:
  fedpca proxy serve --certs certs/proxy-proxy --state /var/lib/fedpca/proxy \
    --csp csp-1=csp1.example:7001 --csp csp-2=csp2.example:7001 --csp csp-3=csp3.example:7001 --threshold 2`,
			Flags: append(nodeFlags(":7000"),
				strsFlag("csp", "a committee member as ID=HOST:PORT (repeat, in point order)"),
				intFlag("threshold", 0, "members needed for a key switch (0: all)"),
				boolFlag("allow-no-noise", "accept jobs without DP noise (tests only)"),
				intFlag("upload-memory", 64, "MiB of uploads received at once (bounds memory; about 38 uploads of one ciphertext and its proof, 1.76 MB each while received; 1.39 MB a ciphertext in an upload of several)"),
				intFlag("max-waiting", 1024, "uploads waiting for room; more are told when to retry (bounds memory)"),
				intFlag("max-connections", 0, "client connections served at once, about 40 KiB each (0: no limit); with many owners, use it with the owners' --idle-timeout"),
				intFlag("max-watchers", 0, "owners' job watches served at once (0: 4,096, or as many as GOMEMLIMIT leaves room for at about 56 KiB each; at most half of --max-connections); owners beyond it poll"),
				strFlag("status-listen", "", "address to serve the status page on (/ and /status.json; empty: off): plain HTTP on a loopback address such as 127.0.0.1:7080, otherwise HTTPS for operator certificates of a trust domain this node accepts role operator from (fedpca certs issue operator/NAME)"),
				&cli.DurationFlag{Name: "progress-interval", Value: proxy.DefaultProgressInterval, Usage: "users and owners learn a running job's progress only at its creation plus multiples of this, and a job whose owners all answered is sealed at the next such instant: shares that compute faster (row counts) show to no one but the proxy", Sources: env("progress-interval")},
				&cli.DurationFlag{Name: "switch-timeout", Value: 24 * time.Hour, Usage: "how long a sealed job waits for the committee", Sources: env("switch-timeout")},
				&cli.DurationFlag{Name: "unknown-owner-grace", Value: proxy.DefaultUnknownOwnerGrace, Usage: "a job that needs an owner this proxy never heard from (a typo in --owners, an owner not deployed) fails after this long from its creation, naming it", Sources: env("unknown-owner-grace")},
			),
			Action: func(ctx context.Context, cmd *cli.Command) error {
				log := logger(cmd, "proxy")
				creds, id, err := identity(cmd, transport.RoleProxy, log)
				if err != nil {
					return err
				}
				var members []proxy.Member
				for _, s := range cmd.StringSlice("csp") {
					mid, addr, ok := strings.Cut(s, "=")
					if !ok {
						return fmt.Errorf("--csp %q: want ID=HOST:PORT", s)
					}
					members = append(members, proxy.Member{ID: mid, Addr: addr})
				}
				if len(members) == 0 {
					return errors.New("name the committee with --csp ID=HOST:PORT (at least one)")
				}
				t := cmd.Int("threshold")
				if t == 0 {
					t = len(members)
				}
				l, err := net.Listen("tcp", cmd.String("listen"))
				if err != nil {
					return err
				}
				ml, err := metricsListener(cmd)
				if err != nil {
					return err
				}
				sl, err := optionalListener(cmd, "status-listen")
				if err != nil {
					return err
				}
				p, err := proxy.New(proxy.Config{ID: id.ID, Listener: l, Creds: creds, Insecure: creds == nil, Store: cmd.String("state"), MetricsListener: ml, StatusListener: sl,
					Committee: members, Threshold: t, AllowNoNoise: cmd.Bool("allow-no-noise"), UploadMemory: int64(cmd.Int("upload-memory")) << 20, MaxWaiting: cmd.Int("max-waiting"), MaxConnections: cmd.Int("max-connections"), MaxWatchers: cmd.Int("max-watchers"),
					SwitchTimeout: cmd.Duration("switch-timeout"), ProgressInterval: cmd.Duration("progress-interval"),
					UnknownOwnerGrace: cmd.Duration("unknown-owner-grace"), Logger: log})
				if err != nil {
					return err
				}
				return p.Run(ctx)
			},
		}},
	}
}

// loadSchema reads a schema file.
func loadSchema(path string) (*schema.Schema, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := schema.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

func ownerCommand() *cli.Command {
	return &cli.Command{
		Name:  "owner",
		Usage: "data owner: serve datasets to jobs, project rows on published components",
		Commands: []*cli.Command{{
			Name:  "serve",
			Usage: "take part in jobs that name this owner",
			Description: `Each --dataset is SCHEMA.json=SOURCE (a CSV file or a postgres:// URL; see
"owner check"). At start the owner reads every source through its schema, logs
the local report and refuses to start on a source that does not fit. It then polls
the proxy for jobs that name it, checks them against its policy and privacy budget,
and uploads its encrypted statistics once. Its ledgers (in --state, one per source of
rows: datasets reading the same file or query share one) decide the budget, counting
each job's cost as the job's result does (discrete corrections included); an owner
whose ledger has spent more than --budget-epsilon refuses to start and says how much.
It accepts only a committee key that every member of the committee it pins
(--committee, the IDs of the deployment's CSPs) attested, of at least
--committee-min-members members and a threshold of --committee-min-threshold.

  fedpca owner serve --certs certs/owner-hospital-a --state state/hospital-a --proxy localhost:7000 \
    --dataset data/schema.json=data/hospital-a.csv --budget-epsilon 10 --committee csp-1,csp-2,csp-3`,
			Flags: append(append(nodeFlags(""),
				reqStr("proxy", "proxy address HOST:PORT"),
				strsFlag("dataset", datasetUsage+" (repeat for several datasets)"),
				floatFlag("budget-epsilon", 10, "total privacy budget per source of rows (a file, a database query: datasets reading the same rows share it): epsilon"),
				floatFlag("budget-delta", 1e-6, "total privacy budget per source of rows: delta"),
				strsFlag("ledger", "DATASET=NAME: keep the dataset's budget in the ledger NAME, shared by every dataset given that name (sources that overlap otherwise: two queries over one table, a file and its copy)"),
				&cli.DurationFlag{Name: "upload-hold", Value: time.Second, Usage: "send a share no earlier than this after taking the job up: the time a share takes, which grows with the rows, is then hidden from the proxy too while it is shorter (about 0.3 s at 100,000 rows of 30 features; see docs/BENCHMARKS.md, upload timing); 0: send at once", Sources: env("upload-hold")},
				floatFlag("max-epsilon", 0, "largest epsilon of one job (0: only the budget limits)"),
				floatFlag("max-delta", owner.DefaultMaxDelta, "largest delta of one job"),
				strsFlag("users", "users allowed to run jobs, by key: each an ID this node's trust store lists, a SPIFFE ID, or ID=FINGERPRINT (default: any user the trust store accepts)"),
				boolFlag("allow-no-noise", "take part in jobs without DP noise (tests only)"),
				boolFlag("allow-dealer-components", "take part in components jobs whose correlated randomness the proxy deals (user run --randomness dealer): the proxy with one computing member could then learn the statistics, and wrong randomness goes undetected; off: only jobs whose three computing members make their own"),
				boolFlag("allow-exact-components", "take part in components jobs without DP noise (user run --release components --no-noise): the user learns the exact top-k components, their eigenvalues and the row count, computed by the committee in secret-shared arithmetic, and nothing else unless a member colludes with the user (a member's conversion share is its own input: docs/PROTOCOL.md 7.2); off: such jobs are declined (policy)"),
				intFlag("exact-components-max-k", 0, "the most exact components a job may release (0: half the schema's features, at least 1; never more than d - 2, whose eigenpairs would give the covariance)"),
				intFlag("exact-components-jobs", owner.DefaultExactJobs, "how many exact components jobs each source of rows takes part in per --exact-components-period (each is recorded in its ledger with what it released)"),
				&cli.DurationFlag{Name: "exact-components-period", Value: owner.DefaultExactPeriod, Usage: "the period of --exact-components-jobs", Sources: env("exact-components-period")},
				&cli.DurationFlag{Name: "poll", Value: 10 * time.Second, Usage: "how often to ask the proxy for jobs when it serves this owner no watch", Sources: env("poll")},
				&cli.DurationFlag{Name: "idle-timeout", Value: 0, Usage: "close the connection to the proxy after this long without calls (with many owners and long polls; 0: keep it)", Sources: env("idle-timeout")},
			), committeeFlags("takes part in jobs")...),
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if _, err := committeePolicy(cmd, nil); err != nil {
					return err // before anything is read: the pin is missing or malformed
				}
				log := logger(cmd, "owner")
				d, err := dialer(cmd, transport.RoleOwner, log)
				if err != nil {
					return err
				}
				committee, err := committeePolicy(cmd, d.Creds)
				if err != nil {
					return err
				}
				users, err := allowedUsers(cmd.StringSlice("users"), d.Creds)
				if err != nil {
					return err
				}
				ledgers := map[string]string{}
				for _, s := range cmd.StringSlice("ledger") {
					ds, name, ok := strings.Cut(s, "=")
					if !ok || ds == "" || name == "" {
						return fmt.Errorf("--ledger %q: want DATASET=NAME", s)
					}
					ledgers[ds] = name
				}
				var sets []*owner.Dataset
				for _, s := range cmd.StringSlice("dataset") {
					sch, src, err := parseDataset(s)
					if err != nil {
						return err
					}
					sets = append(sets, &owner.Dataset{Schema: sch, Source: src, Epsilon: cmd.Float64("budget-epsilon"), Delta: cmd.Float64("budget-delta"), Ledger: ledgers[sch.ID]})
					delete(ledgers, sch.ID)
				}
				if len(ledgers) > 0 {
					return fmt.Errorf("--ledger: no --dataset has a schema with id %s", strings.Join(slices.Sorted(maps.Keys(ledgers)), ", "))
				}
				if err := checkDatasets(ctx, sets, log); err != nil {
					return err
				}
				var l net.Listener
				if addr := cmd.String("listen"); addr != "" {
					if l, err = net.Listen("tcp", addr); err != nil {
						return err
					}
				}
				ml, err := metricsListener(cmd)
				if err != nil {
					return err
				}
				o, err := owner.New(owner.Config{ID: d.Identity().ID, Listener: l, Dialer: d, ProxyAddr: cmd.String("proxy"), Store: cmd.String("state"), MetricsListener: ml,
					Datasets: sets, PollInterval: cmd.Duration("poll"), IdleTimeout: cmd.Duration("idle-timeout"), UploadHold: cmd.Duration("upload-hold"), Logger: log.With("id", d.Identity().ID),
					Policy: owner.Policy{Users: users, MaxEpsilon: cmd.Float64("max-epsilon"), MaxDelta: cmd.Float64("max-delta"),
						Committee: committee, AllowNoNoise: cmd.Bool("allow-no-noise"), AllowExactComponents: cmd.Bool("allow-exact-components"), AllowDealer: cmd.Bool("allow-dealer-components"),
						ExactMaxK: cmd.Int("exact-components-max-k"), Exact: owner.ExactRule{Jobs: cmd.Int("exact-components-jobs"), Period: cmd.Duration("exact-components-period")}}})
				if err != nil {
					return err
				}
				serveLocal(ctx, log, cmd.String("state"), ledgerSocket, func(w io.Writer) error {
					v, err := o.Ledgers()
					if err != nil {
						return err
					}
					return json.NewEncoder(w).Encode(v)
				})
				return o.Run(ctx)
			},
		}, ownerCheckCommand(), ownerLedgerCommand(), {
			Name:      "published",
			Usage:     "fetch the result document a user published for a job",
			ArgsUsage: "JOB",
			Description: `JOB is the job's ID or a unique prefix of it (the logs print 16 hex digits),
among the jobs that name this owner.

  fedpca owner published --certs certs/owner-hospital-a --proxy localhost:7000 --out result.json 3f2a9c1e`,
			Flags: []cli.Flag{
				strFlag("certs", "", "the owner's credentials directory"),
				reqStr("proxy", "proxy address HOST:PORT"),
				strFlag("out", "result.json", "where to write the document"),
				forceFlag(),
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				if cmd.Args().Len() != 1 {
					return fmt.Errorf("name one job: fedpca owner published [options] JOB (an ID or a unique prefix), got %d arguments", cmd.Args().Len())
				}
				if err := user.CheckNew(cmd.Bool("force"), cmd.String("out")); err != nil {
					return err
				}
				creds, err := transport.LoadCredentials(cmd.String("certs"))
				if err != nil {
					return err
				}
				conn, err := transport.Dialer{Creds: creds}.Dial(cmd.String("proxy"), transport.Identity{Role: transport.RoleProxy})
				if err != nil {
					return err
				}
				defer conn.Close()
				px := fedpcav1.NewProxyServiceClient(conn)
				reach := &transport.Reach{Addr: cmd.String("proxy")}
				var list *fedpcav1.ListJobsResponse
				err = transport.Retry(ctx, transport.Call{What: "list this owner's jobs on the proxy", Timeout: time.Minute, Attempts: 5, Peer: "the proxy", Reach: reach},
					func(ctx context.Context) (err error) {
						list, err = px.ListJobs(ctx, &fedpcav1.ListJobsRequest{IncludeEnded: true, Brief: true})
						return err
					})
				if err != nil {
					return err
				}
				var ids []string
				for _, j := range list.GetJobs() {
					ids = append(ids, j.GetStatus().GetJobId())
				}
				id, err := job.MatchID(ids, cmd.Args().First())
				if err != nil {
					return fmt.Errorf("%w among the %d jobs that name this owner", err, len(ids))
				}
				var r *fedpcav1.GetPublishedResponse
				err = transport.Retry(ctx, transport.Call{What: "get the published result from the proxy", Timeout: time.Minute, Attempts: 5, Peer: "the proxy", Reach: reach},
					func(ctx context.Context) (err error) {
						r, err = px.GetPublished(ctx, &fedpcav1.GetPublishedRequest{JobId: id})
						return err
					})
				if err != nil {
					return err
				}
				if err := transport.WriteFileAtomic(cmd.String("out"), r.GetResult()); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "wrote %s: the result of job %s\n", cmd.String("out"), id[:16])
				return nil
			},
		}, {
			Name:  "project",
			Usage: "apply a published result to local rows: (z - mean) W, written as CSV",
			Description: `Writes one CSV row per input row the schema reads: [ID,]component_1,...,component_k
and, when the schema has classes, the row's label. Rows a job would leave out
(unreadable, or a missing value under the drop policy) are left out and counted;
--id-column copies a column (a record number) first, to join the rows back. The
values are in the schema's units: each feature centred, scaled, clamped and the
row clipped, then projected. With --plots DIR also the scree plot and the scatter
of these rows on the first two components. Costs no privacy budget.

  fedpca owner project --result result.json --schema heart.schema.json --data heart.csv \
    --id-column record_id --out projected.csv --plots figures/
  fedpca owner project --result result.json --schema wdbc.schema.json \
    --data 'postgres://fedpca@db:5432/cdw?table=wdbc' --out projected.csv`,
			Flags: []cli.Flag{
				reqStr("result", "the result document (result.json)"),
				reqStr("schema", "the dataset's schema file"),
				reqStr("data", "the rows to project: a CSV file (plain or gzip) or a postgres:// URL, as an owner's --dataset SOURCE"),
				strFlag("id-column", "", "a column of the source copied as the output's first column, to join the projected rows back to the source (rows the schema skips make the order alone unreliable)"),
				strFlag("out", "-", "output CSV file (- for standard output), written in full or not at all"),
				plotsFlag(),
				forceFlag(),
			},
			Action: func(ctx context.Context, cmd *cli.Command) error {
				sch, err := loadSchema(cmd.String("schema"))
				if err != nil {
					return err
				}
				res, err := loadResult(cmd.String("result"))
				if err != nil {
					return err
				}
				if err := checkPlotFiles(cmd, res.Dataset, res.Analysis); err != nil {
					return err
				}
				var out io.Writer = os.Stdout
				commit := func() error { return nil }
				if p := cmd.String("out"); p != "-" {
					if err := user.CheckNew(cmd.Bool("force"), p); err != nil {
						return err
					}
					f, err := newAtomicFile(p)
					if err != nil {
						return err
					}
					defer f.discard() // no partial file on failure
					out = f
					commit = f.commit
				}
				rows, err := source.Open(ctx, cmd.String("data"))
				if err != nil {
					return err
				}
				defer rows.Close()
				var coords []float64
				var labels []string
				opt := job.ProjectOptions{IDColumn: cmd.String("id-column")}
				if cmd.String("plots") != "" {
					opt.Each = func(c []float64, class string) {
						coords = append(coords, c...)
						labels = append(labels, class)
					}
				}
				rep, err := job.Project(res, sch, rows, out, opt)
				if err != nil {
					return fmt.Errorf("%s: %w", source.Redact(cmd.String("data")), err)
				}
				if err := commit(); err != nil {
					return err
				}
				n := rep.Written
				k := len(res.Components.Eigenvalues)
				fmt.Fprintf(os.Stderr, "projected %d of %d rows on %d components", n, rep.Rows, k)
				if left := rep.Skipped + rep.Dropped; left > 0 {
					fmt.Fprintf(os.Stderr, "; left out %d unreadable and %d with a missing value (drop policy), as a job does", rep.Skipped, rep.Dropped)
					if opt.IDColumn == "" {
						fmt.Fprint(os.Stderr, ": the output's rows no longer follow the source's order; join them back with --id-column")
					}
					for _, e := range rep.Examples {
						fmt.Fprintf(os.Stderr, "\n  skipped: %s", e)
					}
				}
				fmt.Fprintln(os.Stderr)
				if dir := cmd.String("plots"); dir != "" {
					var rows *mat.Dense
					if n > 0 {
						rows = mat.NewDense(n, k, coords)
					}
					if len(sch.Classes) == 0 {
						labels = nil
					}
					return writePlots(os.Stderr, dir, res, rows, labels)
				}
				return nil
			},
		}},
	}
}

func schemaCommand() *cli.Command {
	return &cli.Command{
		Name:  "schema",
		Usage: "dataset schemas",
		Commands: []*cli.Command{{
			Name:  "infer",
			Usage: "write a schema whose centers and scales are a source's mean and std (public data only: it leaks)",
			Description: `For preparing schemas from public or reference data. In a deployment, centers
and scales are public parameters the parties agree on; computing them from the
owners' pooled rows would leak (use the profile job, "fedpca user profile").

  fedpca schema infer --data public-sample.csv --id wdbc > wdbc.schema.json`,
			Flags:  inferFlags(),
			Action: inferAction,
		}, genotypesSchemaCommand()},
	}
}

func healthCommand() *cli.Command {
	return &cli.Command{
		Name:  "health",
		Usage: "ask a node for its gRPC health (for container health checks)",
		Description: `Prints SERVING and exits 0 when the node serves; fails otherwise. --expect checks
the node's role too (empty: any role of the deployment).

  fedpca health --addr localhost:7000 --certs certs/proxy-proxy --expect proxy`,
		Flags: []cli.Flag{
			strFlag("addr", "127.0.0.1:7000", "node address"),
			strFlag("certs", "", "credentials to call with (the node's own are fine)"),
			strFlag("expect", "", "expected role of the node (proxy, csp, owner); empty: any"),
			boolFlag("insecure", "plaintext (for --insecure nodes)"),
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			d := transport.Dialer{Insecure: cmd.Bool("insecure"), Self: transport.Identity{Role: transport.RoleUser, ID: "health"}}
			if !d.Insecure {
				creds, err := transport.LoadCredentials(cmd.String("certs"))
				if err != nil {
					return err
				}
				d.Creds = creds
			}
			expect := transport.Identity{Role: cmd.String("expect")} // empty: any role
			conn, err := d.Dial(cmd.String("addr"), expect)
			if err != nil {
				return err
			}
			defer conn.Close()
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			r, err := healthpb.NewHealthClient(conn).Check(cctx, &healthpb.HealthCheckRequest{})
			if err != nil {
				return err
			}
			if r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("not serving: %s", r.GetStatus())
			}
			fmt.Println("SERVING")
			return nil
		},
	}
}

// committeeFlags set the committee policy of a node that accepts a
// committee key (an owner, a user creating jobs); what says what the node
// does under the key.
func committeeFlags(what string) []cli.Flag {
	return []cli.Flag{
		strsFlag("committee", "the CSP members this node trusts as the committee, by key (comma-separated or repeated; required unless --any-committee): each an ID this node's trust store lists (its key then pinned), "+
			"a SPIFFE ID, or ID=FINGERPRINT; it "+what+" only under a key these members, and no others, all attested"),
		boolFlag("any-committee", "accept any committee of the deployment's CSPs whose members all attested the key, whoever the proxy names (local tests only)"),
		intFlag("committee-min-members", job.DefaultMinCommitteeMembers, "refuse a committee of fewer members"),
		intFlag("committee-min-threshold", job.DefaultMinCommitteeThreshold, "refuse a committee whose key switch needs fewer members (with 1, one member with the proxy could decrypt every upload)"),
		boolFlag("committee-distinct-domains", "refuse a committee two of whose members' certificates come from one trust domain (one organisation's CA): no one operator runs two members"),
		boolFlag("committee-allow-minority-threshold", "accept a committee whose threshold is half its members or fewer (refused by default: two disjoint sets of members could each switch a job, releasing it twice)"),
	}
}

// committeePolicy is the committee policy of the flags (committeeFlags),
// resolved (resolveCommittee) and validated.
func committeePolicy(cmd *cli.Command, creds *transport.Credentials) (job.CommitteePolicy, error) {
	p, err := resolveCommittee(cmd, creds)
	if err != nil {
		return p, err
	}
	return p, p.Validate()
}

// resolveCommittee is the committee policy of the flags (committeeFlags;
// the zero policy for a command without them): each --committee name
// pinned by the key the node's trust store gives it (creds; nil, insecure
// mode: by the name, and the key given as ID=FINGERPRINT if any).
func resolveCommittee(cmd *cli.Command, creds *transport.Credentials) (job.CommitteePolicy, error) {
	p := job.CommitteePolicy{AnyMembers: cmd.Bool("any-committee"), DistinctDomains: cmd.Bool("committee-distinct-domains"),
		MinMembers: cmd.Int("committee-min-members"), MinThreshold: cmd.Int("committee-min-threshold"), AllowMinorityThreshold: cmd.Bool("committee-allow-minority-threshold")}
	pins, err := memberPins(cmd.StringSlice("committee"), creds)
	p.Members = pins
	return p, err
}

// memberPins resolves committee members to their keys (see
// resolveCommittee).
func memberPins(names []string, creds *transport.Credentials) ([]job.MemberPin, error) {
	var out []job.MemberPin
	for _, name := range names {
		if creds == nil {
			id, key, _ := strings.Cut(name, "=")
			out = append(out, job.MemberPin{ID: id, Key: strings.TrimPrefix(key, "sha256:")})
			continue
		}
		m, err := creds.Trust.Resolve(transport.RoleCSP, name)
		if err != nil {
			return nil, fmt.Errorf("--committee %s: %w", name, err)
		}
		out = append(out, job.MemberPin{ID: m.ID, Key: m.Key})
	}
	return out, nil
}
