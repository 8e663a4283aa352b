package proxy

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/fedpca/fedpca/transport"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// Store layout (bbolt):
//
//	meta/committee             committeeRecord (JSON)
//	budgets/<owner>/<dataset>  budgetRecord (JSON), owners' ledgers for display
//	jobs/<id>/record           jobRecord (JSON)
//	jobs/<id>/userpk           the user's HE public key
//	jobs/<id>/sum/NNNNNN       running sum (open jobs)
//	jobs/<id>/blinded/NNNNNN   blinded sum (switching)
//	jobs/<id>/mask/NNNNNN      masks, 8 bytes per slot (switching)
//	jobs/<id>/share/PPP/NNNNNN member PPP's key-switch shares (switching)
//	jobs/<id>/result/NNNNNN    the result under the user's key (done)
//	jobs/<id>/published        the user's published result document
//	seen/<sha256>              the job (16 hex digits) of every ciphertext
//	                           ever folded in, to refuse replays
var (
	bucketMeta    = []byte("meta")
	bucketJobs    = []byte("jobs")
	bucketBudgets = []byte("budgets")
	bucketSeen    = []byte("seen")
	keyCommittee  = []byte("committee")
	keyRecord     = []byte("record")
	keyUserPK     = []byte("userpk")
	keyPublished  = []byte("published")
)

func seqKey(prefix string, i int) []byte { return []byte(fmt.Sprintf("%s/%06d", prefix, i)) }

func shareKey(point uint32, i int) []byte { return []byte(fmt.Sprintf("share/%03d/%06d", point, i)) }

// committeeRecord is the outcome of the key ceremony.
type committeeRecord struct {
	CeremonyID  string   `json:"ceremony_id"`
	Members     []Member `json:"members"`
	Threshold   int      `json:"threshold"`
	HEParams    string   `json:"he_params"`
	PublicKey   []byte   `json:"public_key"`
	Fingerprint string   `json:"fingerprint"`
	// Attestations are every member's signed statement about the key.
	Attestations []*fedpcav1.KeyAttestation `json:"attestations"`
	At           time.Time                  `json:"at"`
}

type uploadRecord struct {
	Owner  string    `json:"owner"`
	Digest string    `json:"digest"`
	At     time.Time `json:"at"`
}

// declineRecord is an owner's decline: its code only (job.Decline), never
// text from the owner.
type declineRecord struct {
	Owner  string      `json:"owner"`
	Reason job.Decline `json:"reason"`
	At     time.Time   `json:"at"`
}

// jobRecord is a job's durable state (apart from ciphertexts).
type jobRecord struct {
	Spec      []byte            `json:"spec"`
	Signature []byte            `json:"signature"`
	UserCert  []byte            `json:"user_certificate"`
	Schema    []byte            `json:"schema"`
	State     fedpcav1.JobState `json:"state"`
	Reason    string            `json:"reason"`
	Created   time.Time         `json:"created"`
	Updated   time.Time         `json:"updated"`
	Uploads   []uploadRecord    `json:"uploads"`
	Declined  []declineRecord   `json:"declined"`
	// Set at sealing: the active members (points and IDs), and whether any
	// member has been asked to switch (after that the budget is spent).
	Active   []uint32  `json:"active,omitempty"`
	CSPs     []string  `json:"csps,omitempty"`
	Switched bool      `json:"switched"`
	SealedAt time.Time `json:"sealed_at"`
	// SwitchStarted is when the first member was asked; Timings are the
	// proxy's measured phases (seconds).
	SwitchStarted time.Time `json:"switch_started"`
	Timings       timings   `json:"timings"`
}

type timings struct {
	Aggregate    float64 `json:"aggregate"`
	UploadWindow float64 `json:"upload_window"`
	Seal         float64 `json:"seal"`
	KeySwitch    float64 `json:"key_switch"`
}

type budgetRecord struct {
	Owner       string    `json:"owner"`
	Dataset     string    `json:"dataset"`
	RhoBudget   float64   `json:"rho_budget"`
	RhoSpent    float64   `json:"rho_spent"`
	RhoReserved float64   `json:"rho_reserved"`
	At          time.Time `json:"at"`
}

// jobState is a job in memory. mu guards everything below it.
type jobState struct {
	id     string
	spec   *job.Spec
	sch    *schema.Schema
	layout stats.Layout
	n      int // ciphertexts per vector

	mu      sync.Mutex
	rec     jobRecord
	sum     []*rlwe.Ciphertext       // cached running sum of an open job; nil when not loaded
	ticket  *fedpcav1.GetJobResponse // shared ticket response, built at the first request
	changed chan struct{}            // closed and replaced at every change (watchers)
	wake    chan struct{}            // wakes the driver (buffered, 1)
}

