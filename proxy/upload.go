package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"time"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/fedpca/fedpca/transport"
)

// Upload implements fedpcav1.ProxyServiceServer. After the header, the owner
// waits until there is room to receive it (Config.UploadMemory) and the
// proxy says admitted;
// then its ciphertexts are read and validated into fresh buffers, each proof
// group's proof verified when its last ciphertext arrives (protocol/zk:
// well-formed encryptions under the committee key, bound to this job, owner
// and group; job.ProofGroup) and the owner's signature
// of its upload statement checked against its certificate, and, under
// the job's lock, the buffers become the new running sum (sum += upload) and
// one transaction writes it with the owner's inclusion record. Only then is
// the upload acknowledged. On any error the job is unchanged. Because
// waiting owners send nothing but their header, the proxy's memory is
// bounded by UploadMemory whatever the number of owners.
func (p *Proxy) Upload(stream fedpcav1.ProxyService_UploadServer) error {
	resp, err := p.upload(stream)
	if err != nil {
		p.m.uploads.WithLabelValues("refused").Inc()
		return p.toStatus(err)
	}
	if resp.GetAlreadyIncluded() {
		p.m.uploads.WithLabelValues("resent").Inc()
	} else {
		p.m.uploads.WithLabelValues("included").Inc()
	}
	return stream.Send(resp)
}

func (p *Proxy) upload(stream fedpcav1.ProxyService_UploadServer) (*fedpcav1.UploadResponse, error) {
	ctx := stream.Context()
	who := callerPeer(ctx)
	owner := who.ID
	first, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	hd := first.GetHeader()
	if hd == nil {
		return nil, bad("the first message must be the upload header")
	}
	j, err := p.job(hd.GetJobId())
	if err != nil {
		return nil, err
	}
	named, err := j.checkUpload(who, hd)
	if err != nil {
		return nil, err
	}
	if done, resp, err := p.checkIncluded(j, owner, hd.GetDigest()); done {
		return resp, err
	}

	// Admit the upload when there is room to receive it (or refuse it at
	// once when too many wait), then buffer and validate it.
	release, err := p.admit.enter(ctx, j.n)
	if err != nil {
		return nil, err
	}
	defer release()
	if err := stream.Send(&fedpcav1.UploadResponse{JobId: j.id, Admitted: true}); err != nil {
		return nil, err
	}
	// The header's digest is the SHA-256 of the ciphertexts in order; with
	// one ciphertext it is that ciphertext's own hash, taken once.
	var h hash.Hash
	if j.n > 1 {
		h = sha256.New()
	}
	cts := make([]*rlwe.Ciphertext, j.n)
	defer p.recycle(cts)        // after j.mu is released below: the upload is folded or refused
	seen := make([][]byte, j.n) // each ciphertext's SHA-256
	key, _, err := p.committeeKeys(j.spec.CommitteeKey)
	if err != nil {
		return nil, err
	}
	proofs := &ownerProofs{parts: make([]job.Part, j.n), digests: make([]job.PartDigests, j.n)}
	var decoding, verifying time.Duration
	size := 0
	for i := range cts {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, bad("stream ended after %d of %d ciphertexts", i, j.n)
		}
		if err != nil {
			return nil, err
		}
		b := msg.GetCiphertext()
		if b == nil {
			return nil, bad("message %d: expected a ciphertext", 2*i+1)
		}
		t0 := time.Now()
		ct := p.receivedCiphertext()
		cts[i] = ct
		if err := p.params.Codecs().Ciphertext.UnmarshalInto(b, ct); err != nil {
			return nil, bad("ciphertext %d: %v", i, err)
		}
		if h != nil {
			h.Write(b)
		}
		size += len(b)
		d := sha256.Sum256(b)
		seen[i] = d[:]
		transport.RecycleCiphertext(b)
		decoding += time.Since(t0)
		if msg, err = stream.Recv(); err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		pm, isProof := msg.GetMsg().(*fedpcav1.UploadRequest_Proof)
		if err != nil || !isProof {
			return nil, bad("message %d: expected the proof of ciphertext %d (empty unless it ends a proof group)", 2*i+2, i)
		}
		first, ends := job.ProofEnds(i, j.n)
		if !ends {
			if len(pm.Proof) != 0 {
				return nil, bad("ciphertext %d: a proof, but a proof group's proof comes with its last ciphertext (groups of %d)", i, zk.MaxGroup)
			}
			continue
		}
		t0 = time.Now()
		parts, err := job.VerifyCiphertexts(p.params, key, j.id, owner, first, j.n, cts[first:i+1], pm.Proof, j.spec.BindsC0())
		verifying += time.Since(t0)
		if err != nil {
			p.m.proofs.WithLabelValues("refused").Inc()
			return nil, bad("%v (the proof must be made for this job, this owner and these ciphertexts, under the committee key %s…)", err, j.spec.CommitteeKey[:12])
		}
		p.m.proofs.WithLabelValues("verified").Inc()
		for k, part := range parts {
			proofs.parts[first+k], proofs.digests[first+k] = part, part.Digests()
		}
		size += len(pm.Proof)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		if err == nil {
			return nil, bad("more than the %d announced ciphertexts", j.n)
		}
		return nil, err
	}
	digest := seen[0]
	if h != nil {
		digest = h.Sum(nil)
	}
	if !bytes.Equal(digest, hd.GetDigest()) {
		return nil, bad("digest: the ciphertexts' SHA-256 is not the header's digest")
	}
	proofs.cert, proofs.signature = callerCert(ctx), hd.GetSignature()
	if err := transport.VerifyOwnerSignature(p.cfg.Creds, named, proofs.cert, job.UploadContext, job.UploadStatement(j.id, owner, proofs.digests), proofs.signature); err != nil {
		return nil, bad("signature: the upload statement is not signed by owner %s's key as the job names it: %v", owner, err)
	}
	p.m.phases.WithLabelValues("verify").Observe(verifying.Seconds())
	if err := p.writeProofs(j.id, owner, hd.GetDigest(), proofs); err != nil {
		return nil, err
	}

	f := &fold{owner: owner, digest: hd.GetDigest(), cts: cts, seen: seen, budget: budget(owner, hd.GetBudget()), decoding: decoding, size: size}
	j.pmu.Lock()
	j.pending = append(j.pending, f)
	j.pmu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if !f.done {
		p.foldPending(j)
	}
	return f.resp, f.err
}

