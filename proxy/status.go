package proxy

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
)

// The status page. Config.StatusListener serves, for the deployment's
// operators:
//
//	/                  the jobs, the committee's health and the owners' budgets (HTML)
//	/jobs/{id}         one job with every owner (HTML)
//	/status.json       the same as JSON (?job=ID: that job only)
//
// On a loopback address the page is plain HTTP; on any other address it is
// HTTPS with the proxy's certificate and only clients with a certificate
// from the deployment's CA are served (transport.ServeOperator). It shows
// public information only: job parameters and states, who uploaded, the
// budgets the owners reported, whether members answer; never keys,
// statistics, ciphertexts or masks. A request takes a snapshot of the state
// (each lock held only to copy a record) and renders after, so the page
// never holds a lock while it renders and never delays an upload.

// Status is the proxy's public state as the status page shows it.
type Status struct {
	Proxy     string          `json:"proxy"`
	Generated time.Time       `json:"generated"`
	Committee CommitteeStatus `json:"committee"`
	Jobs      []JobStatus     `json:"jobs"`
	Budgets   []BudgetStatus  `json:"budgets"`
}

// CommitteeStatus is the committee key and its members' health.
type CommitteeStatus struct {
	// Ready is set once the committee key is established (key ceremony done).
	Ready          bool      `json:"ready"`
	KeyFingerprint string    `json:"key_fingerprint,omitempty"`
	CeremonyID     string    `json:"ceremony_id,omitempty"`
	KeySince       time.Time `json:"key_since,omitzero"`
	// Threshold members of Size take part in a key switch; Healthy is how
	// many answered the last check holding the committee key.
	Threshold int            `json:"threshold"`
	Size      int            `json:"size"`
	Healthy   int            `json:"healthy"`
	Members   []MemberStatus `json:"members"`
}

// MemberStatus is what the proxy last learnt from a committee member.
type MemberStatus struct {
	ID    string `json:"id"`
	Point int    `json:"point"`
	Addr  string `json:"addr"`
	// Reachable: the member answered the last status check; HoldsKey: with
	// the committee key.
	Reachable bool `json:"reachable"`
	HoldsKey  bool `json:"holds_key"`
	// LastContact is the last answer, LastCheck the last attempt, Error the
	// last attempt's error, Switches the key switches the member reported.
	LastContact time.Time `json:"last_contact,omitzero"`
	LastCheck   time.Time `json:"last_check,omitzero"`
	Error       string    `json:"error,omitempty"`
	Switches    uint64    `json:"switches"`
}

// JobStatus is a job's public parameters and progress.
type JobStatus struct {
	ID string `json:"id"`
	// State is open, switching, done or failed; Reason says what the job
	// waits for, or why it failed.
	State     string  `json:"state"`
	Reason    string  `json:"reason"`
	Analysis  string  `json:"analysis"`
	K         int     `json:"k"`
	Dataset   string  `json:"dataset"`
	User      string  `json:"user"`
	Epsilon   float64 `json:"epsilon"`
	Delta     float64 `json:"delta"`
	NoNoise   bool    `json:"no_noise,omitempty"`
	NoisePlan string  `json:"noise_plan"`
	Tolerate  int     `json:"tolerate"`
	// MinOwners uploads are needed by the deadline.
	MinOwners      int `json:"min_owners"`
	OwnersExpected int `json:"owners_expected"`
	OwnersUploaded int `json:"owners_uploaded"`
	OwnersDeclined int `json:"owners_declined"`
	// Owners are the owners the job names, each with its answer: for a
	// running job, and for an ended one only when it is asked for by ID
	// (/jobs/ID, /status.json?job=ID), since an ended job's owners are
	// read from the store.
	Owners   []OwnerStatus `json:"owners,omitempty"`
	Created  time.Time     `json:"created"`
	Updated  time.Time     `json:"updated"`
	Deadline time.Time     `json:"deadline"`
	// AgeSeconds is the time since creation; DeadlineInSeconds the time left
	// until the deadline (negative once it passed).
	AgeSeconds        float64 `json:"age_seconds"`
	DeadlineInSeconds float64 `json:"deadline_in_seconds"`
	// CSPs are the members chosen for the key switch at sealing.
	CSPs    []string `json:"csps,omitempty"`
	Timings Timings  `json:"timings"`
}