// newJobState builds a job's state from its record, checking the record:
// it is read back from the store at start, where a torn or edited file must
// give an error, not a crash or a job that cannot be driven.
func newJobState(id string, rec jobRecord, chunks func(int) int) (*jobState, error) {
	spec, err := job.ParseSpec(rec.Spec)
	if err != nil {
		return nil, err
	}
	if spec.ID() != id {
		return nil, fmt.Errorf("record of job %q holds the spec of job %s", id, spec.ID())
	}
	sch, err := schema.Parse(rec.Schema)
	if err != nil {
		return nil, err
	}
	l, err := spec.Layout(sch)
	if err != nil {
		return nil, err
	}
	if _, ok := fedpcav1.JobState_name[int32(rec.State)]; !ok || rec.State == fedpcav1.JobState_JOB_STATE_UNSPECIFIED {
		return nil, fmt.Errorf("job %s: unknown state %d", id, rec.State)
	}
	seen := map[string]bool{}
	for _, u := range rec.Uploads {
		if seen[u.Owner] || !slices.Contains(spec.Owners, u.Owner) {
			return nil, fmt.Errorf("job %s: upload record of owner %q, repeated or not in the spec", id, u.Owner)
		}
		seen[u.Owner] = true
	}
	if rec.State == fedpcav1.JobState_JOB_STATE_SWITCHING {
		active := make([]he.Point, len(rec.Active))
		for i, a := range rec.Active {
			active[i] = he.Point(a)
		}
		if err := spec.Committee().CheckActive(active); err != nil || len(rec.CSPs) != len(rec.Active) {
			return nil, fmt.Errorf("job %s: active members %v (%d names): %v", id, rec.Active, len(rec.CSPs), err)
		}
	}
	return &jobState{id: id, spec: spec, sch: sch, layout: l, n: chunks(l.Len()), rec: rec,
		changed: make(chan struct{}), wake: make(chan struct{}, 1)}, nil
}

// decodeJob decodes a stored job record and builds the job's state.
func decodeJob(id string, v []byte, chunks func(int) int) (*jobState, error) {
	var rec jobRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, fmt.Errorf("proxy: job %s: %w", id, err)
	}
	j, err := newJobState(id, rec, chunks)
	if err != nil {
		return nil, fmt.Errorf("proxy: job %s: %w", id, err)
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

func (j *jobState) uploaded(owner string) (uploadRecord, bool) {
	for _, u := range j.rec.Uploads {
		if u.Owner == owner {
			return u, true
		}
	}
	return uploadRecord{}, false
}

func (j *jobState) declined(owner string) bool {
	return slices.ContainsFunc(j.rec.Declined, func(d declineRecord) bool { return d.Owner == owner })
}

// awaited returns the job's owners that have neither uploaded nor declined,
// in the spec's order. j.mu must be held.
func (j *jobState) awaited() []string {
	answered := make(map[string]bool, len(j.rec.Uploads)+len(j.rec.Declined))
	for _, u := range j.rec.Uploads {
		answered[u.Owner] = true
	}
	for _, d := range j.rec.Declined {
		answered[d.Owner] = true
	}
	var out []string
	for _, o := range j.spec.Owners {
		if !answered[o] {
			out = append(out, o)
		}
	}
	return out
}

func (j *jobState) uploadedOwners() []string {
	out := make([]string, len(j.rec.Uploads))
	for i, u := range j.rec.Uploads {
		out[i] = u.Owner
	}
	slices.Sort(out)
	return out
}

// load reads the committee and every job at start.
func (p *Proxy) load() error {
	return p.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketJobs, bucketBudgets, bucketSeen} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if v := tx.Bucket(bucketMeta).Get(keyCommittee); v != nil {
			c, err := decodeCommittee(v, p.params)
			if err != nil {
				return err
			}
			if err := p.checkCommittee(c); err != nil {
				// Owners and users would refuse it: establish the key again
				// (adopt the members' attested key, or a new ceremony).
				p.log.Warn("the stored committee key is not attested by every member; it will be established again", "error", err)
			} else {
				p.cmt = c
			}
		}
		jobs := tx.Bucket(bucketJobs)
		return jobs.ForEachBucket(func(k []byte) error {
			j, err := decodeJob(string(k), jobs.Bucket(k).Get(keyRecord), p.params.Chunks)
			if err != nil {
				return err
			}
			p.jobs[j.id] = j
			return nil
		})
	})
}

// putRecord writes a job's record in tx.
func putRecord(tx *bolt.Tx, id string, rec *jobRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	jb, err := tx.Bucket(bucketJobs).CreateBucketIfNotExists([]byte(id))
	if err != nil {
		return err
	}
	return jb.Put(keyRecord, b)
}

func jobBucket(tx *bolt.Tx, id string) *bolt.Bucket { return tx.Bucket(bucketJobs).Bucket([]byte(id)) }

// putCiphertexts writes ciphertexts under a prefix.
func (p *Proxy) putCiphertexts(b *bolt.Bucket, prefix string, cts []*rlwe.Ciphertext) error {
	for i, ct := range cts {
		if err := b.Put(seqKey(prefix, i), p.params.Codecs().Ciphertext.Marshal(ct)); err != nil {
			return err
		}
	}
	return nil
}

