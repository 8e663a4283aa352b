package owner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/power"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/fedpca/fedpca/transport"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

type jobNote struct {
	State   Part   `json:"state"`
	Dataset string `json:"dataset"`
	// Code is the decline code sent to the proxy (job.Decline's name);
	// Reason the local detail, which never leaves the owner.
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	Blobs  int    `json:"blobs,omitempty"`
	// Read is what reading the rows for the job found (local only).
	Read *job.ReadReport `json:"read,omitempty"`
	// Public is what the decline says besides its code (sent with it).
	Public *job.DeclineDetail `json:"public,omitempty"`
	// Unreported marks a decline the proxy has not acknowledged yet.
	Unreported bool `json:"unreported,omitempty"`
	// Parent and Round, for round Round >= 1 of a power-method job: its
	// parent job, whose ledger entry (charged at round 0) is the round's
	// cost; the round itself has no entry.
	Parent string    `json:"parent,omitempty"`
	Round  int       `json:"round,omitempty"`
	At     time.Time `json:"at"`
}

// charged reports whether the job's own ledger entry (keyed by its ID)
// holds its cost: every job but a power job's round >= 1.
func (n jobNote) charged() bool { return n.Round == 0 }

// next is the note of the job in another part, keeping what it says of the
// job (dataset, round, read report).
func (n jobNote) next(state Part, reason string) jobNote {
	return jobNote{State: state, Dataset: n.Dataset, Reason: reason, Read: n.Read, Parent: n.Parent, Round: n.Round}
}

// bucketUploads holds each stored upload until it is settled: job/NNNNNN
// the ciphertexts' bytes, job/proof/NNNNNN their proofs, job/signature the
// owner's signature of the upload statement.
var bucketUploads = []byte("uploads")

// JobRecord is what this owner did about a job.
type JobRecord struct {
	Job     string `json:"job"`
	State   Part   `json:"state"`
	Dataset string `json:"dataset,omitempty"`
	// Code is the decline code the proxy was told (declined jobs only);
	// Reason is the local detail.
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Read is what reading the rows found: rows used, clipped, skipped and
	// dropped (this owner's own record; never sent).
	Read *job.ReadReport `json:"read,omitempty"`
	At   time.Time       `json:"at"`
}

// JobRecords returns this owner's record of every job it has seen.
func (o *Owner) JobRecords() ([]JobRecord, error) {
	var out []JobRecord
	err := o.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			var n jobNote
			if err := json.Unmarshal(v, &n); err != nil {
				return fmt.Errorf("job %s: %w", k, err)
			}
			out = append(out, JobRecord{Job: string(k), State: n.State, Dataset: n.Dataset, Code: n.Code, Reason: n.Reason, Read: n.Read, At: n.At})
			return nil
		})
	})
	return out, err
}

// note returns this owner's note about a job, nil if it has none. A note
// that does not decode (decodeNote) is logged and read as skipped: the owner
// leaves that job alone rather than risk taking part twice.
func (o *Owner) note(id string) *jobNote {
	var n *jobNote
	_ = o.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketJobs).Get([]byte(id)); v != nil {
			var err error
			if n, err = o.decodeNote(v); err != nil {
				o.log.Error("bad job note; the job is left alone", "job", id, "error", err)
				n = &jobNote{State: PartSkipped, Reason: err.Error()}
			}
		}
		return nil
	})
	return n
}

// decodeNote decodes a job note read back from the store and checks it: a
// known state, and no more stored ciphertexts than a job can have.
func (o *Owner) decodeNote(v []byte) (*jobNote, error) {
	var n jobNote
	if err := json.Unmarshal(v, &n); err != nil {
		return nil, fmt.Errorf("job note: %w", err)
	}
	if !n.State.Known() {
		return nil, fmt.Errorf("job note: unknown state %q", n.State)
	}
	if n.Blobs < 0 || n.Blobs > o.params.Chunks(stats.MaxLen) {
		return nil, fmt.Errorf("job note: %d stored ciphertexts", n.Blobs)
	}
	return &n, nil
}

