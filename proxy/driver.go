package proxy

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// startDriver starts the goroutine that moves a job through its states.
// p.mu must be held (it reads p.ctx).
func (p *Proxy) startDriver(j *jobState) {
	j.mu.Lock()
	st := j.rec.State
	j.mu.Unlock()
	if ended(st) {
		return
	}
	ctx := p.ctx
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.drive(ctx, j)
	}()
}

// sealQuorumWait is how long a job past its deadline waits for enough
// committee members to seal it (members restarting) before it fails.
const sealQuorumWait = 10 * time.Second

// permanent marks an error after which the job cannot succeed.
type permanent struct{ error }

func (e permanent) Unwrap() error { return e.error }

// drive runs a job to its end: open -> (seal) -> switching -> done, or
// failed with a stated reason. Transient errors (the committee unreachable)
// are retried with backoff and jitter; the reason field says what the job
// waits for.
func (p *Proxy) drive(ctx context.Context, j *jobState) {
	backoff := transport.Backoff{Initial: p.cfg.RetryInterval, Max: 30 * time.Second}
	waitStart := time.Time{}
	for ctx.Err() == nil {
		j.mu.Lock()
		state, wake, deadline := j.rec.State, j.wake, j.closes
		j.mu.Unlock()
		var err error
		switch state {
		case fedpcav1.JobState_JOB_STATE_OPEN:
			var sealed bool
			var at time.Time
			sealed, at, err = p.maybeSeal(ctx, j)
			if err == nil && !sealed {
				until := deadline.Add(10 * time.Millisecond)
				if !at.IsZero() && at.Before(until) {
					until = at
				}
				timer := time.NewTimer(time.Until(until))
				select {
				case <-ctx.Done():
				case <-wake:
				case <-timer.C:
				}
				timer.Stop()
				continue
			}
		case fedpcav1.JobState_JOB_STATE_SWITCHING:
			if j.spec.Components() {
				err = p.solve(ctx, j)
			} else {
				err = p.keySwitch(ctx, j)
			}
		default:
			return
		}
		if err == nil {
			backoff.Reset()
			waitStart = time.Time{}
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if waitStart.IsZero() {
			waitStart = time.Now()
		}
		var perm permanent
		reason := ""
		switch {
		case errors.As(err, &perm):
			reason = err.Error()
		case state == fedpcav1.JobState_JOB_STATE_OPEN && errors.Is(err, errNoQuorum) && time.Since(waitStart) >= sealQuorumWait:
			// Past its deadline, unsealed: nothing was switched, so the
			// job ends and every owner's budget goes back, rather than
			// waiting (user run with it) for members that may not return.
			reason = fmt.Sprintf("the committee could not switch the job: %v, for %s after the deadline; nothing was released and every owner's budget goes back (run the job again once the members are up)",
				err, sealQuorumWait)
		case state == fedpcav1.JobState_JOB_STATE_SWITCHING && errors.Is(err, errNoQuorum) && time.Since(waitStart) >= solveQuorumWait:
			// A components job that lost a member during its computation,
			// with no t members up to run it again.
			reason = fmt.Sprintf("%v, for %s: nothing was released (the owners keep the job's cost charged, as for any job whose computation started); run the job again once the members are up",
				err, solveQuorumWait)
		case time.Since(waitStart) > p.cfg.SwitchTimeout:
			reason = fmt.Sprintf("gave up after %s: %v", p.cfg.SwitchTimeout, diskFull(err))
		}
		if reason != "" {
			ferr := p.fail(j, reason)
			if ferr == nil {
				return
			}
			// Not recorded (a full disk): the job is not over; try again.
			err = fmt.Errorf("cannot record that the job failed (%s): %w", reason, ferr)
		}
		err = diskFull(err)
		p.setReason(j, "waiting: "+err.Error())
		pause := backoff.Next()
		p.log.Warn("job waiting", "job", j.id[:16], "error", err, "retry_in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

func (p *Proxy) setReason(j *jobState, reason string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rec.Reason == reason {
		return
	}
	// The reason is informative: keep it in memory, persist with the next step.
	j.rec.Reason = reason
	j.notify()
}

// fail ends a job without a release and frees its ciphertexts.
func (p *Proxy) fail(j *jobState, reason string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	err := p.commit(j, func(prog *jobProgress) {
		prog.State, prog.Reason = fedpcav1.JobState_JOB_STATE_FAILED, reason
	}, func(prog *jobProgress) error { return p.store.fail(j.id, prog) })
	if err != nil {
		p.log.Error("cannot record job failure", "job", j.id[:16], "error", err)
		return err
	}
	j.forgetSum()
	j.sealed = nil
	p.log.Warn("job failed", "job", j.id[:16], "reason", reason, "switched", j.rec.Switched)
	return nil
}

// maybeSeal seals the job if all its owners answered (uploaded or declined),
// at the first progress tick after the last answer (progress.go: when the
// last upload came shows no more than the ticks do), or if its deadline
// passed; it fails the job if too few uploaded by then. Not sealed, it
// returns when to look again (zero: at the deadline).
//
// A job that can no longer succeed ends as soon as that is known, at the
// progress tick after the answer that made it so (as a seal would), so
// that no owner's budget stays reserved for it: when so many owners
// declined that the others cannot make MinOwners, or when, after
// UnknownOwnerGrace, the owners this proxy has never heard from (a typo in
// --owners) are needed to make it.
func (p *Proxy) maybeSeal(ctx context.Context, j *jobState) (bool, time.Time, error) {
	j.mu.Lock()
	u, d, n := j.rec.Uploaded, j.rec.Declined, j.spec.NumOwners
	now := time.Now()
	past := !now.Before(j.closes)
	hopeless := n-d < j.spec.MinOwners
	var at time.Time
	if (u+d == n || hopeless) && !past {
		at = j.sealTime()
	}
	var strangers []string
	note := ""
	if u+d < n && !past && !hopeless {
		strangers = p.strangers(j.awaited())
		if len(strangers) > 0 && n-d-len(strangers) < j.spec.MinOwners {
			if grace := j.rec.Created.Add(p.cfg.UnknownOwnerGrace); now.Before(grace) {
				note = fmt.Sprintf("this proxy never heard from %s; the job fails at %s unless they call", p.strangerText(strangers, job.OwnerIDs(j.ownerList())), grace.UTC().Format("15:04:05 UTC"))
				at, strangers = grace, nil // time for them to make their first call
			} else {
				hopeless = true
			}
		} else {
			strangers = nil
		}
	}
	j.note = note
	j.mu.Unlock()
	if (u+d < n && !hopeless || now.Before(at)) && !past {
		return false, at, nil
	}
	if u < j.spec.MinOwners {
		j.mu.Lock()
		missing := j.awaited()
		var declined []string
		decs, _ := j.declineRecords() // a running job's, in memory
		for _, r := range decs {
			declined = append(declined, r.Owner+" ("+r.Reason.String()+")")
		}
		j.mu.Unlock()
		why := fmt.Sprintf("only %d of the %d owners needed uploaded", u, j.spec.MinOwners)
		switch {
		case past:
			why += " by the deadline"
		case len(strangers) > 0:
			why = fmt.Sprintf("the job needs %d owners, and %s never called this proxy in %s: %s", j.spec.MinOwners,
				plural(len(strangers), "owner"), p.cfg.UnknownOwnerGrace, p.strangerText(strangers, job.OwnerIDs(j.ownerList())))
			missing = slices.DeleteFunc(missing, func(o string) bool { return slices.Contains(strangers, o) })
		case d == n:
			why = fmt.Sprintf("all %d owners declined", n)
		default:
			why = fmt.Sprintf("%d of the %d owners declined: the other %d cannot make the %d needed", d, n, n-d, j.spec.MinOwners)
		}
		if len(missing) > 0 && past {
			why += "; never uploaded: " + strings.Join(missing, ", ")
		}
		if d > 0 {
			why += "; declined: " + strings.Join(declined, ", ")
		}
		return true, time.Time{}, permanent{errors.New(why)}
	}
	return true, time.Time{}, p.seal(ctx, j)
}

// strangerText names owners this proxy never heard from, each with the
// known owner it may be a typo of, and what to do.
func (p *Proxy) strangerText(strangers, named []string) string {
	near := p.nearest(strangers, named)
	var parts []string
	for _, s := range strangers {
		if k := near[s]; k != "" {
			parts = append(parts, fmt.Sprintf("%s (did you mean %s?)", s, k))
		} else {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ") + "; check the names in --owners (the IDs in the owners' certificates) and that those owners are running"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// seal chooses the active members, adds the proxy's noise share and the
// masks to the sum, and stores the blinded sum and the masks in one
// transaction.
func (p *Proxy) seal(ctx context.Context, j *jobState) error {
	active, parties, names, err := p.pickActive(ctx, j.spec, nil, 0)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.rec.State != fedpcav1.JobState_JOB_STATE_OPEN {
		return nil // cancelled meanwhile: the driver sees the new state
	}
	start := time.Now()
	owners, err := j.uploadedOwners()
	if err != nil {
		return err
	}
	noise, err := job.RoundNoise(j.spec, j.sch, dp.RoleProxy, j.round.Round, len(owners), nil)
	if err != nil {
		if errors.Is(err, dp.ErrPlanInfeasible) {
			return permanent{err}
		}
		return err
	}
	if err := p.loadSum(j); err != nil {
		return err
	}
	blinded := j.copySum()
	var masks [][]uint64
	if j.spec.Components() {
		// Not blinded: the conversion's own masks hide the sum, and the
		// members check c0 of an exact job against the owners' (5.2).
		err = job.AddNoise(p.params, blinded, noise)
	} else {
		masks, err = job.Blind(p.params, blinded, noise, nil)
	}
	if err != nil {
		return err
	}
	encMasks := make([][]byte, len(masks))
	for i, m := range masks {
		encMasks[i] = encodeMask(m)
	}
	enc := p.encode(blinded)
	userPK, err := p.store.userPK(j.id)
	if err != nil {
		return err
	}
	err = p.commit(j, func(prog *jobProgress) {
		prog.State, prog.Active, prog.CSPs, prog.Parties, prog.SealedAt = fedpcav1.JobState_JOB_STATE_SWITCHING, active, names, parties, time.Now().UTC()
		prog.Timings.Seal = time.Since(start).Seconds()
		prog.Timings.UploadWindow = prog.SealedAt.Sub(j.rec.Created).Seconds()
		prog.Reason = "sealed with " + plural(len(owners), "owner") + "; key switch by csp/" + strings.Join(names, ", csp/")
	}, func(prog *jobProgress) error { return p.store.seal(j.id, prog, enc, encMasks) })
	if err != nil {
		return err
	}
	j.forgetSum()
	j.sealed = &switchState{blinded: blinded, masks: masks, userPK: userPK, shares: map[uint32][]*he.KeySwitchShare{}}
	p.m.phases.WithLabelValues("seal").Observe(j.rec.Timings.Seal)
	p.log.Info("job sealed", "job", j.id[:16], "owners", len(owners), "active", strings.Join(names, ","))
	return nil
}

// pickActive chooses the members that take part in a job, among those up
// with the committee key: those of prefer first, then the others in point
// order, avoid (a member just lost) only if no other will do. A job's
// active members are t of them; a components job whose members make
// their own randomness is computed by three (parties), the lowest t of
// which are active. It returns the active points, in order, the parties
// (nil unless three compute) and the active members' names; errNoQuorum
// names the members not ready.
func (p *Proxy) pickActive(ctx context.Context, s *job.Spec, prefer []uint32, avoid uint32) (active, parties []uint32, names []string, err error) {
	count := s.CommitteeThreshold
	if s.Components() {
		count = s.Parties()
	}
	c, err := p.committeeKey()
	if err != nil {
		return nil, nil, nil, err
	}
	sts := p.memberStatus(ctx, false)
	var chosen []uint32
	var down []string
	add := func(pt uint32) {
		if len(chosen) < count && !slices.Contains(chosen, pt) {
			chosen = append(chosen, pt)
		}
	}
	ready := func(pt uint32) bool {
		s := sts[pt-1]
		return s != nil && s.GetReady() && s.GetCommitteeKeyFingerprint() == c.Fingerprint
	}
	for i := range sts {
		if !ready(uint32(i + 1)) {
			down = append(down, "csp/"+c.Members[i].ID)
		}
	}
	for _, pt := range prefer {
		if pt != avoid && ready(pt) {
			add(pt)
		}
	}
	for i := range sts {
		if pt := uint32(i + 1); pt != avoid && ready(pt) {
			add(pt)
		}
	}
	if avoid != 0 && ready(avoid) {
		add(avoid)
	}
	if len(chosen) < count {
		return nil, nil, nil, fmt.Errorf("%w: %d of the %d needed (not ready: %s)", errNoQuorum, len(chosen), count, strings.Join(down, ", "))
	}
	slices.Sort(chosen)
	active = slices.Clone(chosen[:c.Threshold])
	if count > c.Threshold || (s.Components() && !s.Dealt()) {
		parties = chosen
	}
	for _, pt := range active {
		names = append(names, c.Members[pt-1].ID)
	}
	return active, parties, names, nil
}

// switchState is what a key switch needs, decoded.
type switchState struct {
	blinded []*rlwe.Ciphertext
	masks   [][]uint64
	userPK  []byte
	shares  map[uint32][]*he.KeySwitchShare
}

// switchInputs returns what the key switch of a sealed job needs: kept in
// memory since its seal, or read back from the store after a restart.
// j.mu must be held.
func (p *Proxy) switchInputs(j *jobState, active []uint32) (*switchState, error) {
	if j.sealed == nil {
		in, err := p.readSwitchInputs(j, active)
		if err != nil {
			return nil, err
		}
		j.sealed = in
	}
	return j.sealed, nil
}

func (p *Proxy) readSwitchInputs(j *jobState, active []uint32) (*switchState, error) {
	masks := j.n
	if j.spec.Components() {
		masks = 0
	}
	enc, err := p.store.switchInputs(j.id, j.n, masks, active)
	if err != nil {
		return nil, err
	}
	in := &switchState{userPK: enc.userPK, shares: map[uint32][]*he.KeySwitchShare{}}
	if in.blinded, err = p.decode("blinded", enc.blinded); err != nil {
		return nil, err
	}
	for i, v := range enc.masks {
		m, err := decodeMask(v, p.params.Slots())
		if err != nil {
			return nil, fmt.Errorf("mask %d: %w", i, err)
		}
		in.masks = append(in.masks, m)
	}
	for pt, vs := range enc.shares {
		ss := make([]*he.KeySwitchShare, len(vs))
		for i, v := range vs {
			if ss[i], err = p.params.Codecs().KeySwitchShare.Unmarshal(v); err != nil {
				return nil, fmt.Errorf("stored share %d of member %d: %w", i, pt, err)
			}
		}
		in.shares[pt] = ss
	}
	return in, nil
}

// startSwitch records that a sealed job's switch (or solve) started and
// returns what it needs: the active members, the included owners, the
// job's record and its inputs.
func (p *Proxy) startSwitch(j *jobState) (active []uint32, owners []string, rec jobRecord, in *switchState, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	active = slices.Clone(j.rec.Active)
	if !j.rec.Switched {
		if err := p.commit(j, func(prog *jobProgress) {
			prog.Switched, prog.SwitchStarted = true, time.Now().UTC()
		}, func(prog *jobProgress) error { return p.store.setProgress(j.id, prog) }); err != nil {
			return nil, nil, rec, nil, err
		}
	}
	owners, err = j.uploadedOwners()
	rec = j.rec
	if err == nil {
		in, err = p.switchInputs(j, active)
	}
	if err != nil {
		return nil, nil, rec, nil, permanent{fmt.Errorf("read sealed job: %w", err)}
	}
	return active, owners, rec, in, nil
}

// keySwitch asks every active member that has not answered yet for its
// shares (the same active set every time: a member switches a job once),
// then combines them and removes the masks.
func (p *Proxy) keySwitch(ctx context.Context, j *jobState) error {
	active, owners, rec, in, err := p.startSwitch(j)
	if err != nil {
		return err
	}
	// The members still to ask, listed before any goroutine writes in.shares.
	var missing []uint32
	for _, pt := range active {
		if in.shares[pt] == nil {
			missing = append(missing, pt)
		}
	}
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, pt := range missing {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shares, err := p.askMember(ctx, j, int(pt)-1, rec, active, owners, in)
			result := "ok"
			if err != nil {
				result = "error"
			}
			p.m.asks.WithLabelValues(p.cfg.Committee[pt-1].ID, result).Inc()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			in.shares[pt] = shares
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		// Keep the shares of the members that answered for the next
		// attempt, also across a restart. (When every member answers, the
		// result is stored instead: a member asked again after a crash
		// sends the shares it stored for the same request.)
		for _, pt := range missing {
			if in.shares[pt] != nil {
				if err := p.storeShares(j, pt, in.shares[pt]); err != nil {
					errs = append(errs, err)
				}
			}
		}
		for _, e := range errs {
			var perm permanent
			if errors.As(e, &perm) {
				return e
			}
		}
		return errors.Join(errs...)
	}
	ordered := make([][]*he.KeySwitchShare, 0, len(active))
	for _, pt := range active {
		ordered = append(ordered, in.shares[pt])
	}
	_, cpk, err := p.committeeKeys(j.spec.CommitteeKey)
	if errors.Is(err, ErrBadRequest) {
		return permanent{err} // the job's committee key is no longer the committee's
	} else if err != nil {
		return err
	}
	result, err := job.CombineShares(p.params, cpk, j.id, in.blinded, ordered)
	if err != nil {
		return permanent{err}
	}
	if err := job.Unblind(p.params, result, in.masks); err != nil {
		return permanent{err}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	enc := p.encode(result)
	err = p.commit(j, func(prog *jobProgress) {
		prog.State, prog.Reason = fedpcav1.JobState_JOB_STATE_DONE, "result ready for the user"
		prog.Timings.KeySwitch = time.Since(prog.SwitchStarted).Seconds()
	}, func(prog *jobProgress) error { return p.store.finish(j.id, prog, enc) })
	if err != nil {
		return err
	}
	j.sealed = nil
	p.m.phases.WithLabelValues("key_switch").Observe(j.rec.Timings.KeySwitch)
	p.log.Info("job done", "job", j.id[:16], "owners", len(owners), "ciphertexts", j.n)
	return nil
}

// verifyAllowance is the time a member's key switch may take per uploaded
// ciphertext beyond CallTimeout: the member receives and verifies every
// upload's proof (about 14 ms of CPU each) before it switches.
const verifyAllowance = 50 * time.Millisecond

// askMember runs one member's KeySwitch stream: the header, the blinded
// sum, then each included owner's upload proofs, which the member verifies
// before it makes its shares.
func (p *Proxy) askMember(ctx context.Context, j *jobState, i int, rec jobRecord, active []uint32, owners []string, in *switchState) ([]*he.KeySwitchShare, error) {
	mc, err := p.member(i)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout+time.Duration(len(owners)*j.n)*verifyAllowance)
	defer cancel()
	stream, err := mc.client.KeySwitch(cctx)
	if err != nil {
		return nil, memberError(mc.ID, err)
	}
	hd := &fedpcav1.KeySwitchHeader{JobId: j.id, Spec: rec.Spec, Signature: rec.Signature, UserCertificate: rec.UserCert,
		UserPublicKey: in.userPK, Schema: rec.Schema, Active: active, Owners: owners, Ciphertexts: uint32(j.n),
		JobOwnerRefs: transport.OwnerRefs(rec.Owners), RoundSpec: rec.RoundSpec, RoundSignature: rec.RoundSignature}
	if err := stream.Send(&fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Header{Header: hd}}); err != nil {
		return nil, memberError(mc.ID, recvErr(stream, err))
	}
	buf := make([]byte, 0, p.params.Codecs().Ciphertext.Size())
	for _, ct := range in.blinded {
		buf = p.params.Codecs().Ciphertext.Append(buf[:0], ct)
		if err := stream.Send(&fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Ciphertext{Ciphertext: buf}}); err != nil {
			return nil, memberError(mc.ID, recvErr(stream, err))
		}
	}
	sendMsg := func(up *fedpcav1.OwnerUpload, part *fedpcav1.UploadPart) error {
		if up != nil {
			return stream.Send(&fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Upload{Upload: up}})
		}
		return stream.Send(&fedpcav1.KeySwitchRequest{Msg: &fedpcav1.KeySwitchRequest_Part{Part: part}})
	}
	if err := p.sendProofs(sendMsg, j, owners); err != nil {
		if _, ok := err.(permanent); ok {
			return nil, err
		}
		return nil, memberError(mc.ID, recvErr(stream, err))
	}
	if err := stream.CloseSend(); err != nil {
		return nil, memberError(mc.ID, err)
	}
	shares := make([]*he.KeySwitchShare, j.n)
	for k := range shares {
		r, err := stream.Recv()
		if err != nil {
			return nil, memberError(mc.ID, err)
		}
		if shares[k], err = p.params.Codecs().KeySwitchShare.Unmarshal(r.GetShare()); err != nil {
			return nil, permanent{fmt.Errorf("csp/%s sent a bad share %d: %w", mc.ID, k, err)}
		}
	}
	_ = transport.Finish(stream) // the shares are what counts
	return shares, nil
}

// sendProofs sends, in the order of owners, each owner's stored upload
// proofs: its OwnerUpload, then its UploadParts.
func (p *Proxy) sendProofs(sendMsg func(*fedpcav1.OwnerUpload, *fedpcav1.UploadPart) error, j *jobState, owners []string) error {
	var hd fedpcav1.OwnerUpload
	var part fedpcav1.UploadPart
	var buf []byte
	send := func(o string) error {
		u, _, err := j.answerOf(o)
		if err != nil || u == nil {
			return permanent{fmt.Errorf("owner %s's upload record: %v", o, err)}
		}
		digest, err := hex.DecodeString(u.Digest)
		if err != nil {
			return permanent{fmt.Errorf("owner %s's upload record: %w", o, err)}
		}
		r, err := p.openProofs(j.id, o, digest)
		if err != nil {
			return permanent{err}
		}
		defer r.Close()
		if err := r.next(&hd, &buf); err != nil {
			return permanent{fmt.Errorf("owner %s's stored upload: %w", o, err)}
		}
		if err := sendMsg(&hd, nil); err != nil {
			return err
		}
		for k := range j.n {
			if err := r.next(&part, &buf); err != nil {
				return permanent{fmt.Errorf("owner %s's stored proof %d: %w", o, k, err)}
			}
			if err := sendMsg(nil, &part); err != nil {
				return err
			}
		}
		return nil
	}
	for _, o := range owners {
		if err := send(o); err != nil {
			return err
		}
	}
	return nil
}

// recvErr returns the server's status when a send failed because the
// server ended the stream.
func recvErr(stream fedpcav1.CspService_KeySwitchClient, sendErr error) error {
	if errors.Is(sendErr, io.EOF) {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
	return sendErr
}

// memberError classifies a member's error: refusals are permanent (the
// member will refuse again), transport trouble is transient.
func memberError(id string, err error) error {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.FailedPrecondition, codes.Unauthenticated:
		return permanent{fmt.Errorf("csp/%s refused the key switch: %s", id, status.Convert(err).Message())}
	}
	return fmt.Errorf("csp/%s: %s", id, status.Convert(err).Message())
}

func (p *Proxy) storeShares(j *jobState, pt uint32, shares []*he.KeySwitchShare) error {
	enc := make([][]byte, len(shares))
	for i, s := range shares {
		enc[i] = p.params.Codecs().KeySwitchShare.Marshal(s)
	}
	return p.store.putShares(j.id, pt, enc)
}