// getCiphertexts reads n ciphertexts under a prefix (validated: the store is
// ours, but a torn or edited file must not crash the proxy).
func (p *Proxy) getCiphertexts(b *bolt.Bucket, prefix string, n int) ([]*rlwe.Ciphertext, error) {
	out := make([]*rlwe.Ciphertext, n)
	for i := range out {
		v := b.Get(seqKey(prefix, i))
		if v == nil {
			return nil, fmt.Errorf("%s %d missing from the store", prefix, i)
		}
		ct, err := p.params.Codecs().Ciphertext.Unmarshal(v)
		if err != nil {
			return nil, fmt.Errorf("%s %d: %w", prefix, i, err)
		}
		out[i] = ct
	}
	return out, nil
}

func deletePrefix(b *bolt.Bucket, prefix string) error {
	c := b.Cursor()
	var keys [][]byte
	for k, _ := c.Seek([]byte(prefix)); k != nil && len(k) >= len(prefix) && string(k[:len(prefix)]) == prefix; k, _ = c.Next() {
		keys = append(keys, slices.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func encodeMask(m []uint64) []byte {
	b := make([]byte, 8*len(m))
	for i, x := range m {
		binary.LittleEndian.PutUint64(b[8*i:], x)
	}
	return b
}

func decodeMask(b []byte, slots int) ([]uint64, error) {
	if len(b) != 8*slots {
		return nil, fmt.Errorf("mask of %d bytes, want %d", len(b), 8*slots)
	}
	m := make([]uint64, slots)
	for i := range m {
		m[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return m, nil
}

// status converts a job to its wire status for a caller; the owner lists
// are included only when full is set. j.mu must be held.
func (j *jobState) status(full bool, caller transport.Identity) *fedpcav1.JobStatus {
	s := &fedpcav1.JobStatus{
		JobId: j.id, State: j.rec.State, Dataset: j.spec.Dataset, Analysis: j.spec.Analysis, User: j.spec.User,
		MinOwners:      int32(j.spec.MinOwners),
		OwnersExpected: int32(len(j.spec.Owners)), OwnersUploaded: int32(len(j.rec.Uploads)), OwnersDeclined: int32(len(j.rec.Declined)),
		DeadlineUnix: j.spec.Deadline.Unix(), Reason: j.rec.Reason, CspMembers: j.rec.CSPs, Switched: j.rec.Switched,
		CreatedUnix: j.rec.Created.Unix(), UpdatedUnix: j.rec.Updated.Unix(),
		Timings: &fedpcav1.PhaseTimings{AggregateSeconds: j.rec.Timings.Aggregate, UploadWindowSeconds: j.rec.Timings.UploadWindow,
			SealSeconds: j.rec.Timings.Seal, KeySwitchSeconds: j.rec.Timings.KeySwitch},
	}
	if caller.Role == transport.RoleOwner {
		_, s.CallerIncluded = j.uploaded(caller.ID)
	}
	if full {
		s.ExpectedOwners, s.UploadedOwners = j.spec.Owners, j.uploadedOwners()
		for _, d := range j.rec.Declined {
			s.DeclinedOwners = append(s.DeclinedOwners, &fedpcav1.DeclinedOwner{Owner: d.Owner, Reason: fedpcav1.DeclineReason(d.Reason)})
		}
	}
	return s
}

// info is the full status with the job's ticket.
func (j *jobState) info(caller transport.Identity) *fedpcav1.JobInfo {
	return &fedpcav1.JobInfo{Status: j.status(true, caller), Spec: j.rec.Spec, Signature: j.rec.Signature, UserCertificate: j.rec.UserCert, Schema: j.rec.Schema}
}

// ticketResponse is the job's ticket for owners with the status fields
// fixed at creation. It names every expected owner, so at 10,000 owners it is
// ~150 KB, and all of them fetch it within seconds: it is encoded once and
// shared (transport.Share) for the job's life. j.mu must be held.
func (j *jobState) ticketResponse() *fedpcav1.GetJobResponse {
	if j.ticket == nil {
		st := &fedpcav1.JobStatus{JobId: j.id, Dataset: j.spec.Dataset, Analysis: j.spec.Analysis, User: j.spec.User,
			MinOwners: int32(j.spec.MinOwners), OwnersExpected: int32(len(j.spec.Owners)), DeadlineUnix: j.spec.Deadline.Unix(),
			CreatedUnix: j.rec.Created.Unix()}
		j.ticket = &fedpcav1.GetJobResponse{Job: &fedpcav1.JobInfo{Status: st, Spec: j.rec.Spec, Signature: j.rec.Signature,
			UserCertificate: j.rec.UserCert, Schema: j.rec.Schema}}
		transport.Share(j.ticket)
	}
	return j.ticket
}

func ended(s fedpcav1.JobState) bool {
	return s == fedpcav1.JobState_JOB_STATE_DONE || s == fedpcav1.JobState_JOB_STATE_FAILED
}
