package owner

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
)

// How an owner learns of its jobs: it holds the proxy's watch of the jobs
// that name it (WatchOwnerJobs), which announces a job as soon as it is
// created and again when it is sealed and when it ends. It sends nothing
// but the cursor the proxy gave it, so that a reconnect (after a network
// fault or a restart of the proxy) resumes where the last stream stopped.
// A new job's announcement comes with the owner's ticket of it, which the
// owner would otherwise fetch (GetJob).
// While the watch is up, the owner does not poll: every PollInterval it
// goes over the open jobs the watch told it of, from memory, to retry what
// failed (a ticket it could not fetch, a decline it could not report).
// When the watch is down or refused (the proxy serves a bounded number of
// them), the owner polls ListJobs every PollInterval, as it did before
// watches existed.

// watchPause bounds the pauses between attempts to open the watch: short
// after a fault, long after a refusal (the proxy has no room for more
// watches, or does not serve them), while the owner polls.
var (
	watchPause   = transport.Backoff{Initial: 100 * time.Millisecond, Max: 15 * time.Second}
	refusedPause = transport.Backoff{Initial: 30 * time.Second, Max: 5 * time.Minute}
)

// watchState is the owner's view of its watch. Safe for concurrent use.
type watchState struct {
	mu   sync.Mutex
	up   bool
	open map[string]*fedpcav1.JobStatus // the open jobs the watch told of
	// tickets are the watch's tickets of open jobs not yet taken part in.
	tickets map[string]*fedpcav1.GetJobResponse
	// kick asks the run loop to poll now (the watch was refused or lost).
	kick chan struct{}
}

func newWatchState() *watchState {
	return &watchState{open: map[string]*fedpcav1.JobStatus{}, tickets: map[string]*fedpcav1.GetJobResponse{}, kick: make(chan struct{}, 1)}
}

// maxTickets bounds the tickets held for jobs the watch has not listed yet.
const maxTickets = 1024

// keepTicket holds a ticket the watch sent with a job's announcement, until
// the owner takes part (takeTicket) or the job is no longer open.
func (w *watchState) keepTicket(t *fedpcav1.JobInfo, proof *fedpcav1.OwnerProof) {
	id := t.GetStatus().GetJobId()
	if !job.ValidJobID(id) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.tickets) < maxTickets {
		w.tickets[id] = &fedpcav1.GetJobResponse{Job: t, OwnerProof: proof}
	}
}

// takeTicket returns, and forgets, the watch's ticket of job id (nil when
// it sent none: the owner fetches it).
func (w *watchState) takeTicket(id string) *fedpcav1.GetJobResponse {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.tickets[id]
	delete(w.tickets, id)
	return t
}

// pruneTickets forgets the tickets of jobs the watch does not list as open.
func (w *watchState) pruneTickets() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.tickets {
		if _, ok := w.open[id]; !ok {
			delete(w.tickets, id)
		}
	}
}

// jobs returns the open jobs the watch told of, when it is up.
func (w *watchState) jobs() ([]*fedpcav1.JobStatus, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.up {
		return nil, false
	}
	return slices.Collect(maps.Values(w.open)), true
}

// learn records statuses from the watch; a snapshot replaces the open jobs.
func (w *watchState) learn(sts []*fedpcav1.JobStatus, snapshot bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if snapshot {
		clear(w.open)
	}
	for _, st := range sts {
		if isEnded(st.GetState()) {
			delete(w.open, st.GetJobId())
		} else {
			w.open[st.GetJobId()] = st
		}
	}
}

// setUp records whether the watch is up; a watch lost asks for a poll.
func (w *watchState) setUp(up bool) {
	w.mu.Lock()
	lost := w.up && !up
	w.up = up
	w.mu.Unlock()
	if lost {
		w.pollNow()
	}
}

