package proxy

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/transport"
)

// solveAllowance is the time a components job's computation may take
// beyond CallTimeout.
const solveAllowance = 10 * time.Minute

// solve runs a sealed components job among its computing members (the
// active ones with a dealer; three, the active ones among them, when the
// members make their own randomness): each gets the key-switch request
// (which it verifies the same way), then the proxy relays their signed job
// keys, sums the active members' conversion shares for the receiver, with
// a dealer deals the correlated randomness (party i >= 1 its seed, party
// 0 its corrections, made by running the same program on zero shares),
// relays their sealed messages round by round, and keeps their sealed
// output shares as the result. The proxy sees no opening (sealed member to
// member) and no output (sealed to the user).
func (p *Proxy) solve(ctx context.Context, j *jobState) error {
	if err := p.replaceLost(ctx, j); err != nil {
		return err
	}
	active, owners, rec, in, err := p.startSwitch(j)
	if err != nil {
		return err
	}
	parties := rec.Parties
	if len(parties) == 0 {
		parties = active
	}
	err = p.solveWith(ctx, j, active, parties, owners, rec, in)
	var lost lostMember
	if errors.As(err, &lost) {
		j.mu.Lock()
		j.lost = parties[lost.party]
		j.mu.Unlock()
	}
	return err
}

// lostMember is a member lost during a computation (transport trouble, not
// a refusal) before any member sealed its output: the next attempt may run
// with other members.
type lostMember struct {
	party int
	error
}

func (e lostMember) Unwrap() error { return e.error }

// solveQuorumWait is how long a components job whose computation lost a
// member waits for enough members to be up (the lost one restarting, or
// another) before it fails.
const solveQuorumWait = 15 * time.Second

