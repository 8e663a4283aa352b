package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/go-hclog"
	"gonum.org/v1/gonum/mat"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/fedpca/fedpca/source"
	"github.com/fedpca/fedpca/transport"
	"github.com/fedpca/fedpca/user"
)

// Simulation describes a simulated deployment: a dataset split among owners
// and a committee.
type Simulation struct {
	// Data is a CSV file with a header; Name its dataset ID; Label its class
	// column ("" for none).
	Data  []byte
	Name  string
	Label string
	// Schema defaults to the reference preprocessing: standardise with the
	// pooled mean and population std, clip rows to norm 1, g = 16 bits.
	Schema *schema.Schema
	Owners int
	// How splits the rows (see Split); Seed makes the split reproducible.
	How  string
	Seed uint64
	// CSPs is the committee's size (default 3) and Threshold the members a
	// key switch needs (default: a majority, 2 of 3). The simulated owners
	// and user pin the committee's members and refuse one below
	// MinCommitteeMembers and MinCommitteeThreshold (0: the default
	// committee policy, at least 3 members and a threshold of 2; see
	// job.CommitteePolicy): a smaller committee runs only when they are
	// lowered to it.
	CSPs                  int
	Threshold             int
	MinCommitteeMembers   int
	MinCommitteeThreshold int
	TCP                   bool
	Insecure              bool
	// Bits is g for an inferred schema (default 16).
	Bits uint
	// Dir holds certificates and state (default: a temporary directory,
	// removed by Close); Poll is the owners' poll interval.
	Dir    string
	Poll   time.Duration
	Logger hclog.Logger
	// AllowExactComponents lets the owners take part in components jobs
	// without noise (owner.Policy; a job with JobOptions.Release
	// components and NoNoise needs it).
	AllowExactComponents bool
	// Processes, ProxyProcess and OwnerFarms run nodes as processes (see
	// Config).
	Processes    Launcher
	ProxyProcess bool
	OwnerFarms   int
	// Sources, instead of Data, name each owner's rows (package source: a
	// PLINK fileset, plink://PREFIX, say), read through Schema, which is
	// then required, and Owners is their number. Populations, when set,
	// are each owner's rows' populations (the separation RunPower
	// measures). Such a simulation runs power-method jobs only (RunPower).
	Sources     []string
	Populations [][]int
}

// JobOptions describe one simulated job.
type JobOptions struct {
	Analysis  string
	K         int
	Epsilon   float64
	Delta     float64 // 0: 1/N, as in the reference
	NoNoise   bool
	Plan      string
	Tolerate  int
	Split     dp.Split
	MinOwners int
	// Schema, if set, is the job's schema instead of the simulation's: one
	// that reads the rows as the owners' does (the profile's choice). The
	// report then has no utility against the simulation's rows.
	Schema *schema.Schema
	// Standardize asks for the PCA of the release's correlation matrix.
	Standardize bool
	// Release is what the user learns: the statistics ("") or the top K
	// components only (job.ReleaseComponents).
	Release string
	// Randomness is a components job's (job.RandomnessMembers or
	// job.RandomnessDealer; empty: user.Request's default).
	Randomness string
	// Progress is called at every change of the job's status.
	Progress func(*fedpcav1.JobStatus)
}

// Report is what a simulated job measured.
type Report struct {
	Setup   Setup              `json:"setup"`
	Result  *job.Result        `json:"result"`
	Timings Timings            `json:"timings"`
	Bytes   map[string]Traffic `json:"bytes"`
	Utility *Utility           `json:"utility"`
}

// Setup echoes the simulation's parameters.
type Setup struct {
	Dataset   string   `json:"dataset"`
	Rows      int64    `json:"rows"`
	D         int      `json:"d"`
	Classes   int      `json:"classes"`
	Owners    int      `json:"owners"`
	Split     string   `json:"split"`
	Analysis  string   `json:"analysis"`
	Release   string   `json:"release,omitempty"`
	K         int      `json:"k"`
	Epsilon   float64  `json:"epsilon"`
	Delta     float64  `json:"delta"`
	NoNoise   bool     `json:"no_noise"`
	Plan      string   `json:"noise_plan"`
	Tolerate  int      `json:"tolerate"`
	BudgetR   dp.Split `json:"budget_split"`
	CSPs      int      `json:"csp_nodes"`
	Threshold int      `json:"csp_threshold"`
	Transport string   `json:"transport"`
	Bits      uint     `json:"quant_bits"`
}

