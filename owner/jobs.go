package owner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	bolt "go.etcd.io/bbolt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
)

// Job notes: what this owner did about a job.
const (
	noteDeclined  = "declined"
	noteUploading = "uploading" // reserved, upload stored, not acknowledged yet
	noteUploaded  = "uploaded"  // acknowledged, budget committed
	noteReleased  = "released"  // reservation returned, nothing included
	noteRefunded  = "refunded"  // included, but the job failed before any key switch
	noteSkipped   = "skipped"   // the job had ended before this owner saw it
	noteCompleted = "completed" // included, and the job ended (budget spent)
)

type jobNote struct {
	State   string    `json:"state"`
	Dataset string    `json:"dataset"`
	Reason  string    `json:"reason,omitempty"`
	Blobs   int       `json:"blobs,omitempty"`
	At      time.Time `json:"at"`
}

var bucketUploads = []byte("uploads") // job/NNNNNN -> stored ciphertext bytes

func (o *Owner) note(id string) *jobNote {
	var n *jobNote
	_ = o.db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucketJobs).Get([]byte(id)); v != nil {
			n = &jobNote{}
			return json.Unmarshal(v, n)
		}
		return nil
	})
	return n
}

func putNote(tx *bolt.Tx, id string, n jobNote) error {
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

func blobKey(id string, i int) []byte { return []byte(fmt.Sprintf("%s/%06d", id, i)) }

// pending returns the jobs in which this owner has a part that is not
// settled yet (an upload not acknowledged, or a job not ended).
func (o *Owner) pending() []string {
	var out []string
	_ = o.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJobs).ForEach(func(k, v []byte) error {
			var n jobNote
			if json.Unmarshal(v, &n) == nil && (n.State == noteUploading || n.State == noteUploaded) {
				out = append(out, string(k))
			}
			return nil
		})
	})
	return out
}

// handle moves this owner's part in a job one step forward.
func (o *Owner) handle(ctx context.Context, st *fedpcav1.JobStatus) {
	id := st.GetJobId()
	note := o.note(id)
	ended := st.GetState() == fedpcav1.JobState_JOB_STATE_DONE || st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED
	switch {
	case note == nil && st.GetState() == fedpcav1.JobState_JOB_STATE_OPEN:
		r, err := o.proxy.GetJob(ctx, &fedpcav1.GetJobRequest{JobId: id, Ticket: true})
		if err != nil {
			o.log.Warn("cannot fetch the job's ticket", "job", id[:16], "error", status.Convert(err).Message())
			return
		}
		o.takePart(ctx, st, r.GetJob())
	case note == nil:
		o.setNote(id, jobNote{State: noteSkipped, Reason: "ended before this owner saw it"})
	case note.State == noteUploading:
		o.resume(ctx, st, note)
	case note.State == noteUploaded && st.GetState() == fedpcav1.JobState_JOB_STATE_FAILED && !st.GetSwitched():
		if err := o.ledger.Refund(note.Dataset, id); err != nil {
			o.log.Error("refund", "job", id[:16], "error", err)
			return
		}
		o.setNote(id, jobNote{State: noteRefunded, Dataset: note.Dataset, Reason: st.GetReason()})
		o.log.Info("job failed before any key switch: budget refunded", "job", id[:16], "reason", st.GetReason())
	case note.State == noteUploaded && ended:
		o.setNote(id, jobNote{State: noteCompleted, Dataset: note.Dataset, Reason: st.GetReason()})
	}
}