// putNote writes a job's note, refusing a transition its part does not
// allow (Part.CanBecome).
func putNote(tx *bolt.Tx, id string, n jobNote) error {
	var from jobNote
	if v := tx.Bucket(bucketJobs).Get([]byte(id)); v != nil {
		if err := json.Unmarshal(v, &from); err != nil {
			return fmt.Errorf("job %s: its note: %w", id, err)
		}
	}
	if err := checkPart(id, from.State, n.State); err != nil {
		return err
	}
	n.At = time.Now().UTC()
	v, err := json.Marshal(n)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketJobs).Put([]byte(id), v)
}

func (o *Owner) setNote(id string, n jobNote) {
	if err := o.db.Update(func(tx *bolt.Tx) error { return putNote(tx, id, n) }); err != nil {
		o.log.Error("cannot record job note", "job", id[:16], "error", err)
	}
}

// readReport returns the read report kept in a job's note, if any.
func (o *Owner) readReport(tx *bolt.Tx, id string) *job.ReadReport {
	if v := tx.Bucket(bucketJobs).Get([]byte(id)); v != nil {
		if n, err := o.decodeNote(v); err == nil {
			return n.Read
		}
	}
	return nil
}

func blobKey(id string, i int) []byte { return []byte(fmt.Sprintf("%s/%06d", id, i)) }

// pending returns the jobs in which this owner has a part that is not
// settled yet: an upload not acknowledged, a job not ended, a decline not
// reported, or budget reserved for a job with no note (the owner stopped
// between reserving and storing its upload). Finding them reads every note
// and ledger entry the owner ever wrote, and the run loop asks at every
// tick, so the answer is kept until the store changes (bbolt's count of
// page writes, which every committed write transaction raises).
func (o *Owner) pending() []string {
	st := o.db.Stats()
	gen := st.TxStats.GetWrite() // read before the scan: a write during it forces the next one
	o.pend.mu.Lock()
	defer o.pend.mu.Unlock()
	if o.pend.valid && o.pend.gen == gen {
		return slices.Clone(o.pend.ids)
	}
	var out []string
	_ = o.db.View(func(tx *bolt.Tx) error {
		notes := tx.Bucket(bucketJobs)
		if err := notes.ForEach(func(k, v []byte) error {
			n, err := o.decodeNote(v)
			if err == nil && job.ValidJobID(string(k)) && (n.State == PartUploading || n.State == PartUploaded || n.Unreported) {
				out = append(out, string(k))
			}
			return nil
		}); err != nil {
			return err
		}
		return tx.Bucket(bucketLedger).ForEachBucket(func(ds []byte) error {
			return tx.Bucket(bucketLedger).Bucket(ds).ForEach(func(k, v []byte) error {
				var e entry
				if json.Unmarshal(v, &e) == nil && e.State == Reserved && notes.Get(k) == nil {
					out = append(out, string(k))
				}
				return nil
			})
		})
	})
	o.pend.ids, o.pend.gen, o.pend.valid = out, gen, true
	return slices.Clone(out)
}