// Timings are a job's phases as the proxy measured them (seconds).
type Timings struct {
	UploadWindow float64 `json:"upload_window_seconds"`
	Aggregate    float64 `json:"aggregate_seconds"`
	Seal         float64 `json:"seal_seconds"`
	KeySwitch    float64 `json:"key_switch_seconds"`
}

// Owner states in a job.
const (
	OwnerUploaded = "uploaded"
	OwnerDeclined = "declined"
	OwnerWaiting  = "waiting" // the job is open and the owner has not answered
	OwnerMissing  = "missing" // the job closed without the owner's upload
)

// OwnerStatus is one owner named by a job.
type OwnerStatus struct {
	ID    string    `json:"id"`
	State string    `json:"state"`
	At    time.Time `json:"at,omitzero"`
	// Reason is a decliner's code (job.Decline) and ReasonText its public
	// description with what the owner said besides the code (a policy
	// limit, a schema field: job.DeclineDetail), all it says of a decline.
	Reason     string `json:"reason,omitempty"`
	ReasonText string `json:"reason_text,omitempty"`
}

// BudgetStatus is an owner's privacy budget for a dataset (zCDP rho), as
// the owner last reported it; the owner's own ledger is the one that
// decides.
type BudgetStatus struct {
	Owner        string  `json:"owner"`
	Dataset      string  `json:"dataset"`
	RhoBudget    float64 `json:"rho_budget"`
	RhoSpent     float64 `json:"rho_spent"`
	RhoReserved  float64 `json:"rho_reserved"`
	RhoRemaining float64 `json:"rho_remaining"`
	// Delta is the owner's budget delta (0: not reported); the Epsilon
	// fields are at that delta, the unit operators set budgets in: the
	// owner's own accounting (discrete corrections included; spent and
	// reserved certified together), or, from an owner that reports rho
	// alone, the rho amounts converted. EpsilonSpentAndReserved is what
	// the ledger admits a further job against (it was epsilon_reserved,
	// which it is not: it counts what is spent too), EpsilonRemaining the
	// epsilon of a further job with the remaining rho. Display only: the
	// owner's ledger decides.
	Delta                   float64   `json:"delta,omitempty"`
	EpsilonBudget           float64   `json:"epsilon_budget,omitempty"`
	EpsilonSpent            float64   `json:"epsilon_spent,omitempty"`
	EpsilonSpentAndReserved float64   `json:"epsilon_spent_and_reserved,omitempty"`
	EpsilonRemaining        float64   `json:"epsilon_remaining,omitempty"`
	Reported                time.Time `json:"reported"`
}

// memberHealth is what the proxy last learnt from a member (p.mu guards
// the map that holds it).
type memberHealth struct {
	checked, contact time.Time
	err              string
	keyFP            string
	switches         uint64
}

// The states of a member's health that the proxy logs a change of.
const (
	memberUp      = "up"
	memberDown    = "down"
	memberKeyless = "up without the committee key"
)

// state is the member's health as of its last check: down (no answer), up
// without the committee key (it answered holding another key, or none),
// or up; "" before the first check.
func (h memberHealth) state(cmt *committeeRecord) string {
	switch {
	case h.checked.IsZero():
		return ""
	case h.err != "":
		return memberDown
	case cmt != nil && h.keyFP != cmt.Fingerprint:
		return memberKeyless
	}
	return memberUp
}

// recordHealth notes the outcome of a status check of member id, and logs
// the member's health when it changed (once per change, jobs or not: a
// member that goes down between jobs is seen in the log, not only at the
// next key switch).
func (p *Proxy) recordHealth(id string, s *fedpcav1.GetStatusResponse, err error) {
	now := time.Now().UTC()
	p.mu.Lock()
	h := p.health[id]
	was := h.state(p.cmt)
	h.checked = now
	if err != nil {
		h.err = status.Convert(err).Message()
	} else {
		h.contact, h.err, h.keyFP, h.switches = now, "", s.GetCommitteeKeyFingerprint(), s.GetSwitches()
	}
	p.health[id] = h
	is := h.state(p.cmt)
	p.mu.Unlock()
	if is == was {
		return
	}
	log := p.log.With("member", id, "was", was)
	switch is {
	case memberDown:
		log.Warn("committee member down", "error", h.err)
	case memberKeyless:
		log.Warn("committee member up without the committee key", "key_fingerprint", h.keyFP)
	default:
		log.Info("committee member up", "switches", h.switches)
	}
}