// takePart decides about a new job (st is its status, info its ticket)
// and, if the owner takes part, reserves budget, computes, stores and
// uploads its share.
func (o *Owner) takePart(ctx context.Context, st *fedpcav1.JobStatus, info *fedpcav1.JobInfo) {
	id := st.GetJobId()
	spec, err := job.ParseSpec(info.GetSpec())
	if err != nil {
		o.decline(ctx, id, "", "malformed job spec: "+err.Error())
		return
	}
	dataset := spec.Dataset
	ds, ok := o.datasets[dataset]
	if !ok {
		o.decline(ctx, id, "", fmt.Sprintf("this owner does not serve dataset %q", dataset))
		return
	}
	sch := ds.Schema
	reason := ""
	switch {
	case spec.ID() != id:
		reason = "the job ID is not the hash of its spec"
	case spec.SchemaHash != sch.HashHex():
		reason = fmt.Sprintf("the job's schema hash %s… differs from this owner's %s…", spec.SchemaHash[:12], sch.HashHex()[:12])
	}
	if reason == "" {
		if err := transport.VerifyTicket(o.cfg.Dialer.Creds, spec, info.GetSignature(), info.GetUserCertificate()); err != nil {
			reason = "the job is not properly signed: " + err.Error()
		} else if err := userOK(o.cfg.Policy, spec.User); err != nil {
			reason = err.Error()
		} else if err := epsilonOK(o.cfg.Policy, spec); err != nil {
			reason = err.Error()
		} else if err := spec.Check(sch, o.params); err != nil {
			reason = err.Error()
		}
	}
	if reason != "" {
		o.decline(ctx, id, dataset, reason)
		return
	}
	cpk, err := o.committeeKey(ctx, spec.CommitteeKey)
	if errors.Is(err, errWrongCommittee) {
		o.decline(ctx, id, dataset, err.Error())
		return
	}
	if err != nil {
		o.log.Warn("cannot get the committee key; will retry", "job", id[:16], "error", status.Convert(err).Message())
		return
	}
	cal, err := spec.Calibration(sch)
	if err != nil {
		o.decline(ctx, id, dataset, err.Error())
		return
	}
	rho := cal.Rho
	if spec.NoNoise {
		rho = 0 // allowed only by an explicit policy, for tests
	}
	if _, err := o.ledger.Reserve(dataset, id, rho, spec.Epsilon, spec.Delta); err != nil {
		if errors.Is(err, ErrBudget) {
			o.decline(ctx, id, dataset, err.Error())
			return
		}
		o.log.Error("ledger", "job", id[:16], "error", err)
		return
	}
	// Compute and store the encrypted share before sending anything.
	start := time.Now()
	rc, err := ds.Open()
	if err != nil {
		o.releaseAndDecline(ctx, id, dataset, "cannot read the dataset: "+err.Error())
		return
	}
	acc, err := job.ReadStatistics(spec, sch, rc)
	rc.Close()
	if err != nil {
		o.releaseAndDecline(ctx, id, dataset, "cannot compute statistics: "+err.Error())
		return
	}
	cts, err := job.OwnerCiphertexts(spec, sch, o.params, cpk, acc, nil)
	if err != nil {
		o.releaseAndDecline(ctx, id, dataset, "cannot encrypt statistics: "+err.Error())
		return
	}
	compute := time.Since(start)
	err = o.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketUploads)
		for i, ct := range cts {
			if err := b.Put(blobKey(id, i), o.params.Codecs().Ciphertext.Marshal(ct)); err != nil {
				return err
			}
		}
		return putNote(tx, id, jobNote{State: noteUploading, Dataset: dataset, Blobs: len(cts)})
	})
	if err != nil {
		o.log.Error("cannot store the upload", "job", id[:16], "error", err)
		_ = o.ledger.Release(dataset, id)
		return
	}
	o.mu.Lock()
	o.shares[id] = compute
	o.mu.Unlock()
	o.m.shares.Observe(compute.Seconds())
	o.log.Info("share computed", "job", id[:16], "dataset", dataset, "rows", acc.Rows(), "ciphertexts", len(cts),
		"ms", float64(compute.Microseconds())/1000, "store_ms", float64((time.Since(start)-compute).Microseconds())/1000)
	o.resume(ctx, st, &jobNote{State: noteUploading, Dataset: dataset, Blobs: len(cts)})
}

func (o *Owner) releaseAndDecline(ctx context.Context, id, dataset, reason string) {
	if err := o.ledger.Release(dataset, id); err != nil {
		o.log.Error("ledger release", "job", id[:16], "error", err)
	}
	o.decline(ctx, id, dataset, reason)
}

