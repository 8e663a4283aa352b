package owner

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/power"
	"github.com/fedpca/fedpca/protocol/schema"
)

// A power-method job (docs/PROTOCOL.md section 13) reaches an owner as T
// + 1 jobs: its parent (round 0), which the owner takes part in as in any
// job, its ledger charging the composed cost of all the rounds
// (power.Calibration.Cost) keyed by the parent's ID; then each round t >=
// 1, a job of its own that names the parent in its ticket. A round is
// admitted without a further charge, only if the owner's round 0 upload
// was included (the parent's entry committed: an owner that missed or
// declined round 0 declines the rounds) and only after the last round it
// took part in (bucketRounds): its rows are in at most one release of
// each round number.

// bucketRounds holds, per parent power-method job, the last round this
// owner took part in (decimal), written in the transaction that stores the
// round's upload.
var bucketRounds = []byte("power-rounds")

// ticketRound returns the round a ticket is of (Round 0: the job itself).
func ticketRound(spec *job.Spec, info *fedpcav1.JobInfo) (job.RoundSpec, error) {
	if info.GetRoundSpec() == nil {
		return job.RoundSpec{}, nil
	}
	rs, err := job.ParseRoundSpec(info.GetRoundSpec())
	if err != nil {
		return rs, err
	}
	return rs, rs.Check(spec)
}

// jobCost is what a job charges the ledger: its calibration's cost (a
// power job's composed cost of all its rounds); nothing without noise
// (allowed only by an explicit policy, for tests).
func jobCost(spec *job.Spec, sch *schema.Schema) (dp.Cost, error) {
	if spec.NoNoise {
		return dp.Cost{}, nil
	}
	if spec.Power != nil {
		cal, err := spec.PowerCalibration(sch)
		return cal.Cost, err
	}
	cal, err := spec.Calibration(sch)
	return cal.Cost, err
}

// readStatistic reads the rows into the job's statistic, packed: the
// statistics' (ReadRows), or a power job's round (ReadPowerRows; q nil for
// round 0).
func readStatistic(spec *job.Spec, sch *schema.Schema, rows schema.Rows, q *power.QMatrix) ([]int64, job.ReadReport, error) {
	if spec.Power != nil {
		acc, rep, err := job.ReadPowerRows(spec, sch, rows, q)
		if err != nil {
			return nil, rep, err
		}
		return acc.Values(), rep, nil
	}
	acc, rep, err := job.ReadRows(spec, sch, rows)
	if err != nil {
		return nil, rep, err
	}
	return acc.Pack(), rep, nil
}

// roundAdmission decides whether this owner may take part in a round,
// before it reads its rows: a refusal (declined for good), an error (to
// try again: its round 0 upload is not settled yet), or the last round it
// took part in, which the round must come after.
func (o *Owner) roundAdmission(dataset string, round job.RoundSpec) (after int, r *refusal, err error) {
	err = o.db.View(func(tx *bolt.Tx) error {
		after, r, err = o.roundTx(tx, dataset, round)
		return err
	})
	return after, r, err
}

// roundTx is roundAdmission within a transaction.
func (o *Owner) roundTx(tx *bolt.Tx, dataset string, round job.RoundSpec) (int, *refusal, error) {
	state, err := o.ledger.stateTx(tx, dataset, round.Parent)
	if err != nil {
		return 0, nil, err
	}
	switch state {
	case Committed:
	case Reserved:
		return 0, nil, fmt.Errorf("this owner's round 0 upload to job %s… is not settled yet", round.Parent[:12])
	default:
		return 0, refuse(job.DeclineUnavailable, "this owner's rows are not in round 0 of job %s… (ledger: %q): it takes part in the rounds of a power-method job it was charged for at round 0 only",
			round.Parent[:12], state), nil
	}
	after := 0
	if b := tx.Bucket(bucketRounds); b != nil {
		if v := b.Get([]byte(round.Parent)); v != nil {
			if after, err = strconv.Atoi(string(v)); err != nil {
				return 0, nil, fmt.Errorf("the last round of job %s… noted: %w", round.Parent[:12], err)
			}
		}
	}
	if round.Round <= after {
		return after, refuse(job.DeclineInvalidJob, "round %d of job %s…: this owner took part in round %d already: a power-method job's rounds come once each, in order", round.Round, round.Parent[:12], after), nil
	}
	return after, nil, nil
}

// takeRoundTx admits the round again in the transaction that stores its
// upload and notes it as the last round taken part in.
func (o *Owner) takeRoundTx(tx *bolt.Tx, dataset string, round job.RoundSpec) (*refusal, error) {
	if _, r, err := o.roundTx(tx, dataset, round); r != nil || err != nil {
		return r, err
	}
	b, err := tx.CreateBucketIfNotExists(bucketRounds)
	if err != nil {
		return nil, err
	}
	return nil, b.Put([]byte(round.Parent), []byte(strconv.Itoa(round.Round)))
}

// fetchMatrix fetches a round's public matrix from the proxy (checked by
// the caller: RoundSpec.CheckMatrix).
func (o *Owner) fetchMatrix(ctx context.Context, id string, spec *job.Spec, sch *schema.Schema) (*power.QMatrix, error) {
	cctx, cancel := context.WithTimeout(ctx, uploadTimeout)
	defer cancel()
	stream, err := o.proxy.FetchRoundMatrix(cctx, &fedpcav1.FetchRoundMatrixRequest{JobId: id})
	if err != nil {
		return nil, err
	}
	return job.ReadMatrix(spec, sch, func() ([]byte, error) {
		m, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		if m.GetFrame() == nil {
			return nil, errors.New("the proxy sent no frame")
		}
		return m.GetFrame().GetWords(), nil
	})
}