// watchCommittee checks the members' health every HealthInterval, so that
// the status page and the metrics show it when nothing else talks to them.
func (p *Proxy) watchCommittee(ctx context.Context) {
	t := time.NewTicker(p.cfg.HealthInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.memberStatus(ctx, false)
		}
	}
}

// Status returns a snapshot of the proxy's public state: every job, with
// each owner's answer for the running jobs and for the job whose ID is
// given, if any (an ended job's owners are read from the store: one job at
// a time, however many jobs the proxy has run). Each lock is held only to
// copy a job's record (and, for the owner lists, its answers).
func (p *Proxy) Status(jobID string) *Status {
	st := p.overview(true, jobID)
	st.Budgets = p.budgetStatuses()
	return st
}

// overview is the status without the owners' budgets: the jobs (with each
// owner's answer when owners is set, for the running jobs and the job named
// full; the metrics need counts only) and the committee.
func (p *Proxy) overview(owners bool, full string) *Status {
	now := time.Now().UTC()
	p.mu.Lock()
	jobs := slices.Collect(maps.Values(p.jobs))
	cmt := p.cmt
	health := maps.Clone(p.health)
	p.mu.Unlock()

	st := &Status{Proxy: p.cfg.ID, Generated: now, Committee: p.committeeStatus(cmt, health)}
	for _, j := range jobs {
		j.mu.Lock()
		rec := j.rec
		var list []string
		var answered map[string]OwnerStatus
		var err error
		listed := owners && (!ended(rec.State) || j.id == full)
		if listed {
			list, answered, err = j.answered()
		}
		j.mu.Unlock()
		if err != nil {
			p.log.Warn("status: cannot read a job's owners", "job", j.id[:16], "error", err)
		}
		st.Jobs = append(st.Jobs, jobStatus(j, &rec, list, answered, now, listed))
	}
	slices.SortFunc(st.Jobs, func(a, b JobStatus) int {
		if ra, rb := stateRank(a.State), stateRank(b.State); ra != rb {
			return ra - rb
		}
		return b.Created.Compare(a.Created) // newest first
	})
	return st
}

// budgetStatuses are the owners' budget reports as the status shows them,
// with epsilon at each owner's delta next to rho.
func (p *Proxy) budgetStatuses() []BudgetStatus {
	var out []BudgetStatus
	for _, b := range p.budgets() {
		bs := BudgetStatus{Owner: b.Owner, Dataset: b.Dataset, RhoBudget: b.RhoBudget, RhoSpent: b.RhoSpent,
			RhoReserved: b.RhoReserved, RhoRemaining: b.remaining(), Reported: b.At, Delta: b.Delta}
		switch {
		case b.EpsilonBudget > 0:
			bs.EpsilonBudget, bs.EpsilonSpent, bs.EpsilonSpentAndReserved = b.EpsilonBudget, b.EpsilonSpent, b.EpsilonSpentAndReserved
			bs.EpsilonRemaining = dp.BudgetEpsilon(max(bs.RhoRemaining, 0), b.Delta)
		case b.Delta > 0 && b.Delta < 1:
			bs.EpsilonBudget = dp.BudgetEpsilon(bs.RhoBudget, b.Delta)
			bs.EpsilonSpent = dp.BudgetEpsilon(bs.RhoSpent, b.Delta)
			bs.EpsilonSpentAndReserved = dp.BudgetEpsilon(bs.RhoSpent+bs.RhoReserved, b.Delta)
			bs.EpsilonRemaining = dp.BudgetEpsilon(max(bs.RhoRemaining, 0), b.Delta)
		}
		out = append(out, bs)
	}
	slices.SortFunc(out, func(a, b BudgetStatus) int {
		return strings.Compare(a.Owner+"\x00"+a.Dataset, b.Owner+"\x00"+b.Dataset)
	})
	return out
}

