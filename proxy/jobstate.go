package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/transport"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// jobState is a job in memory. The fields above mu are fixed at creation
// (owners once more, when the job is archived); mu guards everything below
// it.
//
// A job that has ended is archived (Proxy.archive): its owner list and its
// owners' answers, which grow with its owners, leave memory and are read
// from the store when asked for, so that the proxy's memory does not grow
// with the jobs it has run. What stays is the job's record (spec, schema,
// progress, counts: a few KiB however many owners).
type jobState struct {
	id     string
	spec   *job.Spec
	sch    *schema.Schema
	round  job.RoundSpec                 // a power job's round >= 1 (round.Round 0: any other job, or a power job's round 0)
	closes time.Time                     // the upload deadline: the spec's, or the round's (job.Spec.RoundDeadline)
	n      int                           // ciphertexts per vector
	owners atomic.Pointer[job.OwnerTree] // the owner list the spec commits to; nil once archived
	store  *store                        // where an archived job's owners and answers are read
	every  time.Duration                 // the progress interval (progress.go)

	mu  sync.Mutex
	rec jobRecord
	// note is shown to the job's parties while it is open: the owners it
	// needs that never called this proxy (maybeSeal; nothing that depends
	// on an upload).
	note     string
	uploads  map[string]uploadRecord  // by owner; nil once archived
	declines map[string]declineRecord // by owner; nil once archived
	sum      []*rlwe.Ciphertext       // cached running sum of an open job; nil when not loaded
	spare    []*rlwe.Ciphertext       // the sum before the last batch, reused for the next one's copy
	encoded  [][]byte                 // the last batch's sum encoded for the store, reused for the next one's
	sealed   *switchState             // a sealed job's key-switch inputs since its seal (nil after a restart: read from the store)
	lost     uint32                   // the member lost during a components job's last attempt (0: none)
	ticket   *fedpcav1.JobInfo        // shared ticket, built at the first request
	matrix   [][]byte                 // an open round's public matrix, in frames, once asked
	changed  chan struct{}            // closed and replaced at every change (watchers)
	wake     chan struct{}            // wakes the driver (buffered, 1)
	tick     *progressTick            // the counts of an open job at its last tick, once asked

	// pending are the validated uploads waiting to be folded into the sum
	// (foldPending), guarded by pmu alone so that uploads queue while a
	// batch is written under mu.
	pmu     sync.Mutex
	pending []*fold
}

// newJobState builds a job's state from its record and its owners'
// answers, checking them: they are read back from the store at start, where
// a torn or edited file must give an error, not a crash or a job that
// cannot be driven. An archived job (st set; uploads and declines not read)
// is built without its owner list.
func newJobState(id string, rec jobRecord, uploads []uploadRecord, declines []declineRecord, chunks func(int) int, st *store, archived bool) (*jobState, error) {
	spec, err := job.ParseSpec(rec.Spec)
	if err != nil {
		return nil, err
	}
	var round job.RoundSpec
	if rec.RoundSpec != nil {
		if round, err = job.ParseRoundSpec(rec.RoundSpec); err != nil {
			return nil, err
		}
		if err := round.Check(spec); err != nil {
			return nil, err
		}
	}
	if want := job.JobID(spec, round); want != id {
		return nil, fmt.Errorf("record of job %q holds the spec of job %s", id, want)
	}
	sch, err := schema.Parse(rec.Schema)
	if err != nil {
		return nil, err
	}
	values, err := spec.RoundLen(sch, round.Round)
	if err != nil {
		return nil, err
	}
	if _, ok := fedpcav1.JobState_name[int32(rec.State)]; !ok || rec.State == fedpcav1.JobState_JOB_STATE_UNSPECIFIED {
		return nil, fmt.Errorf("unknown state %d", rec.State)
	}
	j := &jobState{id: id, spec: spec, sch: sch, round: round, closes: spec.RoundDeadline(round.Round), n: chunks(values), store: st, rec: rec,
		changed: make(chan struct{}), wake: make(chan struct{}, 1)}
	if archived {
		if !ended(rec.State) {
			return nil, fmt.Errorf("the owners of job %q are archived, but it is %s", id, stateName(rec.State))
		}
		if st == nil {
			return nil, errors.New("an archived job needs its store")
		}
		j.rec.Owners = nil
		return j, nil
	}
	owners, err := job.NewOwnerTree(rec.Owners)
	if err != nil {
		return nil, err
	}
	if len(rec.Owners) != spec.NumOwners || owners.Root() != spec.OwnersRoot {
		return nil, fmt.Errorf("record of job %q holds an owner list that is not the spec's", id)
	}
	j.owners.Store(owners)
	j.uploads, j.declines = make(map[string]uploadRecord, len(uploads)), make(map[string]declineRecord, len(declines))
	for _, u := range uploads {
		if _, dup := j.uploads[u.Owner]; dup || !names(owners, u.Owner) {
			return nil, fmt.Errorf("upload record of owner %q, repeated or not in the spec", u.Owner)
		}
		j.uploads[u.Owner] = u
	}
	for _, d := range declines {
		if _, dup := j.declines[d.Owner]; dup || !names(owners, d.Owner) {
			return nil, fmt.Errorf("decline record of owner %q, repeated or not in the spec", d.Owner)
		}
		if d.Detail != nil {
			if err := d.Detail.Validate(d.Reason, sch.D()); err != nil {
				return nil, fmt.Errorf("decline record of owner %q: %w", d.Owner, err)
			}
		}
		j.declines[d.Owner] = d
	}
	if rec.Uploaded != len(j.uploads) || rec.Declined != len(j.declines) {
		return nil, fmt.Errorf("progress counts %d uploads and %d declines, the store holds %d and %d", rec.Uploaded, rec.Declined, len(j.uploads), len(j.declines))
	}
	if rec.State == fedpcav1.JobState_JOB_STATE_SWITCHING {
		active := make([]he.Point, len(rec.Active))
		for i, a := range rec.Active {
			active[i] = he.Point(a)
		}
		if err := spec.Committee().CheckActive(active); err != nil || len(rec.CSPs) != len(rec.Active) {
			return nil, fmt.Errorf("active members %v (%d names): %v", rec.Active, len(rec.CSPs), err)
		}
		if len(rec.Parties) > 0 && (len(rec.Parties) != job.ReplicatedParties || !spec.Components() || spec.Dealt() || !containsAll(rec.Parties, rec.Active)) {
			return nil, fmt.Errorf("parties %v for active members %v of a job whose randomness is %q", rec.Parties, rec.Active, spec.Randomness)
		}
	}
	return j, nil
}