// fold is a validated upload waiting to be folded into its job's running
// sum, and then its answer.
type fold struct {
	owner    string
	digest   []byte
	cts      []*rlwe.Ciphertext
	seen     [][]byte // each ciphertext's SHA-256
	budget   *budgetRecord
	decoding time.Duration
	size     int
	done     bool
	resp     *fedpcav1.UploadResponse
	err      error
	record   uploadRecord
	dup      bool // another upload of the same owner is in the batch
	included bool
}

func (f *fold) answer(resp *fedpcav1.UploadResponse, err error) {
	f.resp, f.err, f.done = resp, err, true
}

// foldPending folds every upload waiting for the job into its running sum
// in one store transaction (group commit): uploads that arrive while a
// transaction is being written queue up and go together into the next,
// so the sum is written and the store synced once per batch, not once per
// upload. Each upload is checked on its own (already included, closed job,
// a ciphertext seen before) and refused alone; the others are
// acknowledged once the transaction is durable. j.mu must be held.
func (p *Proxy) foldPending(j *jobState) {
	j.pmu.Lock()
	batch := j.pending
	j.pending = nil
	j.pmu.Unlock()
	var in []*fold
	owners := map[string]*fold{}
	for _, f := range batch {
		if done, resp, err := p.checkIncludedLocked(j, f.owner, f.digest); done {
			f.answer(resp, err)
			continue
		}
		if _, dup := owners[f.owner]; dup {
			// The same owner twice in one batch: answered as a re-sent
			// upload once the first is in (or refused if it differs).
			f.dup = true
			in = append(in, f)
			continue
		}
		owners[f.owner] = f
		f.record = uploadRecord{Owner: f.owner, Digest: hex.EncodeToString(f.digest), At: time.Now().UTC()}
		in = append(in, f)
	}
	if len(in) == 0 {
		return
	}
	fail := func(err error) {
		for _, f := range in {
			if !f.done {
				f.answer(nil, err)
			}
		}
	}
	folding := time.Now()
	if err := p.loadSum(j); err != nil {
		fail(err)
		return
	}
	var sum []*rlwe.Ciphertext
	var decoding time.Duration
	err := p.commit(j, nil, func(prog *jobProgress) error {
		return p.store.addUploads(j.id, prog, func(tx uploadTx) error {
			// sum starts as a copy of the job's sum; each upload whose
			// ciphertexts were never seen is added to it and recorded.
			sum = nil
			decoding = 0
			for _, f := range in {
				f.included = false
				if f.dup {
					continue
				}
				if err := tx.markSeen(f.seen); err != nil {
					f.answer(nil, err)
					continue
				}
				if err := tx.put(f.record, f.budget); err != nil {
					return err
				}
				if sum == nil {
					sum = j.copySum()
				}
				for i, ct := range f.cts {
					p.params.AddInto(sum[i], ct)
				}
				f.included = true
				decoding += f.decoding
				prog.Uploaded++
			}
			if sum == nil {
				return errNothingToFold
			}
			prog.Reason = fmt.Sprintf("%d of %d owners uploaded", prog.Uploaded, j.spec.NumOwners)
			prog.Timings.Aggregate += (decoding + time.Since(folding)).Seconds()
			return tx.putSum(j.encodeSum(p, sum))
		})
	})
	if errors.Is(err, errNothingToFold) {
		err = nil // every upload of the batch was refused on its own
	} else if err != nil {
		if !errors.Is(err, ErrBadRequest) {
			err = fmt.Errorf("commit upload: %w", err)
		}
		for _, f := range in {
			f.included = false
		}
		if sum != nil {
			j.spare = sum
		}
		fail(err)
		return
	}
	if sum != nil {
		j.sum, j.spare = sum, j.sum
	}
	for _, f := range in {
		if !f.included {
			continue
		}
		j.uploads[f.owner] = f.record
		p.m.uploadBytes.Add(float64(f.size))
		p.log.Info("upload included", "job", j.id[:16], "owner", f.owner, "ciphertexts", j.n, "uploaded", j.rec.Uploaded, "expected", j.spec.NumOwners)
		f.answer(&fedpcav1.UploadResponse{JobId: j.id, UploadedOwners: j.uploadedShown()}, nil)
	}
	p.m.phases.WithLabelValues("fold").Observe((decoding + time.Since(folding)).Seconds())
	// The same owner's second upload of the batch, now that the first is in.
	for _, f := range in {
		if !f.done {
			if done, resp, err := p.checkIncludedLocked(j, f.owner, f.digest); done {
				f.answer(resp, err)
			} else {
				f.answer(nil, fmt.Errorf("commit upload: owner %s's upload was not folded", f.owner))
			}
		}
	}
}

