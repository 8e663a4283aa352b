package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fedpca/fedpca/csp"
	"github.com/fedpca/fedpca/owner"
	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/sim"
	"github.com/fedpca/fedpca/sim/faultnet"
	"github.com/fedpca/fedpca/transport"
)

// waitTrigger waits for an event's trigger; false if the job ended (or
// was never created) first.
func (ep *episode) waitTrigger(ctx context.Context, tr trigger, jr *jobRun, stepStart time.Time) bool {
	if tr.kind == "time" {
		return faultnet.Sleep(ctx, time.Until(stepStart.Add(tr.after))) == nil
	}
	select {
	case <-jr.idReady:
	case <-ctx.Done():
		return false
	}
	id := jr.id()
	if id == "" {
		return false
	}
	for ctx.Err() == nil {
		if st, err := ep.jobStatus(ctx, id, true); err == nil {
			switch {
			case ended(st.GetState()):
				return false
			case tr.kind == "uploads" && int(st.GetOwnersUploaded()) >= tr.uploads:
				return true
			case tr.kind == "switching" && st.GetState() == fedpcav1.JobState_JOB_STATE_SWITCHING:
				return true
			}
		}
		_ = faultnet.Sleep(ctx, 5*time.Millisecond)
	}
	return false
}

// inject applies one event when its trigger fires, and undoes it (restart,
// heal) after its down time.
func (ep *episode) inject(ctx context.Context, e event, jr *jobRun, stepStart time.Time) {
	if !ep.waitTrigger(ctx, e.when, jr, stepStart) {
		return
	}
	// The down time runs even if the step's context ends: every crashed
	// node must come back for the next step.
	pause := func() { time.Sleep(e.down) }
	switch e.kind {
	case FaultCrashProxy:
		ep.crashProxy(ctx, e, pause)
	case FaultCrashCSP:
		ep.crashCSP(ctx, e, pause)
	case FaultCrashOwner:
		ep.crashOwner(e, pause)
	case FaultDiskFull:
		free, err := fillDisk(ep.proxyDisk)
		if err != nil {
			ep.fault("disk_full_failed", fmt.Sprintf("%s(failed: %v)", e, err))
			return
		}
		ep.fault(e.kind, e.String())
		pause()
		if err := free(); err != nil {
			ep.restartViolation("free the proxy's disk: %v", err)
		}
	case FaultPartitionCommittee, FaultPartitionOwner, FaultPartitionUser:
		proxyNode := []string{"proxy/proxy"}
		var other []string
		switch e.kind {
		case FaultPartitionCommittee:
			for i := range ep.plan.CSPs {
				other = append(other, "csp/"+sim.CSPID(i))
			}
		case FaultPartitionOwner:
			other = []string{"owner/" + ownerName(e.target)}
		default:
			other = []string{"user/analyst"}
		}
		ep.fault(e.kind, e.String())
		ep.net.Partition(proxyNode, other)
		pause()
		ep.net.Heal(proxyNode, other)
	}
}

// restartViolation records a restart-consistency violation of this step.
func (ep *episode) restartViolation(format string, args ...any) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.restart = append(ep.restart, fmt.Sprintf(format, args...))
}

// restartChecked counts restart-consistency comparisons.
func (ep *episode) restartChecked(n int) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	ep.rchecks += n
}

// proxySnapshot is what the proxy reports about every job to a user: who
// uploaded once a job is sealed (an open job's status names no one, only
// counts at the proxy's ticks; the owners' acknowledgements stand for its
// uploads in the crash check).
type proxySnapshot map[string]jobSnap

type jobSnap struct {
	state    fedpcav1.JobState
	uploaded []string
}