// handle moves this owner's part in a job one step forward.
func (o *Owner) handle(ctx context.Context, st *fedpcav1.JobStatus) {
	id := st.GetJobId()
	note := o.note(id)
	ended := st.GetState() == fedpcav1.JobState_JOB_STATE_DONE || st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED
	switch {
	case note == nil && st.GetState() == fedpcav1.JobState_JOB_STATE_OPEN:
		r := o.watching.takeTicket(id) // sent with the job's announcement
		if r == nil {
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			var err error
			r, err = o.proxy.GetJob(cctx, &fedpcav1.GetJobRequest{JobId: id, Ticket: true})
			cancel()
			if err != nil {
				o.log.Warn("cannot fetch the job's ticket; will retry", "job", id[:16], "error", status.Convert(err).Message())
				return
			}
		}
		o.takePart(ctx, st, r)
	case note == nil:
		// Ended before this owner took part, or while it was down between
		// reserving budget and storing its upload: nothing was sent, so
		// the reservation (if any) goes back.
		released, err := o.ledger.ReleaseIfReserved(st.GetDataset(), id)
		if err != nil {
			o.log.Error("ledger release", "job", id[:16], "error", err)
			return
		}
		if released {
			o.log.Info("job ended before this owner uploaded: reservation released", "job", id[:16], "reason", st.GetReason())
		}
		o.setNote(id, jobNote{State: PartSkipped, Dataset: st.GetDataset(), Reason: "ended before this owner took part"})
	case note.State == PartDeclined && note.Unreported:
		if st.GetState() != fedpcav1.JobState_JOB_STATE_OPEN {
			n := *note
			n.Unreported = false
			o.setNote(id, n)
			return
		}
		o.reportDecline(ctx, id, *note)
	case note.State == PartUploading:
		o.resume(ctx, st, note, nil)
	case note.State == PartUploaded && note.charged() && st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED && !st.GetSwitched():
		if err := o.ledger.Refund(note.Dataset, id); err != nil {
			o.log.Error("refund", "job", id[:16], "error", err)
			return
		}
		o.setNote(id, note.next(PartRefunded, st.GetReason()))
		o.log.Info("job failed before any key switch: budget refunded", "job", id[:16], "reason", st.GetReason())
	case note.State == PartUploaded && ended:
		// (A power job's later round that failed: its cost was charged
		// at round 0, which was released.)
		o.setNote(id, note.next(PartCompleted, st.GetReason()))
	}
	if ended {
		o.reportBudget(ctx, id, st.GetDataset())
		o.prepare(ctx) // for the next job, now that this one no longer needs the CPU
	}
}