// recycle gives an upload's decoded ciphertexts back for the next uploads
// (524 KB each at d <= 126): they are read only by the batch that folds
// them, which has ended when the upload's handler returns (it waits for
// its answer under j.mu, which the batch holds). A decode overwrites every
// coefficient; the metadata is the parameters' and never changed.
func (p *Proxy) recycle(cts []*rlwe.Ciphertext) {
	for _, ct := range cts {
		if ct != nil {
			p.received.Put(ct)
		}
	}
}

// receivedKept is how many decoded ciphertexts the proxy keeps for the
// next uploads: enough for those decoded while a batch commits (12 MB at
// the default parameters).
const receivedKept = 32

// receivedCiphertext returns a ciphertext to decode an upload into: one
// recycled from a folded upload, or a new one.
func (p *Proxy) receivedCiphertext() *rlwe.Ciphertext {
	if ct, ok := p.received.Get(); ok {
		return ct
	}
	return p.params.NewCiphertext()
}

// forgetSum lets the running sum and its spare go (the job is sealed or
// ended). j.mu must be held.
func (j *jobState) forgetSum() { j.sum, j.spare, j.encoded = nil, nil, nil }

// encodeSum encodes a batch's sum for the store into the job's encoding
// buffers, reused from batch to batch (the store needs a value only until
// its transaction ends). j.mu must be held.
func (j *jobState) encodeSum(p *Proxy, sum []*rlwe.Ciphertext) [][]byte {
	if len(j.encoded) != len(sum) {
		j.encoded = make([][]byte, len(sum))
	}
	for i, ct := range sum {
		j.encoded[i] = p.params.Codecs().Ciphertext.Append(j.encoded[i][:0], ct)
	}
	return j.encoded
}

// copySum returns a copy of the running sum, in the spare ciphertexts of
// the previous batch when there are (a batch's sum is a copy until its
// transaction commits: no allocation of 524 KB per batch). j.mu must be
// held.
func (j *jobState) copySum() []*rlwe.Ciphertext {
	sum := j.spare
	j.spare = nil
	if sum == nil {
		sum = make([]*rlwe.Ciphertext, len(j.sum))
		for i, ct := range j.sum {
			sum[i] = ct.CopyNew()
		}
		return sum
	}
	for i, ct := range j.sum {
		sum[i].Copy(ct)
	}
	return sum
}

// errNothingToFold ends a batch's transaction when every upload in it was
// refused: nothing is written.
var errNothingToFold = errors.New("no upload to fold")

// checkUpload validates an upload header against the job (everything that
// can be checked before the ciphertexts arrive). It reads only the job's
// immutable fields (and the store, for an archived job).
func (j *jobState) checkUpload(who transport.Peer, hd *fedpcav1.UploadHeader) (job.Owner, error) {
	if err := j.party(who); err != nil {
		return job.Owner{}, err
	}
	o, _, err := j.named(who.ID)
	if err != nil {
		return job.Owner{}, err
	}
	return o, j.checkUploadHeader(hd)
}