func (ep *episode) snapshotProxy(ctx context.Context, patience time.Duration) (proxySnapshot, error) {
	deadline := time.Now().Add(patience)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		r, err := ep.obs.ListJobs(cctx, &fedpcav1.ListJobsRequest{IncludeEnded: true})
		cancel()
		if err == nil {
			out := proxySnapshot{}
			for _, info := range r.GetJobs() {
				st := info.GetStatus()
				out[st.GetJobId()] = jobSnap{state: st.GetState(), uploaded: st.GetUploadedOwners()}
			}
			return out, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stateRank(s fedpcav1.JobState) int {
	switch s {
	case fedpcav1.JobState_JOB_STATE_OPEN:
		return 0
	case fedpcav1.JobState_JOB_STATE_SWITCHING:
		return 1
	}
	return 2
}

func (ep *episode) crashProxy(ctx context.Context, e event, pause func()) {
	before, err := ep.snapshotProxy(ctx, 2*time.Second)
	if err != nil {
		before = nil // the proxy is unreachable anyway; crash it without a record
	}
	kind := FaultCrashProxy
	if ep.plan.Process {
		kind = FaultKillProxy
	}
	ep.fault(kind, strings.Replace(e.String(), FaultCrashProxy, kind, 1))
	if err := ep.cl.CrashProxy(); err != nil {
		ep.restartViolation("proxy crash: %v", err)
	}
	acked := map[string][]string{}
	for id := range before {
		acked[id] = ep.ackedOwners(id)
	}
	pause()
	if err := retryStart(ep.cl.RestartProxy); err != nil {
		ep.restartViolation("proxy restart: %v", err)
		return
	}
	after, err := ep.snapshotProxy(context.WithoutCancel(ctx), 30*time.Second)
	if err != nil {
		ep.restartViolation("the restarted proxy does not answer: %v", err)
		return
	}
	ep.restartChecked(1 + len(before))
	for id, b := range before {
		a, ok := after[id]
		switch {
		case !ok:
			ep.restartViolation("job %s… lost by the proxy's restart", id[:12])
		case stateRank(a.state) < stateRank(b.state) || (stateRank(b.state) == 2 && a.state != b.state):
			ep.restartViolation("job %s… was %s before the proxy's crash, %s after", id[:12], b.state, a.state)
		default:
			for _, o := range append(slices.Clone(b.uploaded), acked[id]...) {
				if !slices.Contains(a.uploaded, o) && !ep.included(ctx, id, o) {
					ep.restartViolation("job %s…: upload of %s included (or acknowledged) before the proxy's crash, missing after", id[:12], o)
				}
			}
		}
	}
}

// included asks the proxy, as the owner, whether its upload is in the job's
// sum: an open job names no one who uploaded to a user (only counts at its
// ticks), but tells each owner about itself.
func (ep *episode) included(ctx context.Context, id, owner string) bool {
	oid := transport.Identity{Role: transport.RoleOwner, ID: owner}
	conn, err := ep.cl.DialerAs(oid, "observer", false).Dial(ep.cl.ProxyAddr(), transport.Identity{Role: transport.RoleProxy})
	if err != nil {
		return false
	}
	defer conn.Close()
	for range 50 {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		r, err := fedpcav1.NewProxyServiceClient(conn).GetJob(cctx, &fedpcav1.GetJobRequest{JobId: id, Brief: true})
		cancel()
		if err == nil {
			return r.GetJob().GetStatus().GetCallerIncluded()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// retryStart restarts a node, retrying a few times (a port may still be
// held for a moment).
func retryStart(start func() error) error {
	var err error
	for range 20 {
		if err = start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func (ep *episode) crashCSP(ctx context.Context, e event, pause func()) {
	before, err := ep.cl.CSP(e.target).Audit()
	if err != nil {
		ep.restartViolation("%s audit before its crash: %v", sim.CSPID(e.target), err)
	}
	ep.fault(FaultCrashCSP, e.String())
	if err := ep.cl.CrashCSP(e.target); err != nil {
		ep.restartViolation("%s crash: %v", sim.CSPID(e.target), err)
	}
	pause()
	if err := retryStart(func() error { return ep.cl.StartCSP(e.target) }); err != nil {
		ep.restartViolation("%s restart: %v", sim.CSPID(e.target), err)
		return
	}
	after, err := ep.cl.CSP(e.target).Audit()
	if err != nil {
		ep.restartViolation("%s audit after its restart: %v", sim.CSPID(e.target), err)
		return
	}
	ep.restartChecked(1 + len(before))
	for _, b := range before {
		i := slices.IndexFunc(after, func(a csp.SwitchRecord) bool { return a.JobID == b.JobID })
		if i < 0 || after[i].Digest != b.Digest || after[i].Owners != b.Owners {
			ep.restartViolation("%s: switch record of job %s… changed or lost by its restart", sim.CSPID(e.target), b.JobID[:12])
		}
	}
}

func (ep *episode) crashOwner(e event, pause func()) {
	id := ownerName(e.target)
	o := ep.cl.Owner(id)
	ledgerBefore, err1 := o.Ledger(ep.sch.ID)
	recsBefore, err2 := o.JobRecords()
	if err := errors.Join(err1, err2); err != nil {
		ep.restartViolation("%s state before its crash: %v", id, err)
	}
	ep.fault(FaultCrashOwner, e.String())
	if err := ep.cl.CrashOwner(id); err != nil {
		ep.restartViolation("%s crash: %v", id, err)
	}
	pause()
	if err := ep.cl.RestartOwner(id); err != nil {
		ep.restartViolation("%s restart: %v", id, err)
		return
	}
	o = ep.cl.Owner(id)
	ledgerAfter, err1 := o.Ledger(ep.sch.ID)
	recsAfter, err2 := o.JobRecords()
	if err := errors.Join(err1, err2); err != nil {
		ep.restartViolation("%s state after its restart: %v", id, err)
		return
	}
	ep.restartChecked(1 + len(ledgerBefore) + len(recsBefore))
	for _, b := range ledgerBefore {
		i := slices.IndexFunc(ledgerAfter, func(a owner.LedgerEntry) bool { return a.Job == b.Job })
		if i < 0 || !owner.LedgerReaches(b.State, ledgerAfter[i].State) || ledgerAfter[i].Rho != b.Rho {
			got := "missing"
			if i >= 0 {
				got = ledgerAfter[i].State
			}
			ep.restartViolation("%s: ledger entry of job %s… was %s before its crash, %s after", id, b.Job[:12], b.State, got)
		}
	}
	for _, b := range recsBefore {
		i := slices.IndexFunc(recsAfter, func(a owner.JobRecord) bool { return a.Job == b.Job })
		if i < 0 || !b.State.Reaches(recsAfter[i].State) {
			got := owner.Part("missing")
			if i >= 0 {
				got = recsAfter[i].State
			}
			ep.restartViolation("%s: its part in job %s… was %s before its crash, %s after", id, b.Job[:12], b.State, got)
		}
	}
}
