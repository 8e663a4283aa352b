package proxy

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/transport"
)

// Owners' watches (WatchOwnerJobs).
//
// Every change of a job's state (its creation, sealing, end) takes the next
// number of one per-proxy sequence, in the same store transaction as the
// change (jobProgress.Seq), and is announced, in sequence order, to the
// watches of the owners the job names: one broadcaster fed by the job
// store's changes, not a stream polling the store. Uploads and declines
// change no state and are not announced (an owner learns of its own from
// the upload's answer), so the traffic of a job's watches is linear in its
// owners.
//
// A watch's cursor is the store's epoch and the last number it delivered.
// Since each job keeps the number of its last change, resuming after n is
// sending the current status of every job of the owner's numbered above n,
// from memory; the numbers are durable, so this holds across the proxy's
// restarts. A cursor of another store (or from the future: a store restored
// from a backup) gets a snapshot of the owner's open jobs instead.
//
// A stream's memory is bounded: the broadcaster never blocks on a stream;
// when a stream's queue is full it marks the stream lagged, and the stream
// resynchronises from its cursor (the same scan as a resume).

// ErrTooManyWatchers refuses a watch beyond Config.MaxWatchers.
var ErrTooManyWatchers = fmt.Errorf("%w: the proxy serves as many job watches as it may; poll ListJobs instead", ErrBusy)

// watchQueue is the number of announcements a stream may have pending
// before it is marked lagged and resynchronised.
const watchQueue = 16

// watchBatch is the most statuses sent in one message.
const watchBatch = 256

// announcement is a job's change of state, numbered seq.
type announcement struct {
	seq uint64
	job *jobState
}

// watcher is one owner's open stream.
type watcher struct {
	owner  string
	queue  chan announcement
	lagged atomic.Bool
}

// watchHub numbers the jobs' changes of state and announces them to the
// owners' watches. Safe for concurrent use. Lock order: p.mu, then a job's
// mu, then the hub's mu (sequence is called with them held); the hub never
// takes either.
type watchHub struct {
	max   int
	epoch string

	mu   sync.Mutex
	seq  uint64 // the last number given
	subs map[*watcher]struct{}
}

func newWatchHub(max int, epoch string) *watchHub {
	return &watchHub{max: max, epoch: epoch, subs: map[*watcher]struct{}{}}
}

// sequence applies a change of job j's state: apply makes it durable with
// the number it is given; once it succeeds, the change is announced. The
// changes are numbered and announced in the order they are applied.
func (h *watchHub) sequence(j *jobState, apply func(seq uint64) error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	seq := h.seq + 1
	if err := apply(seq); err != nil {
		return err
	}
	h.seq = seq
	for w := range h.subs {
		// (An archived job, whose owners are looked up in the store, no
		// longer changes state; a lookup that fails announces nothing.)
		if _, named, err := j.named(w.owner); err != nil || !named {
			continue
		}
		select {
		case w.queue <- announcement{seq: seq, job: j}:
		default:
			w.lagged.Store(true)
		}
	}
	return nil
}

// subscribe opens a watch for an owner and returns the sequence number it
// starts after (see mark), or ErrTooManyWatchers.
func (h *watchHub) subscribe(owner string) (*watcher, uint64, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) >= h.max {
		return nil, 0, ErrTooManyWatchers
	}
	w := &watcher{owner: owner, queue: make(chan announcement, watchQueue)}
	h.subs[w] = struct{}{}
	return w, h.seq, nil
}

func (h *watchHub) unsubscribe(w *watcher) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.subs, w)
}

// mark empties a lagged watcher's queue and returns the last number given:
// every change up to it is in the jobs' state, every later one will be
// queued.
func (h *watchHub) mark(w *watcher) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	w.lagged.Store(false)
	for len(w.queue) > 0 {
		<-w.queue
	}
	return h.seq
}

