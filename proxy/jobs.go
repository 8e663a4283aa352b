package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
)

// caller returns the authenticated caller.
func caller(ctx context.Context) transport.Identity {
	id, _ := transport.CallerIdentity(ctx)
	return id
}

// callerPeer is the caller with its key.
func callerPeer(ctx context.Context) transport.Peer {
	p, _ := transport.CallerPeer(ctx)
	return p
}

// partyJob is the job id with the caller, when the caller is a party to
// it (its user or an owner it names); the error is the gRPC status to
// return.
func (p *Proxy) partyJob(ctx context.Context, id string) (*jobState, transport.Identity, error) {
	who := caller(ctx)
	j, err := p.job(id)
	if err == nil {
		err = j.party(callerPeer(ctx))
	}
	if err != nil {
		return nil, who, p.toStatus(err)
	}
	return j, who, nil
}

// callerCert returns the caller's verified TLS certificate (DER), or nil in
// insecure mode.
func callerCert(ctx context.Context) []byte {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return nil
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 {
		return nil
	}
	return ti.State.VerifiedChains[0][0].Raw
}

func (p *Proxy) job(id string) (*jobState, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	j, ok := p.jobs[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownJob, id)
	}
	return j, nil
}

// party checks that the caller is the job's user or one of its owners, an
// owner by the key the job names it by (a certificate with its name and
// another key, whoever issued it, cannot upload, decline or read the job in
// its place).
func (j *jobState) party(id transport.Peer) error {
	switch id.Role {
	case transport.RoleUser:
		if id.String() == j.spec.User {
			return nil
		}
	case transport.RoleOwner:
		o, named, err := j.named(id.ID)
		if err != nil {
			return err
		}
		if named && o.Key != "" && id.Key != "" && o.Key != id.Key {
			return fmt.Errorf("%w: %v", ErrNotYours, &transport.KeyMismatchError{Who: id.String(), Want: o.Key, Got: id.Key, Where: "job " + j.id[:12] + "…"})
		}
		if named {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is neither the user nor an owner of job %s…", ErrNotYours, id.Short(), j.id[:12])
}

// CreateJob implements fedpcav1.ProxyServiceServer.
func (p *Proxy) CreateJob(ctx context.Context, req *fedpcav1.CreateJobRequest) (*fedpcav1.CreateJobResponse, error) {
	j, err := p.createJob(ctx, req)
	if err != nil {
		return nil, p.toStatus(err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	st, err := j.status(false, caller(ctx))
	if err != nil {
		return nil, p.toStatus(err)
	}
	return &fedpcav1.CreateJobResponse{Job: st}, nil
}

func (p *Proxy) createJob(ctx context.Context, req *fedpcav1.CreateJobRequest) (*jobState, error) {
	who := caller(ctx)
	spec, err := job.ParseSpec(req.GetSpec())
	if err != nil {
		return nil, bad("spec: %v", err)
	}
	if spec.User != who.String() {
		return nil, fmt.Errorf("%w: the spec names user %s but the caller is %s", ErrForbidden, spec.User, who)
	}
	cert := callerCert(ctx)
	if _, err := transport.VerifyTicket(p.cfg.Creds, spec, req.GetSignature(), cert); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrForbidden, err)
	}
	// An exact components job is the owners' choice (each needs
	// --allow-exact-components), not a test's.
	if spec.NoNoise && !spec.Components() && !p.cfg.AllowNoNoise {
		return nil, bad("no_noise: this proxy refuses statistics jobs without DP noise (they exist for tests and simulations)")
	}
	if _, err := p.params.Codecs().PublicKey.Unmarshal(req.GetUserPublicKey()); err != nil {
		return nil, bad("user_public_key: %v", err)
	}
	if job.Fingerprint(req.GetUserPublicKey()) != spec.UserKey {
		return nil, bad("user_public_key: its fingerprint is not the spec's user_key")
	}
	sch, err := schema.Parse(req.GetSchema())
	if err != nil {
		return nil, bad("schema: %v", err)
	}
	if err := spec.Check(sch, p.params); err != nil {
		return nil, bad("%v", err)
	}
	owners := transport.Owners(req.GetOwnerRefs())
	if err := spec.CheckOwners(owners); err != nil {
		return nil, bad("%v", err)
	}
	// The same signed spec again, with the same key and schema, is the same
	// job (a retry whose first answer was lost), whatever the time: checks
	// that depend on the clock (the deadline) or on the committee were made
	// when it was created.
	if j, err := p.job(spec.ID()); err == nil {
		return j, nil
	}
	c, err := p.committeeKey()
	if err != nil {
		return nil, err
	}
	if spec.CommitteeKey != c.Fingerprint || spec.CommitteeN != len(c.Members) || spec.CommitteeThreshold != c.Threshold {
		return nil, bad("committee: the spec is for key %s… (%d-of-%d), the committee's is %s… (%d-of-%d)",
			short(spec.CommitteeKey), spec.CommitteeThreshold, spec.CommitteeN, short(c.Fingerprint), c.Threshold, len(c.Members))
	}
	now := time.Now().UTC()
	if !spec.Deadline.After(now) {
		return nil, bad("deadline %s is in the past", spec.Deadline.Format(time.RFC3339))
	}
	id := spec.ID()
	rec := jobRecord{
		jobTicket:   jobTicket{Spec: req.GetSpec(), Signature: req.GetSignature(), UserCert: cert, Schema: sch.Canonical(), Owners: owners, Created: now},
		jobProgress: jobProgress{State: fedpcav1.JobState_JOB_STATE_OPEN, Reason: "waiting for uploads", Updated: now},
	}
	j, err := p.addJob(id, rec, req.GetUserPublicKey(), nil, nil)
	if err != nil {
		return nil, err
	}
	p.log.Info("job created", "job", id[:16], "user", spec.User, "dataset", spec.Dataset, "analysis", spec.Analysis,
		"owners", spec.NumOwners, "min_owners", spec.MinOwners, "plan", spec.NoisePlan, "no_noise", spec.NoNoise, "deadline", spec.Deadline.Format(time.RFC3339))
	return j, nil
}

// addJob stores a new job (a round with its public matrix's frames, and
// no check when a concurrent call of the same round finds it open) and
// starts its driver; a job created meanwhile by a concurrent retry is
// returned as it is.
func (p *Proxy) addJob(id string, rec jobRecord, userPK []byte, matrix [][]byte, check func() error) (*jobState, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if j, ok := p.jobs[id]; ok {
		return j, nil
	}
	if check != nil {
		if err := check(); err != nil {
			return nil, err
		}
	}
	j, err := newJobState(id, rec, nil, nil, p.params.Chunks, p.store, false)
	if err != nil {
		return nil, err
	}
	err = p.hub.sequence(j, func(seq uint64) error {
		rec.Seq, j.rec.Seq = seq, seq
		if err := p.store.createJob(id, &rec, userPK, matrix); err != nil {
			return fmt.Errorf("store job: %w", err)
		}
		j.every = p.cfg.ProgressInterval
		p.jobs[id] = j
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.ctx != nil {
		p.startDriver(j)
	}
	return j, nil
}

// GetJob implements fedpcav1.ProxyServiceServer.
func (p *Proxy) GetJob(ctx context.Context, req *fedpcav1.GetJobRequest) (*fedpcav1.GetJobResponse, error) {
	j, _, err := p.partyJob(ctx, req.GetJobId())
	if err != nil {
		return nil, err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case req.GetTicket():
		r, err := j.ticketResponse(caller(ctx).ID)
		if err != nil {
			return nil, p.toStatus(err)
		}
		return r, nil
	case req.GetBrief():
		st, err := j.status(false, caller(ctx))
		if err != nil {
			return nil, p.toStatus(err)
		}
		return &fedpcav1.GetJobResponse{Job: &fedpcav1.JobInfo{Status: st}}, nil
	}
	info, err := j.info(caller(ctx))
	if err != nil {
		return nil, p.toStatus(err)
	}
	return &fedpcav1.GetJobResponse{Job: info}, nil
}

// ListJobs implements fedpcav1.ProxyServiceServer.
func (p *Proxy) ListJobs(ctx context.Context, req *fedpcav1.ListJobsRequest) (*fedpcav1.ListJobsResponse, error) {
	who := caller(ctx)
	p.contacted(who)
	p.mu.Lock()
	jobs := make([]*jobState, 0, len(p.jobs))
	for _, j := range p.jobs {
		jobs = append(jobs, j)
	}
	p.mu.Unlock()
	resp := &fedpcav1.ListJobsResponse{}
	for _, j := range jobs {
		if !req.GetIncludeEnded() && j.ended() {
			continue // before party: an ended job's owners are in the store
		}
		if err := j.party(callerPeer(ctx)); errors.Is(err, ErrNotYours) {
			continue
		} else if err != nil {
			return nil, p.toStatus(err)
		}
		info, err := j.listed(who, req.GetBrief())
		if err != nil {
			return nil, p.toStatus(err)
		}
		resp.Jobs = append(resp.Jobs, info)
	}
	slices.SortFunc(resp.Jobs, func(a, b *fedpcav1.JobInfo) int {
		return int(a.GetStatus().GetCreatedUnix() - b.GetStatus().GetCreatedUnix())
	})
	return resp, nil
}

// WatchJob implements fedpcav1.ProxyServiceServer. It sends the job's
// status when it changes as the caller sees it: while the job is open, at
// its progress ticks (progress.go), never at an upload.
func (p *Proxy) WatchJob(req *fedpcav1.WatchJobRequest, stream fedpcav1.ProxyService_WatchJobServer) error {
	j, who, err := p.partyJob(stream.Context(), req.GetJobId())
	if err != nil {
		return err
	}
	var last *fedpcav1.JobStatus
	for {
		j.mu.Lock()
		now := time.Now()
		st, err := j.status(false, who)
		changed, tick := j.changed, j.nextTick(now)
		j.mu.Unlock()
		if err != nil {
			return p.toStatus(err)
		}
		if !proto.Equal(st, last) {
			if err := stream.Send(&fedpcav1.WatchJobResponse{Job: st}); err != nil {
				return err
			}
			last = st
		}
		if ended(st.GetState()) {
			return nil
		}
		var next <-chan time.Time
		timer := time.NewTimer(time.Until(tick))
		if st.GetState() == fedpcav1.JobState_JOB_STATE_OPEN {
			next = timer.C
		}
		select {
		case <-changed:
		case <-next:
		case <-stream.Context().Done():
			timer.Stop()
			return stream.Context().Err()
		case <-p.done():
			timer.Stop()
			return p.toStatus(context.Canceled)
		}
		timer.Stop()
	}
}

// done is closed when the proxy stops.
func (p *Proxy) done() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil {
		return nil
	}
	return p.ctx.Done()
}

// Decline implements fedpcav1.ProxyServiceServer.
func (p *Proxy) Decline(ctx context.Context, req *fedpcav1.DeclineRequest) (*fedpcav1.DeclineResponse, error) {
	j, who, err := p.partyJob(ctx, req.GetJobId())
	if err != nil {
		return nil, err
	}
	reason, err := job.ParseDecline(int32(req.GetReason()))
	if err != nil {
		return nil, p.toStatus(bad("reason: %v", err))
	}
	// The detail: a policy limit and its value, or the schema field that
	// differs, nothing else (job.DeclineDetail): checked against the code
	// and the job's schema before it is stored or relayed.
	w := req.GetDetail()
	detail := transport.DeclineDetail(w)
	if err := detail.Validate(reason, j.sch.D()); err != nil {
		return nil, p.toStatus(bad("%v", err))
	}
	if err := j.checkBudget(req.GetBudget()); err != nil {
		return nil, p.toStatus(err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	up, declined, err := j.answerOf(who.ID)
	switch {
	case err != nil:
		return nil, p.toStatus(err)
	case up != nil:
		return nil, p.toStatus(fmt.Errorf("%w: owner %s already uploaded to this job", ErrJobClosed, who.ID))
	case declined:
		return &fedpcav1.DeclineResponse{}, nil
	}
	d := declineRecord{Owner: who.ID, Reason: reason, At: time.Now().UTC()}
	if !detail.IsZero() {
		d.Detail = &detail
	}
	err = p.commit(j, func(prog *jobProgress) { prog.Declined++ }, func(prog *jobProgress) error {
		return p.store.addDecline(j.id, prog, d, budget(who.ID, req.GetBudget()))
	})
	if err != nil {
		return nil, p.toStatus(err)
	}
	j.declines[who.ID] = d
	p.log.Info("owner declined", "job", j.id[:16], "owner", who.ID, "reason", reason.String(), "detail", d.text(j.sch))
	return &fedpcav1.DeclineResponse{}, nil
}

// ReportBudget implements fedpcav1.ProxyServiceServer: an owner's budget
// report once it has settled its part in an ended job, so that the status
// shows what the job left spent or released, not the reservation the owner
// reported with its upload. Display only: the owner's ledger decides.
func (p *Proxy) ReportBudget(ctx context.Context, req *fedpcav1.ReportBudgetRequest) (*fedpcav1.ReportBudgetResponse, error) {
	j, who, err := p.partyJob(ctx, req.GetJobId())
	if err != nil {
		return nil, err
	}
	b := budget(who.ID, req.GetBudget())
	if b == nil {
		return nil, p.toStatus(bad("budget: no dataset"))
	}
	if err := j.checkBudget(req.GetBudget()); err != nil {
		return nil, p.toStatus(err)
	}
	if err := p.store.setBudget(b); err != nil {
		return nil, p.toStatus(err)
	}
	return &fedpcav1.ReportBudgetResponse{}, nil
}

// budget is an owner's budget report as stored, or nil when the report
// names no dataset.
func budget(owner string, b *fedpcav1.BudgetReport) *budgetRecord {
	if b.GetDataset() == "" {
		return nil
	}
	return &budgetRecord{Owner: owner, Dataset: b.GetDataset(), RhoBudget: b.GetRhoBudget(), RhoSpent: b.GetRhoSpent(),
		RhoReserved: b.GetRhoReserved(), Delta: b.GetDelta(), EpsilonBudget: b.GetEpsilonBudget(), EpsilonSpent: b.GetEpsilonSpent(),
		EpsilonSpentAndReserved: b.GetEpsilonSpentAndReserved(), RhoRemaining: b.GetRhoRemaining(), At: time.Now().UTC()}
}

// checkPublished validates a result document the user publishes for the
// job's owners: a valid document (job.ParseResult) of this job, its dataset
// and schema.
func (j *jobState) checkPublished(doc []byte) error {
	res, err := job.ParseResult(doc)
	if err != nil {
		return bad("%v", err)
	}
	if res.JobID != j.id || res.Dataset != j.spec.Dataset || res.SchemaHash != j.spec.SchemaHash {
		return bad("result: of job %s… (dataset %s), not of this job %s… (dataset %s)", short(res.JobID), res.Dataset, j.id[:16], j.spec.Dataset)
	}
	return nil
}

// PublishResult implements fedpcav1.ProxyServiceServer.
func (p *Proxy) PublishResult(ctx context.Context, req *fedpcav1.PublishResultRequest) (*fedpcav1.PublishResultResponse, error) {
	who := caller(ctx)
	j, err := p.job(req.GetJobId())
	if err != nil {
		return nil, p.toStatus(err)
	}
	if who.String() != j.spec.User {
		return nil, p.toStatus(fmt.Errorf("%w: only the job's user may publish its result", ErrNotYours))
	}
	if err := j.checkPublished(req.GetResult()); err != nil {
		return nil, p.toStatus(err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rec.State != fedpcav1.JobState_JOB_STATE_DONE {
		return nil, p.toStatus(ErrNotDone)
	}
	if err := p.store.publish(j.id, req.GetResult()); err != nil {
		return nil, p.toStatus(err)
	}
	p.log.Info("result published", "job", j.id[:16], "bytes", len(req.GetResult()))
	return &fedpcav1.PublishResultResponse{}, nil
}

// GetPublished implements fedpcav1.ProxyServiceServer.
func (p *Proxy) GetPublished(ctx context.Context, req *fedpcav1.GetPublishedRequest) (*fedpcav1.GetPublishedResponse, error) {
	j, _, err := p.partyJob(ctx, req.GetJobId())
	if err != nil {
		return nil, err
	}
	out, err := p.store.published(j.id)
	if err != nil {
		return nil, p.toStatus(err)
	}
	if out == nil {
		return nil, p.toStatus(fmt.Errorf("%w: the user has not published a result for job %s…", ErrNotDone, j.id[:12]))
	}
	return &fedpcav1.GetPublishedResponse{Result: out}, nil
}

// CancelReason is the reason a job cancelled by its user fails with.
const CancelReason = "cancelled by the user"

// CancelJob implements fedpcav1.ProxyServiceServer: the job's user ends an
// open job without a release. No committee member has been asked to
// key-switch an open job, so nothing was released from any owner's data:
// every owner that reserved budget returns it, and every owner that
// uploaded is refunded, when it next looks at the job (owner.handle). A job
// already sealed cannot be cancelled (its key switch may have started).
func (p *Proxy) CancelJob(ctx context.Context, req *fedpcav1.CancelJobRequest) (*fedpcav1.CancelJobResponse, error) {
	who := caller(ctx)
	j, err := p.job(req.GetJobId())
	if err != nil {
		return nil, p.toStatus(err)
	}
	if who.String() != j.spec.User {
		return nil, p.toStatus(fmt.Errorf("%w: only the job's user may cancel it", ErrNotYours))
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	switch j.rec.State {
	case fedpcav1.JobState_JOB_STATE_OPEN:
	case fedpcav1.JobState_JOB_STATE_FAILED:
		if j.rec.Reason == CancelReason {
			return p.cancelled(j, who) // cancelled before: the same answer
		}
		return nil, p.toStatus(fmt.Errorf("%w: job %s… has already failed: %s", ErrJobClosed, j.id[:16], j.rec.Reason))
	case fedpcav1.JobState_JOB_STATE_DONE:
		return nil, p.toStatus(fmt.Errorf("%w: job %s… is done: its result is ready (fedpca user fetch), so it can no longer be cancelled",
			ErrJobClosed, j.id[:16]))
	default:
		return nil, p.toStatus(fmt.Errorf("%w: job %s… is %s: it was sealed and its key switch may have begun, so it can no longer be cancelled; wait for its result",
			ErrJobClosed, j.id[:16], stateName(j.rec.State)))
	}
	err = p.commit(j, func(prog *jobProgress) {
		prog.State, prog.Reason = fedpcav1.JobState_JOB_STATE_FAILED, CancelReason
	}, func(prog *jobProgress) error { return p.store.fail(j.id, prog) })
	if err != nil {
		return nil, p.toStatus(err)
	}
	j.forgetSum()
	p.log.Info("job cancelled by its user", "job", j.id[:16], "user", who.String(), "uploads", j.rec.Uploaded)
	return p.cancelled(j, who)
}

// cancelled is the answer to the user that cancelled job j; j.mu must be held.
func (p *Proxy) cancelled(j *jobState, user transport.Identity) (*fedpcav1.CancelJobResponse, error) {
	st, err := j.status(false, user)
	if err != nil {
		return nil, p.toStatus(err)
	}
	return &fedpcav1.CancelJobResponse{Job: st}, nil
}

// ended reports whether the job has ended.
func (j *jobState) ended() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return ended(j.rec.State)
}

// listed is the job as ListJobs lists it for a caller: its status, with the
// ticket unless brief.
func (j *jobState) listed(who transport.Identity, brief bool) (*fedpcav1.JobInfo, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if brief {
		st, err := j.status(false, who)
		return &fedpcav1.JobInfo{Status: st}, err
	}
	return j.info(who)
}