// reportBudget tells the proxy this owner's budget for dataset once its part
// in the ended job is settled (display only: the proxy would otherwise show
// the reservation reported with the upload until the next job). One attempt:
// a lost report is replaced by the next one.
func (o *Owner) reportBudget(ctx context.Context, id, dataset string) {
	b := o.budgetReport(dataset)
	if b == nil || o.proxy == nil { // no ledger for it; no proxy connection (unit tests)
		return
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := o.proxy.ReportBudget(cctx, &fedpcav1.ReportBudgetRequest{JobId: id, Budget: b}); err != nil {
		o.log.Debug("budget report not delivered", "job", id[:16], "error", status.Convert(err).Message())
	}
}

// takePart decides about a new job (st is its status, t its ticket) and,
// if the owner takes part, reserves budget, computes, stores and uploads
// its share. Whether it takes part never depends on its rows.
func (o *Owner) takePart(ctx context.Context, st *fedpcav1.JobStatus, t *fedpcav1.GetJobResponse) {
	id := st.GetJobId()
	taken := time.Now()
	spec, ds, sch, r := o.checkTicket(id, t)
	if r != nil {
		dataset := ""
		if ds != nil {
			dataset = ds.Schema.ID
		}
		o.decline(ctx, id, dataset, r)
		return
	}
	dataset := spec.Dataset
	ck, err := o.committeeKey(ctx, spec)
	var pin *job.PinError
	switch {
	case errors.As(err, &pin):
		o.log.Error("this owner's committee pin does not match the committee the proxy names: refusing the job, nothing is uploaded; check --committee against the members' key fingerprints",
			"job", id[:16], "error", err)
		o.decline(ctx, id, dataset, refuse(job.DeclineCommitteePin, "%v", err))
		return
	case errors.Is(err, errWrongCommittee):
		o.log.Error("the proxy's committee key is not attested by the committee: refusing the job, nothing is uploaded", "job", id[:16], "error", err)
		o.decline(ctx, id, dataset, refuse(job.DeclineCommitteeKey, "%v", err))
		return
	}
	if err != nil {
		o.log.Warn("cannot get the committee key; will retry", "job", id[:16], "error", status.Convert(err).Message())
		return
	}
	round, _ := ticketRound(spec, t.GetJob()) // checked by checkTicket
	cost, err := jobCost(spec, sch)
	if err != nil {
		o.decline(ctx, id, dataset, refuse(job.DeclineInvalidJob, "%v", err))
		return
	}
	release := exactRelease(spec, sch)
	// Look before reading the rows: a job the budget cannot pay, or one
	// this owner has settled already, is declined without computing. A
	// power job's later round is paid for by its parent's entry, charged
	// once at round 0 (the composed cost of all the rounds).
	after := 0
	if round.Round > 0 {
		var ref *refusal
		if after, ref, err = o.roundAdmission(dataset, round); ref != nil {
			o.decline(ctx, id, dataset, ref)
			return
		} else if err != nil {
			o.log.Warn("round not admitted yet; will retry", "job", id[:16], "error", err)
			return
		}
	} else if state, err := o.ledger.CanReserve(dataset, id, cost, release); errors.Is(err, ErrBudget) {
		o.decline(ctx, id, dataset, refuse(job.DeclineBudget, "%v", err))
		return
	} else if errors.Is(err, ErrExactJobs) {
		o.decline(ctx, id, dataset, o.exactJobsRefusal(err))
		return
	} else if err != nil {
		o.log.Error("ledger", "job", id[:16], "error", err)
		return
	} else if state != "" && state != Reserved {
		o.decline(ctx, id, dataset, refuse(job.DeclineUnavailable, "this owner already settled its part in the job (ledger: %s)", state))
		return
	}
	var q *power.QMatrix
	if round.Round > 0 {
		if q, err = o.fetchMatrix(ctx, id, spec, sch); err != nil {
			o.log.Warn("cannot fetch the round's public matrix; will retry", "job", id[:16], "error", transport.Message(err))
			return
		}
		if err := round.CheckMatrix(spec, sch, after, q); err != nil {
			o.decline(ctx, id, dataset, refuse(job.DeclineInvalidJob, "%v", err))
			return
		}
	}
	// Compute and store the encrypted share before sending anything.
	done := func() {}
	if o.cfg.Compute != nil {
		if err := o.cfg.Compute.Acquire(ctx, 1); err != nil {
			return // stopping: the next start settles the reservation
		}
		done = sync.OnceFunc(func() { o.cfg.Compute.Release(1) })
		defer done()
	}
	start := time.Now()
	rows, err := ds.OpenRows(ctx)
	if err != nil {
		o.decline(ctx, id, dataset, refuse(job.DeclineUnavailable, "cannot read the dataset: %v", err))
		return
	}
	vals, rep, err := readStatistic(spec, sch, rows, q)
	rows.Close()
	if err != nil {
		// The file's header does not fit the schema (a column the job's
		// schema reads, named), or the file cannot be read at all: neither
		// depends on its rows.
		r := refuse(job.DeclineUnavailable, "cannot compute statistics: %v", err)
		var re *schema.RowError
		if errors.As(err, &re) && re.Line == 1 {
			r.code = job.DeclineSchemaMismatch
			r.saying(job.SchemaDetail(sch.ColumnFeature(re.Column)))
		}
		o.decline(ctx, id, dataset, r)
		return
	}
	if rep.Skipped > 0 || rep.Dropped > 0 || rep.Missing > 0 {
		o.log.Warn("rows left out of the statistics (counted here only; nothing about them leaves this owner)", "job", id[:16], "dataset", dataset,
			"rows_used", rep.Rows, "skipped_unreadable", rep.Skipped, "dropped_over_max_owner_rows", rep.Dropped, "max_owner_rows", spec.MaxOwnerRows,
			"dropped_missing_value", rep.Missing, "filled_missing_value", rep.Filled,
			"first_skipped", strings.Join(rep.Examples, "; "))
	}
	var cts []*rlwe.Ciphertext
	var wits []zk.Witness
	err = ck.encrypt(func(enc *he.Encryptor) (n int, err error) {
		cts, wits, err = job.EncryptValues(spec, sch, enc, round.Round, vals, nil)
		return len(cts), err
	})
	if err != nil {
		o.decline(ctx, id, dataset, refuse(job.DeclineUnavailable, "cannot encrypt statistics: %v", err))
		return
	}
	up, err := o.prove(ck, id, cts, wits)
	if err != nil {
		o.decline(ctx, id, dataset, refuse(job.DeclineUnavailable, "cannot prove the upload: %v", err))
		return
	}
	compute := time.Since(start)
	if ctx.Err() != nil {
		return // stopping: nothing is reserved, stored or sent
	}
	// Reserve the budget (or, for a power job's later round, note the
	// round against its parent's entry) and store the upload in one
	// transaction, before anything is sent: a restart re-sends these
	// bytes, never a new draw.
	note := jobNote{State: PartUploading, Dataset: dataset, Blobs: len(cts), Read: &rep}
	if round.Round > 0 {
		note.Parent, note.Round = round.Parent, round.Round
	}
	var state string
	var refused *refusal
	err = o.db.Update(func(tx *bolt.Tx) error {
		if round.Round > 0 {
			var err error
			if refused, err = o.takeRoundTx(tx, dataset, round); err != nil || refused != nil {
				return errors.Join(err, errSettled)
			}
		} else {
			var err error
			if state, err = o.ledger.reserveTx(tx, dataset, id, cost, spec.Epsilon, spec.Delta, release); err != nil {
				return err
			}
			if state != Reserved {
				return errSettled
			}
		}
		if err := up.put(tx.Bucket(bucketUploads), id); err != nil {
			return err
		}
		return putNote(tx, id, note)
	})
	switch {
	case refused != nil:
		o.decline(ctx, id, dataset, refused)
		return
	case errors.Is(err, ErrBudget):
		// Another job took the budget while this one was computed.
		o.decline(ctx, id, dataset, refuse(job.DeclineBudget, "%v", err))
		return
	case errors.Is(err, ErrExactJobs):
		// Another exact job was admitted while this one was computed.
		o.decline(ctx, id, dataset, o.exactJobsRefusal(err))
		return
	case errors.Is(err, errSettled) && round.Round == 0:
		// The ledger settled this job already (this owner released its
		// reservation and stopped before noting why): never upload for it.
		o.decline(ctx, id, dataset, refuse(job.DeclineUnavailable, "this owner already settled its part in the job (ledger: %s)", state))
		return
	case err != nil:
		o.log.Error("cannot store the upload", "job", id[:16], "error", err)
		return
	}
	o.m.shares.Observe(compute.Seconds())
	o.log.Info("share computed", "job", id[:16], "dataset", dataset, "round", round.Round, "rows", rep.Rows, "clipped", rep.Clipped,
		"clipped_fraction", fmt.Sprintf("%.3f", rep.ClippedFraction()), "clamped", rep.Clamped, "skipped", rep.Skipped, "dropped", rep.Dropped, "missing_dropped", rep.Missing, "missing_filled", rep.Filled,
		"ciphertexts", len(cts), "ms", float64(compute.Microseconds())/1000, "store_ms", msSince(start.Add(compute)))
	done() // the upload is not computing
	if !o.hold(ctx, taken) {
		return // stopping: the next start sends the stored upload
	}
	o.resume(ctx, st, &note, up)
}

// upload is an owner's stored upload: its ciphertexts, their proofs and
// its signature of the upload statement.
type upload struct {
	cts, proofs [][]byte
	signature   []byte
}

// prove proves each ciphertext's c1 with its witness (the witnesses are
// dropped afterwards: they would decrypt the upload), signs the upload
// statement with the owner's certificate key (nothing to sign with in
// insecure mode) and encodes the ciphertexts.
func (o *Owner) prove(ck *committeeEnc, id string, cts []*rlwe.Ciphertext, wits []zk.Witness) (*upload, error) {
	proofs, digests, err := job.ProveUpload(o.params, ck.encs.proofs, id, o.cfg.ID, cts, wits, nil)
	clear(wits)
	if err != nil {
		return nil, err
	}
	up := &upload{cts: make([][]byte, len(cts)), proofs: proofs}
	for i, ct := range cts {
		up.cts[i] = o.params.Codecs().Ciphertext.Marshal(ct)
	}
	if creds := o.cfg.Dialer.Creds; creds != nil {
		if up.signature, err = seal.Sign(creds.Signer(), job.UploadContext, job.UploadStatement(id, o.cfg.ID, digests)); err != nil {
			return nil, fmt.Errorf("sign the upload: %w", err)
		}
	}
	return up, nil
}

func proofKey(id string, i int) []byte { return []byte(fmt.Sprintf("%s/proof/%06d", id, i)) }

func signatureKey(id string) []byte { return []byte(id + "/signature") }

// put stores the upload in the uploads bucket.
func (up *upload) put(b *bolt.Bucket, id string) error {
	for i := range up.cts {
		if err := b.Put(blobKey(id, i), up.cts[i]); err != nil {
			return err
		}
		if err := b.Put(proofKey(id, i), up.proofs[i]); err != nil {
			return err
		}
	}
	return b.Put(signatureKey(id), up.signature)
}

// readUpload reads a stored upload of n ciphertexts (nil if any part is
// missing).
func readUpload(b *bolt.Bucket, id string, n int) *upload {
	up := &upload{signature: bytes.Clone(b.Get(signatureKey(id)))}
	for i := range n {
		ct, pr := b.Get(blobKey(id, i)), b.Get(proofKey(id, i))
		if ct == nil || pr == nil {
			return nil
		}
		up.cts = append(up.cts, bytes.Clone(ct))
		up.proofs = append(up.proofs, bytes.Clone(pr))
	}
	return up
}

// errSettled aborts the transaction that would store an upload for a job
// the ledger has settled already.
var errSettled = errors.New("the job is settled in the ledger")

// checkTicket decides, without calling anyone, whether this owner may take
// part in job id as its ticket describes it: a well-formed spec whose hash
// is the ID, for a dataset this owner serves, with its schema or one that
// reads the rows the same way (the job's schema may choose other centers,
// scales and clip norm: the profile job's output; see
// schema.SameReading), signed by the user the spec names, whose signed
// owner list names this owner (by the inclusion proof that comes with the
// ticket), allowed by the policy, and valid for the schema and parameters. It returns the schema to
// read the rows with. Otherwise the refusal says why not (ds is set when the
// dataset is one of this owner's, for the budget report of the decline).
func (o *Owner) checkTicket(id string, t *fedpcav1.GetJobResponse) (spec *job.Spec, ds *Dataset, sch *schema.Schema, r *refusal) {
	info := t.GetJob()
	spec, err := job.ParseSpec(info.GetSpec())
	if err != nil {
		return nil, nil, nil, refuse(job.DeclineInvalidJob, "malformed job spec: %v", err)
	}
	ds, ok := o.datasets[spec.Dataset]
	if !ok {
		return nil, nil, nil, refuse(job.DeclineSchemaMismatch, "this owner does not serve dataset %q", spec.Dataset).
			saying(job.SchemaDetail(&schema.Difference{Field: "id", Feature: -1}))
	}
	round, err := ticketRound(spec, info)
	if err != nil {
		return nil, ds, nil, refuse(job.DeclineInvalidJob, "%v", err)
	}
	if want := job.JobID(spec, round); want != id {
		return nil, ds, nil, refuse(job.DeclineInvalidJob, "the job ID is not the hash of its spec (or the ID of its round)")
	}
	sch = ds.Schema
	if spec.SchemaHash != sch.HashHex() {
		js, err := schema.Parse(info.GetSchema())
		switch {
		case err != nil:
			return nil, ds, nil, refuse(job.DeclineSchemaMismatch, "the job's schema hash %s… differs from this owner's %s… for dataset %s, and the job carries no readable schema: %v", spec.SchemaHash[:12], sch.HashHex()[:12], sch.ID, err)
		case js.HashHex() != spec.SchemaHash:
			return nil, ds, nil, refuse(job.DeclineInvalidJob, "the job's schema is not the one its spec names")
		}
		if err := sch.SameReading(js); err != nil {
			return nil, ds, nil, refuse(job.DeclineSchemaMismatch, "the job's schema for dataset %s does not read the rows as this owner's does: %v", sch.ID, err).
				saying(job.SchemaDetail(sch.ReadingDifference(js)))
		}
		sch = js
	}
	user, err := transport.VerifyTicket(o.cfg.Dialer.Creds, spec, info.GetSignature(), info.GetUserCertificate())
	if err != nil {
		return nil, ds, nil, refuse(job.DeclineInvalidJob, "the job is not properly signed: %v", err)
	}
	if round.Round > 0 {
		if err := transport.VerifyRound(o.cfg.Dialer.Creds, spec, round, info.GetRoundSignature(), info.GetUserCertificate()); err != nil {
			return nil, ds, nil, refuse(job.DeclineInvalidJob, "%v", err)
		}
	}
	proof := job.OwnerProof{Index: int(t.GetOwnerProof().GetIndex()), Path: t.GetOwnerProof().GetPath()}
	me := job.Owner{ID: o.cfg.ID}
	if c := o.cfg.Dialer.Creds; c != nil {
		me.Key = c.Key
	}
	if err := spec.CheckMember(me, proof); err != nil {
		return nil, ds, nil, refuse(job.DeclineNotNamed, "%v: the job does not name this owner by its key %s (if the user named it, the user's roster holds another key for it)", err, me.Key)
	}
	if err := userOK(o.cfg.Policy, user); err != nil {
		return nil, ds, nil, refuse(job.DeclineUserNotAllowed, "%v", err)
	}
	if r := policyOK(o.cfg.Policy, spec, sch.D()); r != nil {
		return nil, ds, nil, r
	}
	if err := spec.Check(sch, o.params); err != nil {
		return nil, ds, nil, refuse(job.DeclineInvalidJob, "%v", err)
	}
	return spec, ds, sch, nil
}

// resume sends (or re-sends) a stored upload (up, or read from the store
// when nil), and settles the ledger when the job moved on without it.
func (o *Owner) resume(ctx context.Context, st *fedpcav1.JobStatus, note *jobNote, up *upload) {
	id := st.GetJobId()
	if st.GetCallerIncluded() {
		// Acknowledged before a crash: it is in the sum.
		o.settleUploaded(id, *note)
		return
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_OPEN {
		o.settleNotIncluded(id, *note, "the job closed before the upload was acknowledged: "+st.GetReason())
		return
	}
	// The first attempt sends the upload just computed, if any; later ones
	// read it from the store for each attempt: an owner told to come back
	// later holds none of it.
	inMemory := up
	loadUpload := func() (up *upload) {
		if inMemory != nil {
			up, inMemory = inMemory, nil
			return up
		}
		_ = o.db.View(func(tx *bolt.Tx) error {
			up = readUpload(tx.Bucket(bucketUploads), id, note.Blobs)
			return nil
		})
		return up
	}
	var uploaded int64
	// Retry transient failures with exponential backoff and full jitter
	// (so that thousands of owners told the proxy is busy spread out), until
	// the job's deadline, not past it; an owner that gives up tries again at
	// its next poll.
	deadline := time.Unix(st.GetDeadlineUnix(), 0)
	first := time.Now()
	attempts := 0
	var resp *fedpcav1.UploadResponse
	err := transport.Retry(ctx, transport.Call{What: "upload to job " + id[:16], Timeout: uploadTimeout, Backoff: uploadPause,
		Deadline: deadline, Serves: "job " + id[:16], Peer: "the proxy", Retryable: retryable,
		OnRetry: func(attempt int, err error) {
			if status.Code(err) != codes.ResourceExhausted {
				o.log.Warn("upload failed; retrying", "job", id[:16], "attempt", attempt, "error", status.Convert(err).Message())
			}
		}}, func(ctx context.Context) (err error) {
		attempts++
		sent := time.Now()
		up := loadUpload()
		if up == nil {
			return status.Error(codes.DataLoss, "the stored upload is incomplete")
		}
		resp, err = o.send(ctx, id, note.Dataset, up)
		o.m.uploads.WithLabelValues(uploadResult(err)).Inc()
		if err == nil {
			for i := range up.cts {
				uploaded += int64(len(up.cts[i]) + len(up.proofs[i]))
			}
			o.m.uploadSeconds.Observe(time.Since(sent).Seconds())
			// ms: from the first attempt to the acknowledgement (waits for
			// a busy proxy included); rpc_ms: the acknowledged attempt.
			o.log.Info("upload acknowledged", "job", id[:16], "again", resp.GetAlreadyIncluded(), "uploaded_owners", resp.GetUploadedOwners(),
				"attempts", attempts, "ms", msSince(first), "rpc_ms", msSince(sent))
		}
		return err
	})
	switch {
	case err == nil:
		o.m.uploadBytes.Add(float64(uploaded))
		o.settleUploaded(id, *note)
	case status.Code(err) == codes.AlreadyExists:
		// Another upload of ours is in the sum (the store was lost after
		// an acknowledged upload): the budget was spent.
		o.log.Error("the proxy holds another upload from this owner", "job", id[:16], "error", transport.Message(err))
		o.settleUploaded(id, *note)
	case ctx.Err() != nil || retryable(err):
		// Stopping, or the deadline came first: the next poll settles
		// the part once the job has closed.
		o.log.Warn("upload not acknowledged", "job", id[:16], "error", err)
	default:
		o.settleNotIncluded(id, *note, "upload refused: "+transport.Message(err))
	}
}

// An upload's attempt lasts at most uploadTimeout (waiting for admission
// among thousands of owners included), and no longer than the job's
// deadline (transport.Retry). After a failed attempt the owner pauses
// uploadPause (full jitter, at most 1 s) or the proxy's retry hint when it
// is busy; an attempt waits for the connection to the proxy, whose own
// reconnect backoff (10 s at most: thousands of owners) then bounds the
// recovery (docs/RELIABILITY.md, "Recovery after an outage").
const uploadTimeout = 10 * time.Minute

var uploadPause = transport.Backoff{Initial: 250 * time.Millisecond, Max: time.Second}

// send runs an upload: the header with the owner's signature; when the
// proxy admits it, each ciphertext and its proof message (its group's
// proof after a group's last ciphertext, empty after the others), one per
// message; then the acknowledgement. It waits for the connection to the
// proxy to be ready rather than failing at once while it backs off (the proxy
// restarting): the retries in resume then do not stack on the connection's
// own backoff.
func (o *Owner) send(ctx context.Context, id, dataset string, up *upload) (*fedpcav1.UploadResponse, error) {
	hd := &fedpcav1.UploadHeader{JobId: id, Ciphertexts: uint32(len(up.cts)), Digest: digest(up.cts), Budget: o.budgetReport(dataset), Signature: up.signature}
	return transport.Upload(ctx, o.proxy, hd, up.cts, up.proofs, grpc.WaitForReady(true))
}

// msSince is the time since t in milliseconds, for log fields.
func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// settleUploaded commits the job's budget (a power job's later round has
// none of its own) and notes the upload, in one transaction.
func (o *Owner) settleUploaded(id string, note jobNote) {
	err := o.db.Update(func(tx *bolt.Tx) error {
		if note.charged() {
			if err := o.ledger.transitionTx(tx, note.Dataset, id, Committed); err != nil {
				return fmt.Errorf("ledger commit: %w", err)
			}
		}
		if err := deleteBlobs(tx, id); err != nil {
			return err
		}
		note.Read = o.readReport(tx, id)
		return putNote(tx, id, note.next(PartUploaded, ""))
	})
	if err != nil {
		o.log.Error("cannot record the upload", "job", id[:16], "error", err)
	}
}

func (o *Owner) settleNotIncluded(id string, note jobNote, reason string) {
	if note.charged() {
		if err := o.ledger.Release(note.Dataset, id); err != nil {
			o.log.Error("ledger release", "job", id[:16], "error", err)
		}
	}
	err := o.db.Update(func(tx *bolt.Tx) error {
		if err := deleteBlobs(tx, id); err != nil {
			return err
		}
		note.Read = o.readReport(tx, id)
		return putNote(tx, id, note.next(PartReleased, reason))
	})
	if err != nil {
		o.log.Error("cannot record the release", "job", id[:16], "error", err)
	}
	o.log.Warn("upload not included; reservation released", "job", id[:16], "reason", reason)
}

func deleteBlobs(tx *bolt.Tx, id string) error {
	b := tx.Bucket(bucketUploads)
	c := b.Cursor()
	prefix := []byte(id + "/")
	var keys [][]byte
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func uploadResult(err error) string {
	switch {
	case err == nil:
		return "acknowledged"
	case retryable(err):
		return "retried"
	}
	return "refused"
}
