package user

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"gonum.org/v1/gonum/mat"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/power"
	"github.com/fedpca/fedpca/protocol/schema"
)

// powerQMargin is the bits power.ChooseQBits leaves the noise, and
// powerQBits the public matrices' precision a job's default row cap keeps
// (rounding 2^-13 of an entry), when the row cap allows it.
const (
	powerQMargin = 3
	powerQBits   = 12
)

// powerRows sets a power job's row cap (perOwner, or 0: the largest power
// of two that leaves the public matrices powerQBits bits, or at least
// power.MinQBits) and its matrices' bits h when the spec leaves them 0
// (power.ChooseQBits), and names the quantised public start, if any, by its
// hash.
func (c *Client) powerRows(s *job.Spec, sch *schema.Schema, perOwner int64, start *mat.Dense) error {
	try := func(rows int64, minBits uint) error {
		if err := s.SetOwnerRows(rows); err != nil {
			return err
		}
		h := s.Power.QBits
		if h == 0 {
			var err error
			if h, err = power.ChooseQBits(s.MaxRows, sch.Bound(), powerQMargin); err != nil {
				return err
			}
		}
		if h < minBits {
			return fmt.Errorf("h = %d below %d", h, minBits)
		}
		ps := *s.Power
		ps.QBits = h
		t := *s
		t.Power = &ps
		if err := t.Check(sch, c.params); err != nil {
			return err
		}
		s.Power.QBits = h
		return nil
	}
	if perOwner > 0 {
		if err := try(perOwner, power.MinQBits); err != nil {
			return err
		}
	} else {
		var err error
		for _, minBits := range []uint{powerQBits, power.MinQBits} {
			for rows := int64(1) << 30; rows >= 1; rows /= 2 {
				if err = try(rows, minBits); err == nil {
					break
				}
			}
			if err == nil {
				break
			}
		}
		if err != nil {
			return fmt.Errorf("job spec: no row cap lets the power method's public matrices keep %d bits: %w", power.MinQBits, err)
		}
	}
	if start != nil {
		pr, err := s.PowerParams(sch)
		if err != nil {
			return err
		}
		q, err := quantisedStart(pr, start)
		if err != nil {
			return err
		}
		h := q.Hash()
		s.Power.Start = hex.EncodeToString(h[:])
	}
	return nil
}

// quantisedStart is round 1's public matrix: the public start's columns
// orthonormalised (power.StartFrom), or the seed's (power.Start), quantised.
func quantisedStart(pr power.Params, start *mat.Dense) (*power.QMatrix, error) {
	var q0 *mat.Dense
	var err error
	if start != nil {
		q0, err = power.StartFrom(pr, start)
	} else {
		q0, err = power.Start(pr)
	}
	if err != nil {
		return nil, err
	}
	q, _, err := power.Quantize(q0, pr.QBits)
	return q, err
}

// PowerProgress is told of each round's status as it changes (round 0 is
// the parent job).
type PowerProgress func(round int, st *fedpcav1.JobStatus)

// RunPower runs a power-method job whose parent spec this client built
// (Spec with Request.Power; start is the same public start matrix, or nil):
// it creates the parent job (round 0), and after each round's release
// computes the next public matrix from it, signs the next round's spec and
// opens the round (CreateRound), until round T; then it takes the
// components from the last release (power.Finish, or power.FinishRitz for a
// job that starts from a public matrix) and returns the result document,
// with the privacy accounting of the composed cost that every owner's
// ledger charged once. A round that fails ends the job with its reason.
func (c *Client) RunPower(ctx context.Context, s *job.Spec, sch *schema.Schema, start *mat.Dense, progress PowerProgress) (*job.Result, error) {
	if c.cfg.Keys.Secret == nil {
		return nil, ErrNoKeys
	}
	if _, err := c.Submit(ctx, s, sch); err != nil {
		return nil, err
	}
	return c.ResumePower(ctx, s, sch, start, progress)
}