// decodeJob decodes a job read back from st and builds its state.
func decodeJob(sj storedJob, chunks func(int) int, st *store) (*jobState, error) {
	j, err := func() (*jobState, error) {
		var rec jobRecord
		into := any(&rec.jobTicket)
		if sj.archived { // its owner list is left undecoded (the outer field takes "owners")
			into = &struct {
				*jobTicket
				Owners json.RawMessage `json:"owners"`
			}{jobTicket: &rec.jobTicket}
		}
		if err := json.Unmarshal(sj.ticket, into); err != nil {
			return nil, fmt.Errorf("ticket: %w", err)
		}
		if err := json.Unmarshal(sj.progress, &rec.jobProgress); err != nil {
			return nil, fmt.Errorf("progress: %w", err)
		}
		uploads := make([]uploadRecord, len(sj.uploads))
		for i, v := range sj.uploads {
			if err := json.Unmarshal(v, &uploads[i]); err != nil {
				return nil, fmt.Errorf("upload record: %w", err)
			}
		}
		declines := make([]declineRecord, len(sj.declines))
		for i, v := range sj.declines {
			if err := json.Unmarshal(v, &declines[i]); err != nil {
				return nil, fmt.Errorf("decline record: %w", err)
			}
		}
		return newJobState(sj.id, rec, uploads, declines, chunks, st, sj.archived)
	}()
	if err != nil {
		return nil, fmt.Errorf("proxy: job %s: %w", sj.id, err)
	}
	return j, nil
}

// decodeCommittee decodes the stored outcome of the key ceremony and checks
// that it is consistent: this node's parameter set, a valid committee key
// whose fingerprint it records, a threshold within its members.
func decodeCommittee(v []byte, p he.Params) (*committeeRecord, error) {
	var c committeeRecord
	if err := json.Unmarshal(v, &c); err != nil {
		return nil, fmt.Errorf("proxy: committee record: %w", err)
	}
	if c.HEParams != p.ID() {
		return nil, fmt.Errorf("proxy: committee record is for HE parameters %q, this node runs %s", c.HEParams, p.ID())
	}
	if err := (he.Committee{N: len(c.Members), Threshold: c.Threshold}).Validate(); err != nil {
		return nil, fmt.Errorf("proxy: committee record: %w", err)
	}
	if _, err := p.Codecs().PublicKey.Unmarshal(c.PublicKey); err != nil {
		return nil, fmt.Errorf("proxy: committee record: %w", err)
	}
	if job.Fingerprint(c.PublicKey) != c.Fingerprint {
		return nil, errors.New("proxy: committee record: the key's fingerprint is not the recorded one")
	}
	return &c, nil
}