func (p *Proxy) committeeStatus(cmt *committeeRecord, health map[string]memberHealth) CommitteeStatus {
	cs := CommitteeStatus{Ready: cmt != nil, Threshold: p.cfg.Threshold, Size: len(p.cfg.Committee)}
	if cmt != nil {
		cs.KeyFingerprint, cs.CeremonyID, cs.KeySince = cmt.Fingerprint, cmt.CeremonyID, cmt.At
	}
	for i, m := range p.cfg.Committee {
		h := health[m.ID]
		ms := MemberStatus{ID: m.ID, Point: i + 1, Addr: m.Addr, LastContact: h.contact, LastCheck: h.checked, Error: h.err, Switches: h.switches,
			Reachable: !h.contact.IsZero() && h.err == ""}
		ms.HoldsKey = ms.Reachable && cmt != nil && h.keyFP == cmt.Fingerprint
		if ms.HoldsKey {
			cs.Healthy++
		}
		cs.Members = append(cs.Members, ms)
	}
	return cs
}

// answered returns the job's owners and the answers of those that uploaded
// or declined; j.mu must be held.
func (j *jobState) answered() ([]string, map[string]OwnerStatus, error) {
	owners, uploads, declines, err := j.answers()
	if err != nil {
		return nil, nil, err
	}
	out := make(map[string]OwnerStatus, len(uploads)+len(declines))
	for _, u := range uploads {
		out[u.Owner] = OwnerStatus{ID: u.Owner, State: OwnerUploaded, At: u.At}
	}
	for _, d := range declines {
		out[d.Owner] = OwnerStatus{ID: d.Owner, State: OwnerDeclined, At: d.At, Reason: d.Reason.String(), ReasonText: d.text(j.sch)}
	}
	return job.OwnerIDs(owners), out, nil
}

// jobStatus builds a job's status from a copy of its record, its owner list
// and its owners' answers.
func jobStatus(j *jobState, rec *jobRecord, list []string, answered map[string]OwnerStatus, now time.Time, owners bool) JobStatus {
	s := j.spec
	js := JobStatus{ID: j.id, State: stateLabel(rec.State), Reason: rec.Reason, Analysis: s.Analysis, K: s.K, Dataset: s.Dataset, User: s.User,
		Epsilon: s.Epsilon, Delta: s.Delta, NoNoise: s.NoNoise, NoisePlan: s.NoisePlan, Tolerate: s.Tolerate,
		MinOwners: s.MinOwners, OwnersExpected: s.NumOwners, OwnersUploaded: rec.Uploaded, OwnersDeclined: rec.Declined,
		Created: rec.Created, Updated: rec.Updated, Deadline: j.closes.UTC(),
		AgeSeconds: now.Sub(rec.Created).Seconds(), DeadlineInSeconds: j.closes.Sub(now).Seconds(), CSPs: rec.CSPs,
		Timings: Timings{UploadWindow: rec.Timings.UploadWindow, Aggregate: rec.Timings.Aggregate, Seal: rec.Timings.Seal, KeySwitch: rec.Timings.KeySwitch}}
	if !owners {
		return js
	}
	absent := OwnerWaiting
	if rec.State != fedpcav1.JobState_JOB_STATE_OPEN {
		absent = OwnerMissing
	}
	js.Owners = make([]OwnerStatus, 0, s.NumOwners)
	for _, o := range list {
		ost, ok := answered[o]
		if !ok {
			ost = OwnerStatus{ID: o, State: absent}
		}
		js.Owners = append(js.Owners, ost)
	}
	// Those the job waits for first, then by name.
	slices.SortStableFunc(js.Owners, func(a, b OwnerStatus) int { return ownerRank(a.State) - ownerRank(b.State) })
	return js
}

func stateLabel(s fedpcav1.JobState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "JOB_STATE_"))
}

func stateRank(s string) int {
	return map[string]int{"open": 0, "switching": 1, "failed": 2, "done": 3}[s]
}

func ownerRank(s string) int {
	return map[string]int{OwnerWaiting: 0, OwnerMissing: 1, OwnerDeclined: 2, OwnerUploaded: 3}[s]
}

//go:embed status/*
var statusFiles embed.FS

var statusTemplates = template.Must(template.New("").Funcs(template.FuncMap{
	"short":    func(id string) string { return id[:min(12, len(id))] },
	"ago":      func(t, now time.Time) string { return humanDuration(now.Sub(t)) + " ago" },
	"until":    untilText,
	"stamp":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"rho":      func(v float64) string { return fmt.Sprintf("%.4g", v) },
	"num":      func(v float64) string { return strings.Replace(strconv.FormatFloat(v, 'g', -1, 64), "e-0", "e-", 1) },
	"seconds":  func(v float64) string { return humanDuration(time.Duration(v * float64(time.Second))) },
	"role":     roleID,
	"limit":    func(o []OwnerStatus, n int) []OwnerStatus { return o[:min(n, len(o))] },
	"sub":      func(a, b int) int { return a - b },
	"fraction": func(a, b float64) float64 { return a / max(b, 1e-300) },
}).ParseFS(statusFiles, "status/*.html"))