// replaceLost runs after a member was lost during the computation: the
// next attempt runs with members that are up, the lost one only if no
// other will do. A run is a whole: every member starts it afresh (new
// keys, seeds and conversion; a member stores its output only when it
// completes, and replays that output to the same request alone), so no
// run mixes with another and nothing is released twice.
func (p *Proxy) replaceLost(ctx context.Context, j *jobState) error {
	j.mu.Lock()
	lost, cur := j.lost, slices.Clone(j.rec.Parties)
	if len(cur) == 0 {
		cur = slices.Clone(j.rec.Active)
	}
	j.mu.Unlock()
	if lost == 0 {
		return nil
	}
	lostName := "csp/" + p.cfg.Committee[lost-1].ID
	active, parties, names, err := p.pickActive(ctx, j.spec, cur, lost)
	if err != nil {
		return fmt.Errorf("%s was lost during the computation and no other set of members is up: %w", lostName, err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lost = 0
	if slices.Equal(active, j.rec.Active) && slices.Equal(parties, j.rec.Parties) {
		return nil
	}
	p.log.Warn("member lost during the computation: computing again with other members", "job", j.id[:16], "lost", lostName, "active", strings.Join(names, ","), "parties", fmt.Sprint(parties))
	return p.commit(j, func(prog *jobProgress) {
		prog.Active, prog.CSPs, prog.Parties = active, names, parties
		prog.Reason = fmt.Sprintf("%s was lost during the computation; computing again with csp/%s", lostName, strings.Join(names, ", csp/"))
	}, func(prog *jobProgress) error { return p.store.setProgress(j.id, prog) })
}

// solveWith runs one attempt of the computation: the active members
// convert the sum, the parties compute.
func (p *Proxy) solveWith(ctx context.Context, j *jobState, active, parties []uint32, owners []string, rec jobRecord, in *switchState) error {
	pj, err := j.spec.Program(j.sch, len(owners))
	if err != nil {
		return permanent{err}
	}
	slices.Sort(active)
	n := len(parties)
	cctx, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout+time.Duration(len(owners)*j.n)*verifyAllowance+solveAllowance)
	defer cancel()

	var dealer *mpc.Dealer
	if j.spec.Dealt() {
		if dealer, err = mpc.NewDealer(n, rand.Reader); err != nil {
			return err
		}
	}
	var replicated []uint32
	if !j.spec.Dealt() {
		replicated = parties
	}
	streams := make([]fedpcav1.CspService_SolveClient, n)
	names := make([]string, n)
	converting := make([]bool, n)
	for i, pt := range parties {
		converting[i] = slices.Contains(active, pt)
	}
	for i, pt := range parties {
		mc, err := p.member(int(pt) - 1)
		if err != nil {
			return err
		}
		names[i] = mc.ID
		if streams[i], err = mc.client.Solve(cctx); err != nil {
			return lose(i, memberError(mc.ID, err))
		}
		hd := &fedpcav1.SolveHeader{Job: &fedpcav1.KeySwitchHeader{JobId: j.id, Spec: rec.Spec, Signature: rec.Signature, UserCertificate: rec.UserCert,
			UserPublicKey: in.userPK, Schema: rec.Schema, Active: active, Owners: owners, Ciphertexts: uint32(j.n), JobOwnerRefs: transport.OwnerRefs(rec.Owners)},
			Party: uint32(i), Parties: replicated}
		if dealer != nil && i > 0 {
			s := dealer.Seed(i)
			hd.Seed = s[:]
		}
		if err := p.sendSolveRequest(streams[i], j, owners, in, hd, converting[i]); err != nil {
			if _, ok := err.(permanent); ok {
				return err
			}
			return lose(i, memberError(mc.ID, solveRecvErr(streams[i], err)))
		}
	}
	receiver := slices.Index(parties, slices.Min(active))
	outputs, err := p.runSolve(cctx, j, pj, dealer, streams, names, converting, receiver)
	if err != nil {
		return err
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	err = p.commit(j, func(prog *jobProgress) {
		prog.State, prog.Reason = fedpcav1.JobState_JOB_STATE_DONE, "components ready for the user"
		prog.Timings.KeySwitch = time.Since(prog.SwitchStarted).Seconds()
	}, func(prog *jobProgress) error { return p.store.finish(j.id, prog, outputs) })
	if err != nil {
		return err
	}
	j.sealed = nil
	p.m.phases.WithLabelValues("key_switch").Observe(j.rec.Timings.KeySwitch)
	p.log.Info("job done", "job", j.id[:16], "owners", len(owners), "release", "components", "randomness", j.spec.Randomness)
	return nil
}

// sendSolveRequest sends a member the header and, if it converts the sum
// (an active member), the sum and the included owners' uploads.
func (p *Proxy) sendSolveRequest(stream fedpcav1.CspService_SolveClient, j *jobState, owners []string, in *switchState, hd *fedpcav1.SolveHeader, converting bool) error {
	if err := stream.Send(&fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Header{Header: hd}}); err != nil || !converting {
		return err
	}
	buf := make([]byte, 0, p.params.Codecs().Ciphertext.Size())
	for _, ct := range in.blinded {
		buf = p.params.Codecs().Ciphertext.Append(buf[:0], ct)
		if err := stream.Send(&fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Ciphertext{Ciphertext: buf}}); err != nil {
			return err
		}
	}
	return p.sendProofs(func(up *fedpcav1.OwnerUpload, part *fedpcav1.UploadPart) error {
		if up != nil {
			return stream.Send(&fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Upload{Upload: up}})
		}
		return stream.Send(&fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Part{Part: part}})
	}, j, owners)
}

// correction is one of party 0's dealt shares, with the number of rounds
// the dealer's run had opened when it was dealt: party 0 needs it before
// its next opening.
type correction struct {
	m     mpc.Mat
	round int
}

