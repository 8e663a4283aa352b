package proxy

import (
	"errors"
	"fmt"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
)

// A power-method job (docs/PROTOCOL.md section 13) runs as T + 1 jobs of
// this proxy: its parent job (round 0, created by CreateJob with the
// parent spec) and one job per round t >= 1, known by the round's ID, which
// the user opens with CreateRound once the rounds before it are done. A
// round is a job as any other: the parent's spec, schema, owners and
// committee, its own uploads (bound to the round's ID), seal, key switch
// and result; only its ticket carries the round spec, its deadline is the
// round's (job.Spec.RoundDeadline), and its owners fetch its public matrix
// with FetchRoundMatrix.

// CreateRound implements fedpcav1.ProxyServiceServer.
func (p *Proxy) CreateRound(stream fedpcav1.ProxyService_CreateRoundServer) error {
	j, err := p.createRound(stream)
	if err != nil {
		return p.toStatus(err)
	}
	j.mu.Lock()
	st, err := j.status(false, caller(stream.Context()))
	j.mu.Unlock()
	if err != nil {
		return p.toStatus(err)
	}
	return stream.SendAndClose(&fedpcav1.CreateRoundResponse{Job: st})
}

func (p *Proxy) createRound(stream fedpcav1.ProxyService_CreateRoundServer) (*jobState, error) {
	who := caller(stream.Context())
	first, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	hd := first.GetHeader()
	if hd == nil {
		return nil, bad("the first message must be the round header")
	}
	rs, err := job.ParseRoundSpec(hd.GetRoundSpec())
	if err != nil {
		return nil, bad("%v", err)
	}
	parent, err := p.job(rs.Parent)
	if err != nil {
		return nil, err
	}
	if who.String() != parent.spec.User {
		return nil, fmt.Errorf("%w: only the job's user may open its rounds", ErrNotYours)
	}
	if parent.round.Round != 0 {
		return nil, bad("round_spec: job %s… is a round, not a parent job", rs.Parent[:12])
	}
	if err := transport.VerifyRound(p.cfg.Creds, parent.spec, rs, hd.GetSignature(), parent.rec.UserCert); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrForbidden, err)
	}
	id := rs.ID()
	if j, err := p.job(id); err == nil {
		return j, nil // the same round again (a retry whose answer was lost)
	}
	q, err := job.ReadMatrix(parent.spec, parent.sch, func() ([]byte, error) {
		m, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if m.GetFrame() == nil {
			return nil, bad("expected a frame of the public matrix")
		}
		return m.GetFrame().GetWords(), nil
	})
	if err != nil {
		if errors.Is(err, ErrBadRequest) {
			return nil, err
		}
		return nil, bad("%v", err)
	}
	// The order of the rounds is the proxy's to keep (each owner and
	// member checks that it takes part in each round number once).
	if err := rs.CheckMatrix(parent.spec, parent.sch, 0, q); err != nil {
		return nil, bad("%v", err)
	}
	now := time.Now().UTC()
	if closes := parent.spec.RoundDeadline(rs.Round); !closes.After(now) {
		return nil, bad("round %d's deadline %s (the job's deadline and %d round windows of %d s) is in the past", rs.Round, closes.Format(time.RFC3339), rs.Round, parent.spec.Power.RoundSeconds)
	}
	parent.mu.Lock()
	owners, _, _, err := parent.answers()
	parent.mu.Unlock()
	if err != nil {
		return nil, err
	}
	userPK, err := p.store.userPK(parent.id)
	if err != nil {
		return nil, err
	}
	rec := jobRecord{
		jobTicket: jobTicket{Spec: parent.rec.Spec, Signature: parent.rec.Signature, UserCert: parent.rec.UserCert, Schema: parent.rec.Schema,
			Owners: owners, Created: now, RoundSpec: hd.GetRoundSpec(), RoundSignature: hd.GetSignature()},
		jobProgress: jobProgress{State: fedpcav1.JobState_JOB_STATE_OPEN, Reason: "waiting for uploads", Updated: now},
	}
	j, err := p.addJob(id, rec, userPK, job.MatrixFrames(q), func() error { return p.nextRound(parent, rs) })
	if err != nil {
		return nil, err
	}
	p.log.Info("round opened", "job", id[:16], "parent", parent.id[:16], "round", rs.Round, "of", parent.spec.Power.Rounds,
		"deadline", j.closes.Format(time.RFC3339))
	return j, nil
}

// nextRound checks that rs is the next round of parent: the parent and
// every round before rs done, and no round of its number. p.mu must be
// held (no round is added meanwhile).
func (p *Proxy) nextRound(parent *jobState, rs job.RoundSpec) error {
	done := map[int]bool{}
	for _, j := range append(p.roundsOf(parent.id), parent) {
		j.mu.Lock()
		state := j.rec.State
		j.mu.Unlock()
		if j.round.Round == rs.Round {
			return fmt.Errorf("%w: round %d of job %s… exists already, as job %s… (another public matrix): each round runs once", ErrJobClosed, rs.Round, parent.id[:12], j.id[:12])
		}
		done[j.round.Round] = state == fedpcav1.JobState_JOB_STATE_DONE
		if state == fedpcav1.JobState_JOB_STATE_FAILED {
			return fmt.Errorf("%w: round %d of job %s… failed, so the job ends there", ErrJobClosed, j.round.Round, parent.id[:12])
		}
	}
	for r := range rs.Round {
		if !done[r] {
			return fmt.Errorf("%w: round %d of job %s… is not done: round %d opens after it", ErrNotDone, r, parent.id[:12], rs.Round)
		}
	}
	return nil
}

// roundsOf returns the rounds >= 1 of a parent job. p.mu must be held.
func (p *Proxy) roundsOf(parent string) []*jobState {
	var out []*jobState
	for _, j := range p.jobs {
		if j.round.Round > 0 && j.round.Parent == parent {
			out = append(out, j)
		}
	}
	return out
}

// FetchRoundMatrix implements fedpcav1.ProxyServiceServer.
func (p *Proxy) FetchRoundMatrix(req *fedpcav1.FetchRoundMatrixRequest, stream fedpcav1.ProxyService_FetchRoundMatrixServer) error {
	j, _, err := p.partyJob(stream.Context(), req.GetJobId())
	if err != nil {
		return err
	}
	if j.round.Round == 0 {
		return p.toStatus(bad("job %s… is not a round of a power-method job: it has no public matrix", j.id[:12]))
	}
	frames, err := j.matrixFrames(p.store)
	if err != nil {
		return p.toStatus(err)
	}
	for _, f := range frames {
		if err := stream.Send(&fedpcav1.FetchRoundMatrixResponse{Frame: &fedpcav1.MatrixFrame{Words: f}}); err != nil {
			return err
		}
	}
	return nil
}

// matrixFrames returns an open round's public matrix's frames: read from
// the store once and kept while the round is open (every owner fetches
// them within seconds). An ended round's matrix is not kept: no one
// uploads under it any more (the user who made it has it).
func (j *jobState) matrixFrames(st *store) ([][]byte, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if ended(j.rec.State) {
		return nil, fmt.Errorf("%w: round %d of job %s… has ended: its public matrix is no longer kept", ErrJobClosed, j.round.Round, j.round.Parent[:12])
	}
	if j.matrix == nil {
		frames, err := st.matrix(j.id)
		if err != nil {
			return nil, err
		}
		j.matrix = frames
	}
	return j.matrix, nil
}