// notify wakes watchers and the driver; j.mu must be held.
func (j *jobState) notify() {
	close(j.changed)
	j.changed = make(chan struct{})
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// archived reports whether the job's owners and answers are read from the
// store (see jobState).
func (j *jobState) archived() bool { return j.owners.Load() == nil }

func names(t *job.OwnerTree, owner string) bool {
	_, ok := t.Index(owner)
	return ok
}

// named reports whether the job's spec names the owner, and how (its key).
func (j *jobState) named(owner string) (job.Owner, bool, error) {
	if t := j.owners.Load(); t != nil {
		o, ok := t.Owner(owner)
		return o, ok, nil
	}
	a, err := j.store.answerOf(j.id, owner)
	return job.Owner{ID: owner, Key: a.key}, a.named, err
}

// answerOf returns the owner's upload record and whether it declined;
// j.mu must be held.
func (j *jobState) answerOf(owner string) (up *uploadRecord, declined bool, err error) {
	if !j.archived() {
		if u, ok := j.uploads[owner]; ok {
			up = &u
		}
		_, declined = j.declines[owner]
		return up, declined, nil
	}
	a, err := j.store.answerOf(j.id, owner)
	return a.upload, a.decline != nil, err
}

// answers returns the owner list and the owners' answers (the maps are the
// job's own while it runs: callers must not change them); j.mu must be
// held.
func (j *jobState) answers() (owners []job.Owner, uploads map[string]uploadRecord, declines map[string]declineRecord, err error) {
	if t := j.owners.Load(); t != nil {
		return t.Owners(), j.uploads, j.declines, nil
	}
	return j.store.answers(j.id)
}

// awaited returns the running job's owners that have neither uploaded nor
// declined, in the spec's order (none once archived). j.mu must be held.
func (j *jobState) awaited() []string {
	t := j.owners.Load()
	if t == nil {
		return nil
	}
	var out []string
	for _, o := range t.IDs() {
		if _, ok := j.uploads[o]; !ok {
			if _, ok := j.declines[o]; !ok {
				out = append(out, o)
			}
		}
	}
	return out
}

// ownerList returns the job's owners while it runs (nil once archived).
func (j *jobState) ownerList() []job.Owner {
	if t := j.owners.Load(); t != nil {
		return t.Owners()
	}
	return nil
}

// uploadedOwners returns the owners that uploaded, sorted; j.mu must be held.
func (j *jobState) uploadedOwners() ([]string, error) {
	_, uploads, _, err := j.answers()
	return slices.Sorted(maps.Keys(uploads)), err
}

// declineRecords returns the declines, sorted by owner; j.mu must be held.
func (j *jobState) declineRecords() ([]declineRecord, error) {
	_, _, declines, err := j.answers()
	return byOwner(declines), err
}

// byOwner returns the declines sorted by owner.
func byOwner(declines map[string]declineRecord) []declineRecord {
	out := slices.Collect(maps.Values(declines))
	slices.SortFunc(out, func(a, b declineRecord) int { return strings.Compare(a.Owner, b.Owner) })
	return out
}

// commit makes a step of the job durable, then applies it in memory and
// notifies: change (if any) edits a copy of the job's progress, write
// stores it (and may edit it too)
// (one store transaction). A change of state is also numbered and announced
// to the owners' watches (watchHub.sequence). On error the job is
// unchanged. j.mu must be held.
func (p *Proxy) commit(j *jobState, change func(*jobProgress), write func(*jobProgress) error) error {
	prog := j.rec.jobProgress
	prog.Updated = time.Now().UTC()
	if change != nil {
		change(&prog)
	}
	apply := func() error {
		if err := write(&prog); err != nil {
			return err
		}
		j.rec.jobProgress = prog
		if ended(prog.State) {
			j.unshareTicket()
			j.matrix = nil
		}
		j.notify()
		return nil
	}
	if prog.State == j.rec.State {
		return apply()
	}
	err := p.hub.sequence(j, func(seq uint64) error {
		prog.Seq = seq
		return apply()
	})
	if err == nil && ended(prog.State) {
		p.archive(j) // once the end is announced to the owners' watches
	}
	return err
}

// status converts a job to its wire status for a caller (a user or an
// owner); the owner lists are included only when full is set, and while
// the job is open its progress only as its last tick found it
// (hideProgress). j.mu must be held.
func (j *jobState) status(full bool, caller transport.Identity) (*fedpcav1.JobStatus, error) {
	s := &fedpcav1.JobStatus{
		JobId: j.id, State: j.rec.State, Dataset: j.spec.Dataset, Analysis: j.spec.Analysis, User: j.spec.User,
		MinOwners:      int32(j.spec.MinOwners),
		OwnersExpected: int32(j.spec.NumOwners), OwnersUploaded: int32(j.rec.Uploaded), OwnersDeclined: int32(j.rec.Declined),
		DeadlineUnix: j.closes.Unix(), Reason: j.rec.Reason, CspMembers: j.rec.CSPs, Switched: j.rec.Switched,
		CreatedUnix: j.rec.Created.Unix(), UpdatedUnix: j.rec.Updated.Unix(),
		Timings: &fedpcav1.PhaseTimings{AggregateSeconds: j.rec.Timings.Aggregate, UploadWindowSeconds: j.rec.Timings.UploadWindow,
			SealSeconds: j.rec.Timings.Seal, KeySwitchSeconds: j.rec.Timings.KeySwitch}}
	if caller.Role == transport.RoleOwner {
		up, _, err := j.answerOf(caller.ID)
		if err != nil {
			return nil, err
		}
		s.CallerIncluded = up != nil
	}
	if full {
		owners, uploads, declines, err := j.answers() // one read of an archived job's store
		if err != nil {
			return nil, err
		}
		s.ExpectedOwnerRefs, s.UploadedOwners = transport.OwnerRefs(owners), slices.Sorted(maps.Keys(uploads))
		for _, d := range byOwner(declines) {
			s.DeclinedOwners = append(s.DeclinedOwners, d.wire())
		}
	}
	if j.round.Round > 0 {
		s.ParentJobId, s.Round = j.round.Parent, int32(j.round.Round)
	}
	j.hideProgress(s, time.Now(), caller.Role == transport.RoleUser)
	return s, nil
}

// info is the status with the job's ticket: with the owner lists for the
// user, with their counts only for an owner (which gets no list: what it
// receives does not grow with the owners).
func (j *jobState) info(caller transport.Identity) (*fedpcav1.JobInfo, error) {
	st, err := j.status(caller.Role != transport.RoleOwner, caller)
	if err != nil {
		return nil, err
	}
	return j.withRound(&fedpcav1.JobInfo{Status: st, Spec: j.rec.Spec, Signature: j.rec.Signature, UserCertificate: j.rec.UserCert, Schema: j.rec.Schema}), nil
}

// withRound adds a round's spec and signature to its ticket and its parent
// and number to the ticket's status.
func (j *jobState) withRound(info *fedpcav1.JobInfo) *fedpcav1.JobInfo {
	if j.round.Round > 0 {
		info.RoundSpec, info.RoundSignature = j.rec.RoundSpec, j.rec.RoundSignature
		info.Status.ParentJobId, info.Status.Round = j.round.Parent, int32(j.round.Round)
	}
	return info
}

// ticketResponse is an owner's ticket: the job's ticket, with the status
// fields fixed at creation, and the owner's inclusion proof. The ticket
// (spec, signature, certificate, schema: a few KiB however many owners the
// job has) is fetched by every owner within seconds, so it is encoded once
// and shared (transport.Share) while the job runs; only the proof, at most
// job.MaxProofHashes hashes, is encoded per owner. An ended job's ticket is
// not shared (few owners ask for it then), so that the process keeps no
// encoding per finished job. j.mu must be held.
func (j *jobState) ticketResponse(owner string) (*fedpcav1.GetJobResponse, error) {
	tree := j.owners.Load()
	if tree == nil { // archived: the tree is built again for this answer
		owners, _, _, err := j.answers()
		if err != nil {
			return nil, err
		}
		if tree, err = job.NewOwnerTree(owners); err != nil {
			return nil, err
		}
	}
	i, ok := tree.Index(owner)
	if !ok {
		return nil, fmt.Errorf("%w: the job does not name owner %s", ErrNotYours, owner)
	}
	if j.ticket == nil {
		st := &fedpcav1.JobStatus{JobId: j.id, Dataset: j.spec.Dataset, Analysis: j.spec.Analysis, User: j.spec.User,
			MinOwners: int32(j.spec.MinOwners), OwnersExpected: int32(j.spec.NumOwners), DeadlineUnix: j.closes.Unix(),
			CreatedUnix: j.rec.Created.Unix()}
		j.ticket = j.withRound(&fedpcav1.JobInfo{Status: st, Spec: j.rec.Spec, Signature: j.rec.Signature, UserCertificate: j.rec.UserCert, Schema: j.rec.Schema})
		if !ended(j.rec.State) {
			transport.Share(j.ticket)
		}
	}
	p := tree.Proof(i)
	return &fedpcav1.GetJobResponse{Job: j.ticket, OwnerProof: &fedpcav1.OwnerProof{Index: uint32(p.Index), Path: p.Path}}, nil
}

// unshareTicket forgets the ticket's shared encoding when the job ends
// (responses being sent keep their bytes). j.mu must be held.
func (j *jobState) unshareTicket() {
	if j.ticket != nil {
		transport.Unshare(j.ticket)
		j.ticket = nil
	}
}

func ended(s fedpcav1.JobState) bool {
	return s == fedpcav1.JobState_JOB_STATE_DONE || s == fedpcav1.JobState_JOB_STATE_FAILED
}

// containsAll reports whether every element of sub is in set.
func containsAll(set, sub []uint32) bool {
	for _, x := range sub {
		if !slices.Contains(set, x) {
			return false
		}
	}
	return true
}