// runSolve runs the exchange after the requests: keys, conversion (by the
// converting parties, its aggregate to the receiver), the dealer's
// corrections when there is one, the rounds, the outputs (by party).
func (p *Proxy) runSolve(ctx context.Context, j *jobState, pj job.Program, dealer *mpc.Dealer, streams []fedpcav1.CspService_SolveClient, names []string, converting []bool, receiver int) ([][]byte, error) {
	n := len(streams)
	sealed := false // a member sent its output: the run is kept, for its replay
	fail := func(i int, err error) error {
		if sealed {
			return memberError(names[i], err)
		}
		return lose(i, memberError(names[i], err))
	}

	// Keys: each member's signed key, relayed to all.
	keys := &fedpcav1.SolveKeys{}
	for i, s := range streams {
		r, err := s.Recv()
		if err != nil {
			return nil, fail(i, err)
		}
		if r.GetKey() == nil {
			return nil, permanent{fmt.Errorf("csp/%s sent %T where its solve key was due", names[i], r.GetMsg())}
		}
		keys.Keys = append(keys.Keys, r.GetKey())
	}
	for i, s := range streams {
		if err := s.Send(&fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Keys{Keys: keys}}); err != nil {
			return nil, fail(i, err)
		}
	}
	// Conversion: the converting members' public shares summed, for the
	// receiver.
	shares := make([][]*he.ConversionShare, j.n)
	for i, s := range streams {
		if !converting[i] {
			continue
		}
		for k := range j.n {
			r, err := s.Recv()
			if err != nil {
				return nil, fail(i, err)
			}
			cs, err := p.params.Codecs().ConversionShare.Unmarshal(r.GetConversion())
			if err != nil {
				return nil, permanent{fmt.Errorf("csp/%s sent a bad conversion share %d: %w", names[i], k, err)}
			}
			shares[k] = append(shares[k], cs)
		}
	}
	for k := range j.n {
		agg, err := he.AggregateConversionShares(p.params, shares[k])
		if err != nil {
			return nil, permanent{err}
		}
		if err := streams[receiver].Send(&fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Conversion{Conversion: p.params.Codecs().ConversionShare.Marshal(agg)}}); err != nil {
			return nil, fail(receiver, err)
		}
	}

	deal, stop, err := p.deal(ctx, j, pj, dealer, n, func(m mpc.Mat) error {
		frames := job.Frames(len(m.V))
		for f, fr := range frames {
			c := &fedpcav1.Correction{Rows: uint32(m.R), Cols: uint32(m.C), Words: job.EncodeShare(m.V[fr[0]:fr[1]]), More: f < len(frames)-1}
			if err := streams[0].Send(&fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Correction{Correction: c}}); err != nil {
				return fail(0, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	defer stop()

	// Every member's messages, received in its own goroutine.
	inbox := make([]chan *fedpcav1.SolveResponse, n)
	errs := make(chan error, n)
	for i, s := range streams {
		inbox[i] = make(chan *fedpcav1.SolveResponse, 4)
		go func() {
			defer close(inbox[i])
			for {
				r, err := s.Recv()
				if err != nil {
					errs <- fail(i, err)
					return
				}
				select {
				case inbox[i] <- r:
				case <-ctx.Done():
					return
				}
				if r.GetOutput() != nil {
					return
				}
			}
		}()
	}
	recv := func(i int) (*fedpcav1.SolveResponse, error) {
		select {
		case r, ok := <-inbox[i]:
			if ok {
				return r, nil
			}
			select {
			case err := <-errs:
				return nil, err
			default:
				return nil, fail(i, errors.New("the member ended the computation"))
			}
		case err := <-errs:
			return nil, err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// The rounds: each member's frames of a round relayed to their
	// recipients as they come (the members queue what they receive, so a
	// member still sending its own frames never holds this up), until its
	// last frame to every other party (More false).
	relay := func(i int, r *fedpcav1.SolveResponse, round uint64, done []bool) (left int, err error) {
		if r.GetRound() == nil || r.GetRound().GetRound() != round {
			return 0, permanent{fmt.Errorf("csp/%s sent %T (round %d) where round %d was due", names[i], r.GetMsg(), r.GetRound().GetRound(), round)}
		}
		for _, o := range r.GetRound().GetOpenings() {
			to := int(o.GetToParty())
			if to >= n || to == i || int(o.GetFromParty()) != i || done[to] {
				return 0, permanent{fmt.Errorf("csp/%s sent a frame from party %d to party %d in round %d", names[i], o.GetFromParty(), to, round)}
			}
			if err := streams[to].Send(&fedpcav1.SolveRequest{Msg: &fedpcav1.SolveRequest_Round{Round: &fedpcav1.SolveRound{Round: round, Openings: []*fedpcav1.SealedOpening{o}}}}); err != nil {
				return 0, fail(to, err)
			}
			done[to] = !o.GetMore()
		}
		for to, d := range done {
			if to != i && !d {
				left++
			}
		}
		return left, nil
	}
	outputs := make([][]byte, n)
	for round := uint64(1); ; round++ {
		if err := deal(int(round - 1)); err != nil {
			return nil, err
		}
		first := make([]*fedpcav1.SolveResponse, n)
		done := 0
		for i := range n {
			r, err := recv(i)
			if err != nil {
				return nil, err
			}
			first[i] = r
			if r.GetOutput() != nil {
				outputs[i] = r.GetOutput()
				sealed = true
				done++
			}
		}
		if done == n {
			break
		}
		if done > 0 {
			return nil, permanent{fmt.Errorf("the members ended the computation at different rounds (round %d)", round)}
		}
		for i := range n {
			r, sent := first[i], make([]bool, n)
			for {
				left, err := relay(i, r, round, sent)
				if err != nil {
					return nil, err
				}
				if left == 0 {
					break
				}
				if r, err = recv(i); err != nil {
					return nil, err
				}
			}
		}
	}
	for i, s := range streams {
		if err := s.CloseSend(); err != nil {
			return nil, fail(i, err)
		}
	}
	if err := stop(); err != nil {
		return nil, permanent{fmt.Errorf("the dealer's run: %w", err)}
	}
	return outputs, nil
}

// deal starts the dealer's run when there is a dealer: the same program on
// party 0's zero shares, its dealt shares out in order, each tagged with
// the round it precedes. It returns deal(upTo), which sends party 0 (with
// send) every correction due before round upTo + 1, and stop, which ends
// the run and reports its error (the dealer's run deals nothing after the
// last round). Without a dealer both do nothing.
func (p *Proxy) deal(ctx context.Context, j *jobState, pj job.Program, dealer *mpc.Dealer, n int, send func(mpc.Mat) error) (deal func(int) error, stop func() error, err error) {
	if dealer == nil {
		return func(int) error { return nil }, func() error { return nil }, nil
	}
	l, err := j.spec.Layout(j.sch)
	if err != nil {
		return nil, nil, permanent{err}
	}
	corrections := make(chan correction, 16)
	dry, err := mpc.NewDealerEngine(n, mpc.DefaultParams, dealer)
	if err != nil {
		return nil, nil, err
	}
	dctx, dcancel := context.WithCancel(ctx)
	dealer.SetSink(func(m mpc.Mat) {
		select {
		case corrections <- correction{m, dry.Cost.Rounds}:
		case <-dctx.Done():
		}
	})
	var dryErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(corrections)
		zero := mpc.ModT{T: p.params.T(), S: make([][]uint64, n)}
		zero.S[0] = make([]uint64, l.Len())
		_, dryErr = pj.Run(dry, zero)
	}()
	var pending *correction
	deal = func(upTo int) error {
		for {
			if pending == nil {
				c, ok := <-corrections
				if !ok {
					return nil
				}
				pending = &c
			}
			if pending.round > upTo {
				return nil
			}
			if err := send(pending.m); err != nil {
				return err
			}
			pending = nil
		}
	}
	var once sync.Once
	stop = func() error {
		once.Do(func() {
			dcancel()
			wg.Wait()
		})
		return dryErr
	}
	return deal, stop, nil
}

// lose marks a member's transport error as a lost member (a refusal stays
// permanent).
func lose(party int, err error) error {
	if _, ok := err.(permanent); ok {
		return err
	}
	return lostMember{party, err}
}

// solveRecvErr returns the member's status when a send failed because it
// ended the stream.
func solveRecvErr(stream fedpcav1.CspService_SolveClient, sendErr error) error {
	if errors.Is(sendErr, io.EOF) {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
	return sendErr
}