// ResumePower follows a power-method job the proxy holds (its parent
// created, by this client or an earlier run: user fetch) from round 0 to
// the result as RunPower does: the rounds already released are fetched and
// decoded again, each next matrix is the same (the decoding is
// deterministic), so each round already opened is opened again as the same
// round (CreateRound is idempotent) and the rest are opened in turn, each
// before its deadline. start must be the public matrix the job names (nil
// for a job that starts from its seed).
func (c *Client) ResumePower(ctx context.Context, s *job.Spec, sch *schema.Schema, start *mat.Dense, progress PowerProgress) (*job.Result, error) {
	if c.cfg.Keys.Secret == nil {
		return nil, ErrNoKeys
	}
	pr, err := s.PowerParams(sch)
	if err != nil {
		return nil, err
	}
	cal, err := s.PowerCalibration(sch)
	if err != nil {
		return nil, err
	}
	if (start != nil) != (s.Power.Start != "") {
		return nil, fmt.Errorf("job %s: a start matrix given: %v; the job names one: %v", short(s.ID()), start != nil, s.Power.Start != "")
	}
	// Round 1's public matrix: the start's, which must be the one the job
	// names, or the seed's.
	q, err := quantisedStart(pr, start)
	if err != nil {
		return nil, err
	}
	if h := q.Hash(); start != nil && hex.EncodeToString(h[:]) != s.Power.Start {
		return nil, fmt.Errorf("job %s starts from the public matrix %s…; the one given is %s…", short(s.ID()), s.Power.Start[:12], hex.EncodeToString(h[:6]))
	}
	doc := job.PowerDoc{P: pr.P, Rounds: pr.Rounds, Seed: s.Power.Seed, Start: s.Power.Start, QBits: pr.QBits, Finish: "svd"}
	if start != nil {
		doc.Finish = "ritz"
	}
	// Round 0: the mean.
	vals, each, err := c.roundRelease(ctx, s, sch, job.RoundSpec{}, progress)
	if err != nil {
		return nil, err
	}
	doc.Each = append(doc.Each, each)
	mean, err := power.DecodeMean(pr, cal, vals)
	if err != nil {
		return nil, err
	}
	doc.Shrink = mean.Shrink
	var yc *mat.Dense
	for r := 1; r <= pr.Rounds; r++ {
		rs := job.NewRoundSpec(s, r, q)
		if err := c.openRound(ctx, s, rs, q); err != nil {
			return nil, err
		}
		vals, each, err := c.roundRelease(ctx, s, sch, rs, progress)
		if err != nil {
			return nil, err
		}
		each.QHash = rs.QHash
		doc.Each = append(doc.Each, each)
		if yc, err = power.DecodeRound(pr, q, vals, mean); err != nil {
			return nil, err
		}
		if r < pr.Rounds {
			if q, err = power.Next(pr, yc); err != nil {
				return nil, fmt.Errorf("round %d's public matrix: %w", r+1, err)
			}
		}
	}
	finish := power.Finish
	if doc.Finish == "ritz" {
		finish = power.FinishRitz
	}
	comps, err := finish(pr, q.Float(), yc)
	if err != nil {
		return nil, err
	}
	pv, err := job.PowerPrivacy(s, sch)
	if err != nil {
		return nil, err
	}
	return job.PowerResult(s, sch, comps, mean.N, doc, pv, c.params.ID())
}

// openRound signs a round's spec and opens the round on the proxy with its
// public matrix, retrying until the round's deadline (CreateRound is
// idempotent).
func (c *Client) openRound(ctx context.Context, s *job.Spec, rs job.RoundSpec, q *power.QMatrix) error {
	var sig []byte
	if c.cfg.Dialer.Creds != nil {
		var err error
		if sig, err = rs.Sign(c.cfg.Dialer.Creds.Signer()); err != nil {
			return err
		}
	}
	frames := job.MatrixFrames(q)
	what := fmt.Sprintf("open round %d of job %s on the proxy", rs.Round, short(s.ID()))
	return c.callBefore(ctx, what, s.RoundDeadline(rs.Round), "round "+short(rs.ID()), func(ctx context.Context) error {
		stream, err := c.proxy.CreateRound(ctx)
		if err != nil {
			return err
		}
		send := func(m *fedpcav1.CreateRoundRequest) error {
			if err := stream.Send(m); errors.Is(err, io.EOF) {
				return nil // the proxy answered early (the round exists): its answer follows
			} else if err != nil {
				return err
			}
			return nil
		}
		if err := send(&fedpcav1.CreateRoundRequest{Msg: &fedpcav1.CreateRoundRequest_Header{Header: &fedpcav1.RoundHeader{RoundSpec: rs.Canonical(), Signature: sig}}}); err != nil {
			return err
		}
		for _, f := range frames {
			if err := send(&fedpcav1.CreateRoundRequest{Msg: &fedpcav1.CreateRoundRequest_Frame{Frame: &fedpcav1.MatrixFrame{Words: f}}}); err != nil {
				return err
			}
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			return err
		}
		if resp.GetJob().GetJobId() != rs.ID() {
			return fmt.Errorf("the proxy answered for job %q, not round %s", resp.GetJob().GetJobId(), short(rs.ID()))
		}
		return nil
	})
}

// roundRelease waits for a round (round.Round 0: the parent job) to end,
// downloads its release, checks its noise parties and decrypts it.
func (c *Client) roundRelease(ctx context.Context, s *job.Spec, sch *schema.Schema, round job.RoundSpec, progress PowerProgress) ([]int64, job.PowerRound, error) {
	id := job.JobID(s, round)
	each := job.PowerRound{Round: round.Round, JobID: id}
	var watch func(*fedpcav1.JobStatus)
	if progress != nil {
		watch = func(st *fedpcav1.JobStatus) { progress(round.Round, st) }
	}
	st, err := c.Wait(ctx, id, watch)
	if err != nil {
		return nil, each, err
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_DONE {
		return nil, each, fmt.Errorf("round %d of job %s (job %s) failed: %s", round.Round, short(s.ID()), short(id), st.GetReason())
	}
	n, err := s.RoundLen(sch, round.Round)
	if err != nil {
		return nil, each, err
	}
	hd, cts, _, err := c.fetchRelease(ctx, s, id, c.params.Chunks(n))
	if err != nil {
		return nil, each, fmt.Errorf("round %d: %w", round.Round, err)
	}
	each.Owners, each.CSPs = hd.GetOwners(), hd.GetCspMembers()
	vals, err := he.NewDecryptor(c.params, c.cfg.Keys.Secret).DecryptSwitched(cts, n)
	if err != nil {
		return nil, each, fmt.Errorf("round %d: %w", round.Round, err)
	}
	return vals, each, nil
}