// pollNow asks the run loop to poll now.
func (w *watchState) pollNow() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// watch holds the watch until ctx ends, reconnecting with backoff and the
// last cursor.
func (o *Owner) watch(ctx context.Context, wg *sync.WaitGroup) {
	var cursor string
	fault, refused := watchPause, refusedPause
	for ctx.Err() == nil {
		got, err := o.watchOnce(ctx, wg, &cursor)
		o.watching.setUp(false)
		o.m.watching.Set(0)
		if ctx.Err() != nil {
			return
		}
		if got {
			fault.Reset()
			refused.Reset()
		}
		pause := fault.Next()
		switch status.Code(err) {
		case codes.ResourceExhausted, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
			pause = refused.Next()
			pause += time.Duration(rand.Int64N(int64(pause))) // spread owners refused together
			o.watching.pollNow()
			o.log.Info("the proxy does not serve this owner a job watch now; polling", "poll", o.cfg.PollInterval, "retry_in", pause.Round(time.Second), "error", transport.Message(err))
		default:
			o.log.Debug("job watch interrupted; reconnecting", "retry_in", pause, "error", err)
		}
		if transport.Sleep(ctx, pause) != nil {
			return
		}
	}
}

// watchOnce runs one watch stream until it fails; got reports whether it
// received anything.
func (o *Owner) watchOnce(ctx context.Context, wg *sync.WaitGroup, cursor *string) (got bool, err error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := o.proxy.WatchOwnerJobs(wctx, &fedpcav1.WatchOwnerJobsRequest{Cursor: *cursor})
	if err != nil {
		return false, err
	}
	var snap []*fedpcav1.JobStatus
	for {
		r, err := stream.Recv()
		if err != nil {
			return got, err
		}
		if !got {
			got = true
			o.watching.setUp(true)
			o.m.watching.Set(1)
			o.log.Debug("job watch up", "resumed", !r.GetSnapshot())
		}
		if r.GetTicket() != nil {
			o.watching.keepTicket(r.GetTicket(), r.GetOwnerProof())
		}
		sts := o.validJobs(r.GetJobs())
		if r.GetSnapshot() {
			// Dispatched whole, once complete: a pending job missing from
			// it has ended and is looked up.
			if snap = append(snap, sts...); r.GetCursor() == "" {
				continue
			}
			sts, snap = snap, nil
		}
		o.watching.learn(sts, r.GetSnapshot())
		if r.GetCursor() != "" {
			o.watching.pruneTickets() // a ticket comes before or with its job's status
		}
		o.dispatch(ctx, wg, sts, r.GetSnapshot())
		if r.GetCursor() != "" {
			*cursor = r.GetCursor()
		}
	}
}

// validJobs drops the statuses whose job ID is malformed.
func (o *Owner) validJobs(sts []*fedpcav1.JobStatus) []*fedpcav1.JobStatus {
	out := sts[:0:0]
	for _, st := range sts {
		if !job.ValidJobID(st.GetJobId()) {
			o.log.Warn("the proxy names a job with a malformed ID; ignored", "job", fmt.Sprintf("%.80q", st.GetJobId()))
			continue
		}
		out = append(out, st)
	}
	return out
}

// dispatch handles each job in its own goroutine (see spawn). When sts are
// all the open jobs that name this owner (full), the jobs it has a pending
// part in that are not among them have ended and are looked up one by one,
// so that their end is settled.
func (o *Owner) dispatch(ctx context.Context, wg *sync.WaitGroup, sts []*fedpcav1.JobStatus, full bool) {
	listed := map[string]bool{}
	for _, st := range sts {
		listed[st.GetJobId()] = true
		o.spawn(ctx, wg, st.GetJobId(), func() { o.handle(ctx, st) })
	}
	if !full {
		return
	}
	for _, id := range o.pending() {
		if !listed[id] {
			o.spawn(ctx, wg, id, func() { o.lookUp(ctx, id) })
		}
	}
}

// lookUp asks the proxy for a job's status and handles it.
func (o *Owner) lookUp(ctx context.Context, id string) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	r, err := o.proxy.GetJob(cctx, &fedpcav1.GetJobRequest{JobId: id, Brief: true})
	cancel()
	if err != nil {
		o.log.Warn("cannot look up job", "job", id[:16], "error", transport.Message(err))
		return
	}
	if r.GetJob().GetStatus().GetJobId() != id {
		o.log.Warn("the proxy answered for another job; ignored", "job", id[:16])
		return
	}
	o.handle(ctx, r.GetJob().GetStatus())
}

func isEnded(s fedpcav1.JobState) bool {
	return s == fedpcav1.JobState_JOB_STATE_DONE || s == fedpcav1.JobState_JOB_STATE_FAILED
}