// Timings are the phases of a job, in seconds.
type Timings struct {
	// OwnerShare is the median per owner of reading its rows, computing,
	// noising and encrypting its statistics (OwnerShareMax the slowest).
	OwnerShare    float64 `json:"owner_share"`
	OwnerShareMax float64 `json:"owner_share_max"`
	// Aggregate is the proxy's time validating and folding uploads (summed);
	// UploadWindow runs from job creation to sealing.
	Aggregate    float64 `json:"aggregate"`
	UploadWindow float64 `json:"upload_window"`
	Seal         float64 `json:"seal"`
	KeySwitch    float64 `json:"key_switch"`
	// Fetch downloads the result; UserAnalysis decrypts and analyses it.
	Fetch        float64 `json:"fetch"`
	UserAnalysis float64 `json:"user_analysis"`
	// Total runs from the job's submission to the user's result.
	Total float64 `json:"total"`
	// Central is the same analysis of the same rows done centrally without
	// encryption or noise: the baseline of the protocol's overhead.
	Central float64 `json:"central_non_private"`
}

// Traffic is a role's payload bytes.
type Traffic struct {
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
}

// Simulator runs jobs on one simulated deployment. Not safe for concurrent
// Run calls.
type Simulator struct {
	sim    Simulation
	cl     *Cluster
	sch    *schema.Schema
	owners []string
	// ownerRows is the most rows any owner holds: the simulator's public
	// per-owner cap (a deployment states one in public; the simulator
	// knows its split, so no owner drops rows).
	ownerRows int64
	user      *user.Client
	rows      *labelledRows
	tmpDir    string
	// parts are the owners' CSV files (RunPower evaluates the power job
	// against the central PCA of their rows as the owners map them), or
	// sourceRows their rows as mapped from Simulation.Sources.
	parts      [][]byte
	sourceRows [][][]int64
}