// roleID is "role/id" of a SPIFFE ID of the one-CA layout's domain, and the
// whole SPIFFE ID of another organisation's (whose domain says who issued
// it).
func roleID(id string) string {
	if in, err := transport.ParseIdentity(id); err == nil && in.Domain() == transport.TrustDomain {
		return in.Short()
	}
	return id
}

// ownersShown bounds the owners listed per job on the overview page (the
// job's own page lists them all).
const ownersShown = 40

// untilText says how long until t, or how long ago it passed.
func untilText(t, now time.Time) string {
	if d := t.Sub(now); d >= 0 {
		return "in " + humanDuration(d)
	}
	return "passed " + humanDuration(now.Sub(t)) + " ago"
}

// humanDuration is a duration to two units: "45s", "4m 10s", "2h 05m", "3d 4h".
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm %02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}

// page is what the templates render.
type page struct {
	*Status
	Job         *JobStatus // the job page's job
	OwnersShown int
	Counts      map[string]int // jobs by state
	// Awaited is the uploads the open jobs still wait for, Uploaded those
	// they have.
	Awaited, Uploaded int
}

// matchJob resolves a job ID or a unique prefix of it (job.MatchID).
func (p *Proxy) matchJob(prefix string) (string, error) {
	p.mu.Lock()
	ids := slices.Sorted(maps.Keys(p.jobs))
	p.mu.Unlock()
	return job.MatchID(ids, prefix)
}

// StatusHandler returns the status page's handler (what StatusListener
// serves; tests mount it on httptest servers).
func (p *Proxy) StatusHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		p.render(w, "index.html", p.page(p.Status(""), ""))
	})
	mux.HandleFunc("GET /jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, err := p.matchJob(r.PathValue("id"))
		if err != nil {
			http.Error(w, "no such job: "+err.Error(), http.StatusNotFound)
			return
		}
		if id != r.PathValue("id") { // a prefix, as the CLI takes: the job's own page
			http.Redirect(w, r, "/jobs/"+id, http.StatusFound)
			return
		}
		pg := p.page(p.Status(id), id)
		if pg.Job == nil {
			http.Error(w, "no such job", http.StatusNotFound)
			return
		}
		p.render(w, "job.html", pg)
	})
	mux.HandleFunc("GET /status.json", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("job")
		st := p.Status(id)
		if id != "" {
			st.Jobs = slices.DeleteFunc(st.Jobs, func(j JobStatus) bool { return j.ID != id })
			if len(st.Jobs) == 0 {
				http.Error(w, "no such job", http.StatusNotFound)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			p.log.Debug("status json", "error", err)
		}
	})
	mux.HandleFunc("GET /status.css", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		b, _ := statusFiles.ReadFile("status/status.css")
		w.Write(b)
	})
	return mux
}

func (p *Proxy) page(st *Status, jobID string) *page {
	pg := &page{Status: st, OwnersShown: ownersShown, Counts: map[string]int{}}
	for i := range st.Jobs {
		pg.Counts[st.Jobs[i].State]++
		if st.Jobs[i].State == "open" {
			pg.Uploaded += st.Jobs[i].OwnersUploaded
			pg.Awaited += st.Jobs[i].OwnersExpected - st.Jobs[i].OwnersUploaded - st.Jobs[i].OwnersDeclined
		}
		if st.Jobs[i].ID == jobID {
			pg.Job = &st.Jobs[i]
		}
	}
	return pg
}

// render executes a template into a buffer first, so that an error is a
// clean 500 rather than half a page.
func (p *Proxy) render(w http.ResponseWriter, name string, pg *page) {
	var buf bytes.Buffer
	if err := statusTemplates.ExecuteTemplate(&buf, name, pg); err != nil {
		p.log.Error("status page", "template", name, "error", err)
		http.Error(w, "cannot render the status page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(buf.Bytes())
}