// streams returns the number of open watches.
func (h *watchHub) streams() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

func (h *watchHub) cursor(seq uint64) string { return h.epoch + "." + strconv.FormatUint(seq, 10) }

// resumeFrom parses a cursor: ok is false when the watch cannot resume
// from it (none, another store's, or ahead of this store) and takes a
// snapshot.
func (h *watchHub) resumeFrom(cursor string) (seq uint64, ok bool, err error) {
	if cursor == "" {
		return 0, false, nil
	}
	epoch, n, found := strings.Cut(cursor, ".")
	if !found || len(cursor) > 64 {
		return 0, false, bad("cursor: not a cursor this proxy sent")
	}
	if seq, err = strconv.ParseUint(n, 10, 64); err != nil {
		return 0, false, bad("cursor: not a cursor this proxy sent")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return seq, epoch == h.epoch && seq <= h.seq, nil
}

// WatchOwnerJobs implements fedpcav1.ProxyServiceServer.
func (p *Proxy) WatchOwnerJobs(req *fedpcav1.WatchOwnerJobsRequest, stream fedpcav1.ProxyService_WatchOwnerJobsServer) error {
	ctx := stream.Context()
	who := caller(ctx)
	if who.Role != transport.RoleOwner {
		return p.toStatus(fmt.Errorf("%w: only owners watch their jobs", ErrForbidden))
	}
	p.contacted(who)
	since, resume, err := p.hub.resumeFrom(req.GetCursor())
	if err != nil {
		return p.toStatus(err)
	}
	w, last, err := p.hub.subscribe(who.ID)
	if err != nil {
		p.m.watches.WithLabelValues("refused").Inc()
		return p.toStatus(err)
	}
	defer p.hub.unsubscribe(w)
	p.m.watches.WithLabelValues("opened").Inc()
	done := p.done()

	// The jobs up to last, from memory; later changes are queued.
	if err := p.sendJobs(stream, who, since, !resume, last); err != nil {
		return err
	}
	for {
		var batch []announcement
		select {
		case a := <-w.queue:
			batch = append(batch, a)
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return status.Error(codes.Unavailable, "the proxy is stopping")
		}
		for len(batch) < watchBatch && len(w.queue) > 0 {
			batch = append(batch, <-w.queue)
		}
		if w.lagged.Load() {
			// Announcements were lost: resynchronise from the cursor.
			p.m.watches.WithLabelValues("lagged").Inc()
			next := p.hub.mark(w)
			if err := p.sendJobs(stream, who, last, false, next); err != nil {
				return err
			}
			last = next
			continue
		}
		resp := &fedpcav1.WatchOwnerJobsResponse{}
		seen := map[*jobState]bool{}
		for _, a := range batch {
			if !seen[a.job] {
				seen[a.job] = true
				st, err := a.job.briefStatus(who)
				if err != nil {
					return p.toStatus(err)
				}
				resp.Jobs = append(resp.Jobs, st)
			}
			last = a.seq
		}
		resp.Cursor = p.hub.cursor(last)
		if err := p.sendWithTickets(stream, who, resp); err != nil {
			return err
		}
	}
}

// sendWithTickets sends resp, with the caller's tickets of the open jobs
// it lists that the caller has neither uploaded to nor declined (a job is
// announced open once, at its creation, and in snapshots), so that the
// owner does not fetch them: one round trip and one call fewer per owner
// and job. A message carries at most one ticket: the others go first, each
// in a message of its own.
func (p *Proxy) sendWithTickets(stream fedpcav1.ProxyService_WatchOwnerJobsServer, who transport.Identity, resp *fedpcav1.WatchOwnerJobsResponse) error {
	var tickets []*fedpcav1.GetJobResponse
	for _, st := range resp.Jobs {
		if st.GetState() != fedpcav1.JobState_JOB_STATE_OPEN {
			continue
		}
		if t := p.ownerTicket(st.GetJobId(), who.ID); t != nil {
			tickets = append(tickets, t)
		}
	}
	for ; len(tickets) > 1; tickets = tickets[1:] {
		m := &fedpcav1.WatchOwnerJobsResponse{Snapshot: resp.Snapshot, Ticket: tickets[0].GetJob(), OwnerProof: tickets[0].GetOwnerProof()}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
	if len(tickets) == 1 {
		resp.Ticket, resp.OwnerProof = tickets[0].GetJob(), tickets[0].GetOwnerProof()
	}
	return stream.Send(resp)
}

// ownerTicket is the owner's ticket of an open job it has neither uploaded
// to nor declined, or nil.
func (p *Proxy) ownerTicket(id, owner string) *fedpcav1.GetJobResponse {
	j, err := p.job(id)
	if err != nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rec.State != fedpcav1.JobState_JOB_STATE_OPEN {
		return nil
	}
	if up, declined, err := j.answerOf(owner); err != nil || up != nil || declined {
		return nil
	}
	t, err := j.ticketResponse(owner)
	if err != nil {
		return nil
	}
	return t
}

// sendJobs sends the jobs that name the owner: with snapshot, the open
// ones; otherwise those changed after since. The last message carries the
// cursor of upto (one message with no jobs when there are none, so that
// the owner knows its watch is up).
func (p *Proxy) sendJobs(stream fedpcav1.ProxyService_WatchOwnerJobsServer, who transport.Identity, since uint64, snapshot bool, upto uint64) error {
	jobs, err := p.ownerJobs(who, func(state fedpcav1.JobState, seq uint64) bool {
		if snapshot {
			return !ended(state)
		}
		return seq > since
	})
	if err != nil {
		return p.toStatus(err)
	}
	for {
		n := min(len(jobs), watchBatch)
		resp := &fedpcav1.WatchOwnerJobsResponse{Jobs: jobs[:n], Snapshot: snapshot}
		if jobs = jobs[n:]; len(jobs) == 0 {
			resp.Cursor = p.hub.cursor(upto)
		}
		if err := p.sendWithTickets(stream, who, resp); err != nil {
			return err
		}
		if len(jobs) == 0 {
			return nil
		}
	}
}

// ownerJobs returns the brief statuses of the jobs that name an owner and
// whose state and last change's number keep selects (asked first: an ended
// job's owners are looked up in the store), in the order of their last
// change.
func (p *Proxy) ownerJobs(who transport.Identity, keep func(state fedpcav1.JobState, seq uint64) bool) ([]*fedpcav1.JobStatus, error) {
	p.mu.Lock()
	all := slices.Collect(maps.Values(p.jobs))
	p.mu.Unlock()
	type numbered struct {
		st  *fedpcav1.JobStatus
		seq uint64
	}
	var out []numbered
	for _, j := range all {
		j.mu.Lock()
		state, seq := j.rec.State, j.rec.Seq
		j.mu.Unlock()
		if !keep(state, seq) {
			continue
		}
		if _, named, err := j.named(who.ID); err != nil || !named {
			if err != nil {
				return nil, err
			}
			continue
		}
		st, err := j.briefStatus(who)
		if err != nil {
			return nil, err
		}
		out = append(out, numbered{st, seq})
	}
	slices.SortFunc(out, func(a, b numbered) int {
		return cmp.Or(cmp.Compare(a.seq, b.seq), cmp.Compare(a.st.GetCreatedUnix(), b.st.GetCreatedUnix()), strings.Compare(a.st.GetJobId(), b.st.GetJobId()))
	})
	sts := make([]*fedpcav1.JobStatus, len(out))
	for i, n := range out {
		sts[i] = n.st
	}
	return sts, nil
}

// briefStatus is the job's status for a caller, without owner lists.
func (j *jobState) briefStatus(who transport.Identity) (*fedpcav1.JobStatus, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.status(false, who)
}