// NewSimulator starts the deployment: certificates, committee (key
// ceremony), proxy and owners holding their parts of the data.
func NewSimulator(ctx context.Context, s Simulation) (*Simulator, error) {
	if len(s.Sources) > 0 {
		if s.Schema == nil || s.Data != nil {
			return nil, fmt.Errorf("simulate: owners' sources need a schema, and no data beside them")
		}
		s.Owners = len(s.Sources)
	}
	if s.Owners < 1 {
		return nil, fmt.Errorf("simulate: %d owners", s.Owners)
	}
	if s.How == "" {
		s.How = "iid"
	}
	if s.CSPs < 1 {
		s.CSPs = job.DefaultMinCommitteeMembers
	}
	if s.Threshold < 1 {
		s.Threshold = s.CSPs/2 + 1
	}
	// The owners and user pin the cluster's members (by key, once issued:
	// Cluster.Policy); their minimums are checked against its shape now.
	policy := job.CommitteePolicy{MinMembers: s.MinCommitteeMembers, MinThreshold: s.MinCommitteeThreshold}
	st := job.KeyStatement{Threshold: s.Threshold}
	for i := range s.CSPs {
		st.Members, st.MemberKeys = append(st.Members, CSPID(i)), append(st.MemberKeys, "")
	}
	if err := (job.CommitteePolicy{Members: job.PinNames(st.Members...), MinMembers: policy.MinMembers, MinThreshold: policy.MinThreshold}).Check(st); err != nil {
		return nil, fmt.Errorf("simulate: the simulated owners and user would refuse this committee: %w", err)
	}
	if s.Logger == nil {
		s.Logger = hclog.NewNullLogger()
	}
	sch := s.Schema
	if sch == nil {
		var err error
		if sch, err = schema.Infer(bytes.NewReader(s.Data), s.Name, s.Label); err != nil {
			return nil, err
		}
		if s.Bits != 0 {
			sch.Bits = s.Bits
			if err := sch.Validate(); err != nil {
				return nil, err
			}
		}
	}
	var tmp string
	if s.Dir == "" {
		var err error
		if tmp, err = os.MkdirTemp("", "fedpca-sim-"); err != nil {
			return nil, err
		}
		s.Dir = tmp
	}
	sm := &Simulator{sim: s, sch: sch, tmpDir: tmp}
	if len(s.Sources) == 0 {
		var err error
		if sm.parts, err = Split(s.Data, s.Label, s.Owners, s.How, s.Seed); err != nil {
			return nil, err
		}
	}
	var owners []OwnerConfig
	for i := range s.Owners {
		id := fmt.Sprintf("owner-%05d", i+1)
		sm.owners = append(sm.owners, id)
		policy := OwnerPolicy(true)
		policy.AllowExactComponents = s.AllowExactComponents
		oc := OwnerConfig{ID: id, Schema: sch, Epsilon: 1e6, Delta: 1e-6, Policy: policy}
		if len(s.Sources) > 0 {
			rows, err := readSource(ctx, sch, s.Sources[i])
			if err != nil {
				return nil, fmt.Errorf("simulate: owner %d: %w", i+1, err)
			}
			sm.sourceRows = append(sm.sourceRows, rows)
			sm.ownerRows = max(sm.ownerRows, int64(len(rows)))
			oc.Source = s.Sources[i]
		} else {
			oc.CSV = sm.parts[i]
			sm.ownerRows = max(sm.ownerRows, int64(bytes.Count(oc.CSV, []byte("\n"))), 1) // at least its rows
		}
		owners = append(owners, oc)
	}
	// Owners learn of jobs through the proxy's watch; those it refuses a
	// watch poll. An owner's connection costs the proxy about 40 KiB, 56
	// KiB while it watches (TLS and HTTP/2 state, three goroutines:
	// docs/SCALING.md). Up to 10,000 owners every owner watches (560 MiB
	// of the proxy's memory at 10,000): polling instead, with a bounded
	// number of connections, costs a connection and a TLS handshake per
	// owner per poll interval, and on a machine whose two cores also run
	// the owners that starved everything else (docs/SCALING.md). Beyond
	// 10,000 the proxy serves at most 3,000 connections (half of them
	// watches) and the other owners poll, every owners x 1 ms (as every
	// owner does for what failed about a job it was told of), dropping
	// their connection when idle for 1 s and resuming their TLS session at
	// the next poll: the proxy's memory then does not depend on the number
	// of owners.
	poll, idle, maxConns, watchers := s.Poll, time.Duration(0), 0, 0
	if poll <= 0 {
		poll = max(time.Second, time.Duration(s.Owners)*time.Millisecond)
	}
	switch {
	case s.Owners > 10000:
		// A limit without idle timeouts would leave the owners beyond it
		// waiting for a connection that is never given back.
		idle, maxConns = time.Second, 3000
	case s.Owners > 1000:
		watchers = s.Owners
	}
	cl, err := Start(ctx, Config{Dir: s.Dir, CSPs: s.CSPs, Threshold: s.Threshold, CommitteePolicy: &policy, Owners: owners, Users: []string{"analyst"},
		TCP: s.TCP, Insecure: s.Insecure, AllowNoNoise: true, PollInterval: poll, IdleTimeout: idle, RetryInterval: 100 * time.Millisecond,
		Logger: s.Logger, Processes: s.Processes, ProxyProcess: s.ProxyProcess, OwnerFarms: s.OwnerFarms, ProxyMaxConnections: maxConns,
		ProxyMaxWatchers: watchers})
	if err != nil {
		os.RemoveAll(tmp)
		return nil, err
	}
	sm.cl = cl
	if sm.user, err = cl.User(simUser); err != nil {
		cl.Stop()
		return nil, err
	}
	if len(s.Sources) == 0 {
		if sm.rows, err = mapRows(sch, s.Data); err != nil {
			sm.Close()
			return nil, err
		}
	}
	return sm, nil
}

// readSource reads an owner's rows from a source through the schema.
func readSource(ctx context.Context, sch *schema.Schema, spec string) ([][]int64, error) {
	src, err := source.Open(ctx, spec)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	return readRows(sch, src)
}