// resume sends (or re-sends) a stored upload, and settles the ledger when
// the job moved on without it.
func (o *Owner) resume(ctx context.Context, st *fedpcav1.JobStatus, note *jobNote) {
	id := st.GetJobId()
	if st.GetCallerIncluded() {
		// Acknowledged before a crash: it is in the sum.
		o.settleUploaded(id, note.Dataset)
		return
	}
	if st.GetState() != fedpcav1.JobState_JOB_STATE_OPEN {
		o.settleNotIncluded(id, note.Dataset, "the job closed before the upload was acknowledged: "+st.GetReason())
		return
	}
	var blobs [][]byte
	_ = o.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketUploads)
		for i := range note.Blobs {
			blobs = append(blobs, bytes.Clone(b.Get(blobKey(id, i))))
		}
		return nil
	})
	// Retry transient failures with exponential backoff and full jitter
	// (so that thousands of owners told the proxy is busy spread out), until
	// the job's deadline; an owner that gives up tries again at its next
	// poll.
	deadline := time.Unix(st.GetDeadlineUnix(), 0)
	backoff := time.Second
	for attempt := 1; ctx.Err() == nil && time.Now().Before(deadline); attempt++ {
		resp, err := o.send(ctx, id, note.Dataset, blobs)
		o.m.uploads.WithLabelValues(uploadResult(err)).Inc()
		if err == nil {
			o.log.Info("upload acknowledged", "job", id[:16], "again", resp.GetAlreadyIncluded(), "uploaded_owners", resp.GetUploadedOwners())
			o.settleUploaded(id, note.Dataset)
			return
		}
		switch {
		case status.Code(err) == codes.AlreadyExists:
			// Another upload of ours is in the sum (the store was lost after
			// an acknowledged upload): the budget was spent.
			o.log.Error("the proxy holds another upload from this owner", "job", id[:16], "error", status.Convert(err).Message())
			o.settleUploaded(id, note.Dataset)
			return
		case retryable(err):
			if status.Code(err) != codes.ResourceExhausted {
				o.log.Warn("upload failed; retrying", "job", id[:16], "attempt", attempt, "error", status.Convert(err).Message())
			}
			select {
			case <-ctx.Done():
			case <-time.After(rand.N(backoff)):
			}
			backoff = min(2*backoff, 30*time.Second)
		default:
			o.settleNotIncluded(id, note.Dataset, "upload refused: "+status.Convert(err).Message())
			return
		}
	}
}

// send runs an upload: the header; when the proxy admits it, one ciphertext
// per message; then the acknowledgement.
func (o *Owner) send(ctx context.Context, id, dataset string, blobs [][]byte) (*fedpcav1.UploadResponse, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	hd := &fedpcav1.UploadHeader{JobId: id, Ciphertexts: uint32(len(blobs)), Digest: digest(blobs), Budget: o.budgetReport(dataset)}
	return transport.Upload(cctx, o.proxy, hd, blobs)
}

func (o *Owner) settleUploaded(id, dataset string) {
	if err := o.ledger.Commit(dataset, id); err != nil {
		o.log.Error("ledger commit", "job", id[:16], "error", err)
		return
	}
	err := o.db.Update(func(tx *bolt.Tx) error {
		if err := deleteBlobs(tx, id); err != nil {
			return err
		}
		return putNote(tx, id, jobNote{State: noteUploaded, Dataset: dataset})
	})
	if err != nil {
		o.log.Error("cannot record the upload", "job", id[:16], "error", err)
	}
}

func (o *Owner) settleNotIncluded(id, dataset, reason string) {
	if err := o.ledger.Release(dataset, id); err != nil {
		o.log.Error("ledger release", "job", id[:16], "error", err)
	}
	err := o.db.Update(func(tx *bolt.Tx) error {
		if err := deleteBlobs(tx, id); err != nil {
			return err
		}
		return putNote(tx, id, jobNote{State: noteReleased, Dataset: dataset, Reason: reason})
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