// checkUploadHeader checks an upload's header against the job.
func (j *jobState) checkUploadHeader(hd *fedpcav1.UploadHeader) error {
	if len(hd.GetDigest()) != sha256.Size {
		return bad("digest: want %d bytes, got %d", sha256.Size, len(hd.GetDigest()))
	}
	if int64(hd.GetCiphertexts()) != int64(j.n) {
		return bad("ciphertexts: %d announced, job %s… needs %d", hd.GetCiphertexts(), j.id[:12], j.n)
	}
	return j.checkBudget(hd.GetBudget())
}

// checkBudget validates an owner's budget report (display only): it is for
// the job's dataset and its rho values are finite and not negative. A report
// without a dataset is ignored.
func (j *jobState) checkBudget(b *fedpcav1.BudgetReport) error {
	if b.GetDataset() == "" {
		return nil
	}
	if b.GetDataset() != j.spec.Dataset {
		return bad("budget: report for dataset %q, the job's is %q", b.GetDataset(), j.spec.Dataset)
	}
	for name, v := range map[string]float64{"rho_budget": b.GetRhoBudget(), "rho_spent": b.GetRhoSpent(), "rho_reserved": b.GetRhoReserved()} {
		if !(v >= 0) || math.IsInf(v, 0) {
			return bad("budget: %s = %v, want a finite number >= 0", name, v)
		}
	}
	if d := b.GetDelta(); !(d >= 0 && d < 1) {
		return bad("budget: delta = %v, want 0 (not reported) or a number in (0, 1)", d)
	}
	return nil
}

// checkIncluded answers a re-sent upload (same digest: acknowledged again;
// another: AlreadyExists) and refuses uploads to closed jobs. done reports
// whether the caller should return resp, err.
func (p *Proxy) checkIncluded(j *jobState, owner string, digest []byte) (done bool, resp *fedpcav1.UploadResponse, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return p.checkIncludedLocked(j, owner, digest)
}

func (p *Proxy) checkIncludedLocked(j *jobState, owner string, digest []byte) (bool, *fedpcav1.UploadResponse, error) {
	u, declined, err := j.answerOf(owner)
	if err != nil {
		return true, nil, err
	}
	if u != nil {
		if u.Digest == hex.EncodeToString(digest) {
			return true, &fedpcav1.UploadResponse{JobId: j.id, AlreadyIncluded: true, UploadedOwners: j.uploadedShown()}, nil
		}
		return true, nil, fmt.Errorf("%w (owner %s, job %s…, included %s)", ErrDuplicateUpload, owner, j.id[:12], u.At.Format(time.RFC3339))
	}
	if j.rec.State != fedpcav1.JobState_JOB_STATE_OPEN {
		return true, nil, fmt.Errorf("%w: job %s… is %s", ErrJobClosed, j.id[:12], stateName(j.rec.State))
	}
	if !time.Now().Before(j.closes) {
		return true, nil, fmt.Errorf("%w: job %s… passed its deadline %s", ErrJobClosed, j.id[:12], j.closes.Format(time.RFC3339))
	}
	if declined {
		return true, nil, fmt.Errorf("%w: owner %s declined job %s…", ErrJobClosed, owner, j.id[:12])
	}
	return false, nil, nil
}

// loadSum makes sure the open job's running sum is in memory; j.mu held.
func (p *Proxy) loadSum(j *jobState) error {
	if j.sum != nil {
		return nil
	}
	if j.rec.Uploaded == 0 {
		j.sum = p.params.NewCiphertexts(j.n)
		return nil
	}
	enc, err := p.store.seq(j.id, "sum", j.n)
	if err != nil {
		return err
	}
	j.sum, err = p.decode("sum", enc)
	return err
}

// encode marshals ciphertexts for the store.
func (p *Proxy) encode(cts []*rlwe.Ciphertext) [][]byte {
	out := make([][]byte, len(cts))
	for i, ct := range cts {
		out[i] = p.params.Codecs().Ciphertext.Marshal(ct)
	}
	return out
}

// decode unmarshals ciphertexts read from the store (validated: the store
// is ours, but a torn or edited file must not crash the proxy).
func (p *Proxy) decode(what string, enc [][]byte) ([]*rlwe.Ciphertext, error) {
	out := make([]*rlwe.Ciphertext, len(enc))
	for i, v := range enc {
		ct, err := p.params.Codecs().Ciphertext.Unmarshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s %d: %w", what, i, err)
		}
		out[i] = ct
	}
	return out, nil
}

func stateName(s fedpcav1.JobState) string {
	switch s {
	case fedpcav1.JobState_JOB_STATE_OPEN:
		return "open"
	case fedpcav1.JobState_JOB_STATE_SWITCHING:
		return "sealed and being key-switched"
	case fedpcav1.JobState_JOB_STATE_DONE:
		return "done"
	case fedpcav1.JobState_JOB_STATE_FAILED:
		return "failed"
	}
	return "in an unknown state"
}