// readRows maps rows through the schema.
func readRows(sch *schema.Schema, src schema.Rows) ([][]int64, error) {
	rd, err := sch.NewRowReader(src, false)
	if err != nil {
		return nil, err
	}
	var rows [][]int64
	for row, err := range rd.All() {
		if err != nil {
			return nil, err
		}
		rows = append(rows, slices.Clone(row.Values))
	}
	return rows, nil
}

// Close stops the deployment (and removes its temporary directory).
func (s *Simulator) Close() {
	if s.user != nil {
		s.user.Close()
	}
	s.cl.Stop()
	if s.tmpDir != "" {
		os.RemoveAll(s.tmpDir)
	}
}

// Schema returns the schema in use.
func (s *Simulator) Schema() *schema.Schema { return s.sch }

// Cluster returns the running deployment.
func (s *Simulator) Cluster() *Cluster { return s.cl }

func (s *Simulator) traffic() map[string]Traffic {
	t, err := s.cl.ProxyTraffic()
	if err != nil {
		return map[string]Traffic{}
	}
	return t
}

// Run runs one job through the deployment and measures it.
func (s *Simulator) Run(ctx context.Context, o JobOptions) (*Report, error) {
	if s.rows == nil {
		return nil, fmt.Errorf("simulate: a simulation of the owners' sources runs power-method jobs only")
	}
	sch := s.sch
	if o.Schema != nil {
		sch = o.Schema
	}
	before := s.traffic()
	sharesBefore, err := s.cl.OwnerShares()
	if err != nil {
		return nil, err
	}
	spec, err := s.user.Spec(ctx, userRequest(s, o))
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := s.user.Submit(ctx, spec, sch); err != nil {
		return nil, err
	}
	st, err := s.user.Wait(ctx, spec.ID(), o.Progress)
	if err != nil {
		return nil, err
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		reason := st.GetReason()
		for _, d := range st.GetDeclinedOwners() { // what each owner said, as user run says it
			reason += fmt.Sprintf("\n  owner %s declined %s", d.GetOwner(), transport.ExplainDecline(d, sch.FeatureNames()))
		}
		return nil, fmt.Errorf("job failed: %s", reason)
	}
	fetchStart := time.Now()
	res, analysisTime, err := s.fetch(ctx, spec, sch)
	if err != nil {
		return nil, err
	}
	total := time.Since(start)
	after := s.traffic()
	rep := &Report{Result: res, Bytes: map[string]Traffic{}}
	for r, a := range after {
		rep.Bytes[r] = Traffic{Sent: a.Sent - before[r].Sent, Received: a.Received - before[r].Received}
	}
	sharesAfter, err := s.cl.OwnerShares()
	if err != nil {
		return nil, err
	}
	shares := sharesAfter.Since(sharesBefore)
	sort.Float64s(shares)
	pt := st.GetTimings()
	rep.Timings = Timings{Aggregate: pt.GetAggregateSeconds(), UploadWindow: pt.GetUploadWindowSeconds(), Seal: pt.GetSealSeconds(),
		KeySwitch: pt.GetKeySwitchSeconds(), Fetch: time.Since(fetchStart).Seconds() - analysisTime.Seconds(),
		UserAnalysis: analysisTime.Seconds(), Total: total.Seconds()}
	if len(shares) > 0 {
		rep.Timings.OwnerShare, rep.Timings.OwnerShareMax = shares[len(shares)/2], shares[len(shares)-1]
	}
	l, _ := spec.Layout(sch)
	transportName := "memory"
	if s.sim.TCP {
		transportName = "tcp"
	}
	rep.Setup = Setup{Dataset: s.sch.ID, Rows: int64(s.rows.n()), D: l.D, Classes: len(s.sch.Classes), Owners: len(s.owners), Split: s.sim.How,
		Analysis: spec.Analysis, Release: spec.Release, K: spec.K, Epsilon: spec.Epsilon, Delta: spec.Delta, NoNoise: spec.NoNoise, Plan: spec.NoisePlan,
		Tolerate: spec.Tolerate, BudgetR: spec.Split, CSPs: spec.CommitteeN, Threshold: spec.CommitteeThreshold, Transport: transportName, Bits: sch.Bits}
	central, centralTime, err := s.central(spec, sch)
	if err != nil {
		return nil, err
	}
	rep.Timings.Central = centralTime.Seconds()
	if sch == s.sch {
		if rep.Utility, err = s.rows.utility(res, central, s.sim.Seed); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// simUser is the simulated user's ID.
const simUser = "analyst"

// userRequest is the user's request for the job o describes.
func userRequest(s *Simulator, o JobOptions) user.Request {
	delta := o.Delta
	if delta == 0 && !o.NoNoise {
		delta = job.DefaultDelta
	}
	split := o.Split
	if split == (dp.Split{}) {
		split = dp.DefaultSplitFor(o.Analysis)
	}
	sch := s.sch
	if o.Schema != nil {
		sch = o.Schema
	}
	return user.Request{Schema: sch, Analysis: o.Analysis, K: o.K, Epsilon: o.Epsilon, Delta: delta, NoNoise: o.NoNoise,
		Plan: o.Plan, Tolerate: o.Tolerate, Split: split, Owners: s.owners, MinOwners: o.MinOwners,
		Deadline: time.Now().Add(time.Hour), MaxOwnerRows: s.ownerRows, Standardize: o.Standardize, Release: o.Release, Randomness: o.Randomness}
}

// fetch downloads the result, then decrypts and analyses it, timing the
// second part apart.
func (s *Simulator) fetch(ctx context.Context, spec *job.Spec, sch *schema.Schema) (*job.Result, time.Duration, error) {
	sealed, err := s.user.Download(ctx, spec, sch)
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	res, err := s.user.Open(sealed)
	return res, time.Since(start), err
}

// central computes the non-private result of the same analysis on all the
// rows, centrally, and times it.
func (s *Simulator) central(spec *job.Spec, sch *schema.Schema) (*job.Result, time.Duration, error) {
	start := time.Now()
	// All the rows as one reader: the per-owner cap is the whole job's.
	all := *spec
	all.MaxOwnerRows = spec.MaxRows
	acc, _, err := job.ReadStatistics(&all, sch, bytes.NewReader(s.sim.Data))
	if err != nil {
		return nil, 0, err
	}
	l, _ := spec.Layout(sch)
	rel, err := stats.Unpack(l, sch.Bits, acc.Pack())
	if err != nil {
		return nil, 0, err
	}
	res, err := job.AnalyzeRelease(job.HeaderOf(spec, sch, ""), spec.Analysis, spec.K, rel, nil, job.Privacy{NoNoise: true})
	return res, time.Since(start), err
}

// Settle waits, at most limit, until the owners have prepared their next
// shares' encryptions of zero (docs/PROTOCOL.md section 5): until their
// number is the same in two readings a second apart (a reading scrapes
// every farm's metrics: at 2,500 owners a farm, not a thing to do more
// often). A deployment's owners prepare between jobs; the simulator's jobs
// run back to back, so a benchmark settles before each job to measure what
// a deployment's next job takes.
func (s *Simulator) Settle(ctx context.Context, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	last := -1
	for {
		n, err := s.cl.OwnersPrepared()
		if err != nil {
			return err
		}
		if n == last {
			return nil
		}
		last = n
		select {
		case <-ctx.Done():
			return nil // still preparing: the job takes what is ready
		case <-time.After(time.Second):
		}
	}
}

// OwnerIDs returns the owners' IDs.
func (s *Simulator) OwnerIDs() []string { return slices.Clone(s.owners) }

// Projected returns the simulation's rows (through the schema's map, at
// most the rows kept for the utility measures) projected on a result's
// components, (z - mean) W, with each row's class name (nil without
// classes): the rows of a scatter plot.
func (s *Simulator) Projected(res *job.Result) (*mat.Dense, []string, error) {
	if res.Output != nil {
		return nil, nil, errors.New("project: a components release has no mean to centre the rows on")
	}
	if res.Components == nil {
		return nil, nil, fmt.Errorf("project: the result has no components (analysis %s)", res.Analysis)
	}
	coords := res.Components.ProjectBatch(s.rows.z)
	if len(s.sch.Classes) == 0 {
		return coords, nil, nil
	}
	labels := make([]string, len(s.rows.y))
	for i, y := range s.rows.y {
		labels[i] = s.sch.Classes[y]
	}
	return coords, labels, nil
}
