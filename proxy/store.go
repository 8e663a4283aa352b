package proxy

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
)

// Store layout (bbolt), format version 2:
//
//	meta/version               "2"
//	meta/epoch                 random hex, made once: names this store in owners' watch cursors
//	meta/committee             committeeRecord (JSON)
//	budgets/<owner>/<dataset>  budgetRecord (JSON), owners' ledgers for display
//	tickets/<id>               jobTicket (JSON), written once at creation
//	tickets/<id>/userpk        the user's HE public key, written once at creation
//	tickets/<id>/q/NNNNNN      a power job's round's public matrix, in frames, written once at
//	                           creation, deleted when the round ends
//	jobs/<id>/progress         jobProgress (JSON), rewritten at every step; its size does not grow with the owners
//	jobs/<id>/uploads/<owner>  uploadRecord (JSON), one key per owner's upload (a bucket)
//	jobs/<id>/declines/<owner> declineRecord (JSON), one key per owner's decline (a bucket)
//	jobs/<id>/owners/<owner>   "1" for every owner the ticket names, written when the job has
//	                           ended (archiveJob): an ended job's owners are looked up here, not
//	                           kept in memory (a bucket; rebuilt from the ticket at start when missing)
//	jobs/<id>/sum/NNNNNN       running sum (open jobs)
//	jobs/<id>/blinded/NNNNNN   blinded sum (switching)
//	jobs/<id>/mask/NNNNNN      masks, 8 bytes per slot (switching)
//	jobs/<id>/share/PPP/NNNNNN member PPP's key-switch shares (switching)
//	jobs/<id>/result/NNNNNN    the result under the user's key (done)
//	jobs/<id>/published        the user's published result document
//	seen/<sha256>              the job (16 hex digits) of every ciphertext
//	                           ever folded in, to refuse replays
//	contacts/<owner>           when the owner first called this proxy (RFC 3339): a job
//	                           naming an owner never seen fails soon (UnknownOwnerGrace)
//
// Version 1 (no meta/version) kept a job in one jobs/<id>/record that held
// every upload and decline, so that each upload rewrote all the earlier
// ones; openStore rewrites such a store to version 2 once, in one
// transaction. The large values written once (the ticket names every owner,
// the user's key) live apart from those every upload rewrites, so that no
// page an upload dirties holds them.
var (
	bucketMeta    = []byte("meta")
	bucketJobs    = []byte("jobs")
	bucketBudgets = []byte("budgets")
	bucketSeen    = []byte("seen")
	bucketTickets = []byte("tickets")
	bucketUploads = []byte("uploads")
	bucketDecline = []byte("declines")
	bucketOwners  = []byte("owners")
	bucketContact = []byte("contacts")
	keyVersion    = []byte("version")
	keyEpoch      = []byte("epoch")
	keyCommittee  = []byte("committee")
	keyProgress   = []byte("progress")
	keyUserPK     = []byte("userpk")
	keyPublished  = []byte("published")
	keyV1Record   = []byte("record")
)

// storeVersion is the store format this proxy reads and writes.
const storeVersion = 2

func seqKey(prefix string, i int) []byte { return []byte(fmt.Sprintf("%s/%06d", prefix, i)) }

func shareKey(point uint32, i int) []byte { return []byte(fmt.Sprintf("share/%03d/%06d", point, i)) }

func userPKKey(id string) []byte { return []byte(id + "/userpk") }

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
	// Detail is what the owner said besides the code, validated
	// (job.DeclineDetail.Validate); nil when it said nothing more.
	Detail *job.DeclineDetail `json:"detail,omitempty"`
	At     time.Time          `json:"at"`
}

// text says the decline and its detail (job.Decline.Explain).
func (d declineRecord) text(sch *schema.Schema) string {
	var detail job.DeclineDetail
	if d.Detail != nil {
		detail = *d.Detail
	}
	return d.Reason.Explain(detail, sch.FeatureNames())
}

// wire returns the decline as users and owners receive it.
func (d declineRecord) wire() *fedpcav1.DeclinedOwner {
	out := &fedpcav1.DeclinedOwner{Owner: d.Owner, Reason: fedpcav1.DeclineReason(d.Reason)}
	if d.Detail != nil {
		limit, value, field, feature := d.Detail.Wire()
		out.Detail = &fedpcav1.DeclineDetail{Limit: fedpcav1.PolicyLimit(limit), LimitValue: value, SchemaField: field, Feature: feature}
	}
	return out
}

// jobRecord is a job's durable state apart from ciphertexts and the
// owners' answers (kept one key each): the ticket, fixed at creation, and
// the progress, which every step rewrites.
type jobRecord struct {
	jobTicket
	jobProgress
}

// jobTicket is what the user submitted.
type jobTicket struct {
	Spec      []byte `json:"spec"`
	Signature []byte `json:"signature"`
	UserCert  []byte `json:"user_certificate"`
	Schema    []byte `json:"schema"`
	// Owners is the job's owner list (each by ID and key), which the spec
	// commits to by its root: the proxy keeps it for the committee, the
	// user and its own bookkeeping; owners get their inclusion proofs from
	// it.
	Owners  []job.Owner `json:"owners"`
	Created time.Time   `json:"created"`
	// RoundSpec and RoundSignature make the job round t >= 1 of the
	// power-method job whose spec Spec is (job.RoundSpec, canonical, and
	// the user's signature of its ID); the round's public matrix is kept
	// under tickets/<id>/q/.
	RoundSpec      []byte `json:"round_spec,omitempty"`
	RoundSignature []byte `json:"round_signature,omitempty"`
}

// jobProgress is a job's state; its size is bounded by the committee's,
// whatever the number of owners.
type jobProgress struct {
	State   fedpcav1.JobState `json:"state"`
	Reason  string            `json:"reason"`
	Updated time.Time         `json:"updated"`
	// Uploaded and Declined count the upload and decline records.
	Uploaded int `json:"uploaded"`
	Declined int `json:"declined"`
	// Set at sealing: the active members (points and IDs), and whether any
	// member has been asked to switch (after that the budget is spent).
	Active []uint32 `json:"active,omitempty"`
	CSPs   []string `json:"csps,omitempty"`
	// Parties are the three members that compute a components job whose
	// randomness is the members' own (the active ones and others): empty
	// otherwise, the active members computing.
	Parties  []uint32  `json:"parties,omitempty"`
	Switched bool      `json:"switched"`
	SealedAt time.Time `json:"sealed_at"`
	// SwitchStarted is when the first member was asked; Timings are the
	// proxy's measured phases (seconds).
	SwitchStarted time.Time `json:"switch_started"`
	Timings       timings   `json:"timings"`
	// Seq is the proxy's sequence number of the job's last change of state
	// (its creation included): owners' watches resume after it (watch.go).
	Seq uint64 `json:"seq,omitempty"`
}

type timings struct {
	Aggregate    float64 `json:"aggregate"`
	UploadWindow float64 `json:"upload_window"`
	Seal         float64 `json:"seal"`
	KeySwitch    float64 `json:"key_switch"`
}

type budgetRecord struct {
	Owner       string  `json:"owner"`
	Dataset     string  `json:"dataset"`
	RhoBudget   float64 `json:"rho_budget"`
	RhoSpent    float64 `json:"rho_spent"`
	RhoReserved float64 `json:"rho_reserved"`
	Delta       float64 `json:"delta,omitempty"`
	// The owner's own accounting (fedpcav1.BudgetReport); zero from an
	// owner that did not report it.
	EpsilonBudget float64 `json:"epsilon_budget,omitempty"`
	EpsilonSpent  float64 `json:"epsilon_spent,omitempty"`
	// EpsilonSpentAndReserved keeps the key it was stored under before
	// its name said what it is.
	EpsilonSpentAndReserved float64   `json:"epsilon_reserved,omitempty"`
	RhoRemaining            float64   `json:"rho_remaining,omitempty"`
	At                      time.Time `json:"at"`
}

// remaining is the budget the owner reported left (in rho; computed from
// the rho amounts for an owner that did not report it).
func (b budgetRecord) remaining() float64 {
	if b.EpsilonBudget > 0 {
		return b.RhoRemaining
	}
	return b.RhoBudget - b.RhoSpent - b.RhoReserved
}

// storedJob is a job as read back from the store, undecoded (decodeJob
// checks it). An archived job (ended, its owners indexed) comes without its
// uploads and declines: they are read when asked for.
type storedJob struct {
	id               string
	ticket, progress []byte
	uploads          [][]byte
	declines         [][]byte
	archived         bool
}

// store is the proxy's durable state: each of its methods is one bbolt
// transaction, and each step of a job is one method. Ciphertexts come and
// go encoded. A step's cost does not grow with the job's owners: an upload
// writes its own record, the job's progress and the running sum. Safe for
// concurrent use; callers hold the job's lock so that a job's steps are
// ordered.
type store struct {
	db *bolt.DB
	// epoch names this store (meta/epoch) in the owners' watch cursors: a
	// cursor of another store, or of a store made again, is not resumed.
	epoch string
}

// openStore checks the store's format version, creating the buckets of an
// empty store and rewriting a version 1 store to version 2.
func openStore(db *bolt.DB) (*store, error) {
	s := &store{db: db}
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketMeta, bucketJobs, bucketBudgets, bucketSeen, bucketTickets, bucketContact} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if s.epoch = string(meta.Get(keyEpoch)); s.epoch == "" {
			s.epoch = rand.Text()[:16]
			if err := meta.Put(keyEpoch, []byte(s.epoch)); err != nil {
				return err
			}
		}
		switch v := meta.Get(keyVersion); {
		case v == nil:
			if err := migrateV1(tx); err != nil {
				return fmt.Errorf("rewrite the version 1 store: %w", err)
			}
		case string(v) != strconv.Itoa(storeVersion):
			return fmt.Errorf("the store has format version %q; this proxy reads version %d only", v, storeVersion)
		default:
			return nil
		}
		return meta.Put(keyVersion, []byte(strconv.Itoa(storeVersion)))
	})
	if err != nil {
		return nil, fmt.Errorf("proxy: store: %w", err)
	}
	return s, nil
}

// migrateV1 splits every version 1 job record into its ticket, its
// progress and one record per upload and decline.
func migrateV1(tx *bolt.Tx) error {
	jobs := tx.Bucket(bucketJobs)
	return jobs.ForEachBucket(func(k []byte) error {
		b := jobs.Bucket(k)
		v := b.Get(keyV1Record)
		if v == nil {
			return fmt.Errorf("job %s: no record", k)
		}
		var old struct {
			jobRecord
			Uploads  []uploadRecord  `json:"uploads"`
			Declined []declineRecord `json:"declined"`
		}
		if err := json.Unmarshal(v, &old); err != nil {
			return fmt.Errorf("job %s: %w", k, err)
		}
		rec := old.jobRecord
		rec.Uploaded, rec.Declined = len(old.Uploads), len(old.Declined)
		if err := putJob(tx, string(k), &rec, b.Get(keyUserPK)); err != nil {
			return err
		}
		ups, decs := b.Bucket(bucketUploads), b.Bucket(bucketDecline)
		for _, u := range old.Uploads {
			if err := putJSON(ups, []byte(u.Owner), u); err != nil {
				return err
			}
		}
		for _, d := range old.Declined {
			if err := putJSON(decs, []byte(d.Owner), d); err != nil {
				return err
			}
		}
		if err := b.Delete(keyUserPK); err != nil {
			return err
		}
		return b.Delete(keyV1Record)
	})
}

func putJSON(b *bolt.Bucket, k []byte, v any) error {
	enc, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, enc)
}

func jobBucket(tx *bolt.Tx, id string) (*bolt.Bucket, error) {
	b := tx.Bucket(bucketJobs).Bucket([]byte(id))
	if b == nil {
		return nil, fmt.Errorf("job %s is not in the store", id)
	}
	return b, nil
}

// update runs fn on the job's bucket in one transaction, then writes the
// job's progress (when prog is set).
func (s *store) update(id string, prog *jobProgress, fn func(tx *bolt.Tx, b *bolt.Bucket) error) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b, err := jobBucket(tx, id)
		if err != nil {
			return err
		}
		if fn != nil {
			if err := fn(tx, b); err != nil {
				return err
			}
		}
		if prog == nil {
			return nil
		}
		return putJSON(b, keyProgress, prog)
	})
}

// view runs fn on the job's bucket in a read transaction.
func (s *store) view(id string, fn func(tx *bolt.Tx, b *bolt.Bucket) error) error {
	return s.db.View(func(tx *bolt.Tx) error {
		b, err := jobBucket(tx, id)
		if err != nil {
			return err
		}
		return fn(tx, b)
	})
}

// committee returns the stored committee record (nil when none).
func (s *store) committee() (out []byte, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		out = slices.Clone(tx.Bucket(bucketMeta).Get(keyCommittee))
		return nil
	})
	return out, err
}

func (s *store) putCommittee(c *committeeRecord) error {
	return s.db.Update(func(tx *bolt.Tx) error { return putJSON(tx.Bucket(bucketMeta), keyCommittee, c) })
}

// jobs reads every job.
func (s *store) jobs() ([]storedJob, error) {
	var out []storedJob
	err := s.db.View(func(tx *bolt.Tx) error {
		jobs := tx.Bucket(bucketJobs)
		return jobs.ForEachBucket(func(k []byte) error {
			b := jobs.Bucket(k)
			sj := storedJob{id: string(k), ticket: slices.Clone(tx.Bucket(bucketTickets).Get(k)), progress: slices.Clone(b.Get(keyProgress)),
				archived: b.Bucket(bucketOwners) != nil}
			if !sj.archived {
				sj.uploads = values(b.Bucket(bucketUploads))
				sj.declines = values(b.Bucket(bucketDecline))
			}
			out = append(out, sj)
			return nil
		})
	})
	return out, err
}

// values returns a bucket's values (none when b is nil).
func values(b *bolt.Bucket) [][]byte {
	var out [][]byte
	if b != nil {
		_ = b.ForEach(func(_, v []byte) error {
			out = append(out, slices.Clone(v))
			return nil
		})
	}
	return out
}

func hasPrefix(k []byte, prefix string) bool {
	return len(k) >= len(prefix) && string(k[:len(prefix)]) == prefix
}

// archiveJob indexes an ended job's owners (jobs/<id>/owners), once: from
// then on they are looked up in the store (answerOf, answers).
func (s *store) archiveJob(id string, owners []job.Owner) error {
	return s.update(id, nil, func(_ *bolt.Tx, b *bolt.Bucket) error {
		if b.Bucket(bucketOwners) != nil {
			return nil
		}
		ob, err := b.CreateBucket(bucketOwners)
		if err != nil {
			return err
		}
		ob.FillPercent = 1 // the keys are added in order (the list is sorted), once
		for _, o := range owners {
			v := o.Key // the key the job names the owner by
			if v == "" {
				v = "1" // insecure mode: named, by no key
			}
			if err := ob.Put([]byte(o.ID), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
}

// ownerAnswer is what an archived job's store says about one owner.
type ownerAnswer struct {
	named   bool
	key     string
	upload  *uploadRecord
	decline *declineRecord
}

// answerOf looks one owner up in an archived job.
func (s *store) answerOf(id, owner string) (a ownerAnswer, err error) {
	err = s.view(id, func(_ *bolt.Tx, b *bolt.Bucket) error {
		ob := b.Bucket(bucketOwners)
		if ob == nil {
			return fmt.Errorf("job %s has no owner index", id)
		}
		k := []byte(owner)
		v := ob.Get(k)
		a.named = v != nil
		if len(v) > 1 {
			a.key = string(v)
		}
		if v := b.Bucket(bucketUploads).Get(k); v != nil {
			a.upload = new(uploadRecord)
			if err := json.Unmarshal(v, a.upload); err != nil {
				return fmt.Errorf("job %s: upload record of %s: %w", id, owner, err)
			}
		}
		if v := b.Bucket(bucketDecline).Get(k); v != nil {
			a.decline = new(declineRecord)
			if err := json.Unmarshal(v, a.decline); err != nil {
				return fmt.Errorf("job %s: decline record of %s: %w", id, owner, err)
			}
		}
		return nil
	})
	return a, err
}

// answers reads an archived job's owner list (from its ticket) and all its
// owners' answers.
func (s *store) answers(id string) (owners []job.Owner, uploads map[string]uploadRecord, declines map[string]declineRecord, err error) {
	err = s.view(id, func(tx *bolt.Tx, b *bolt.Bucket) error {
		var t jobTicket
		if err := json.Unmarshal(tx.Bucket(bucketTickets).Get([]byte(id)), &t); err != nil {
			return fmt.Errorf("job %s: ticket: %w", id, err)
		}
		owners = t.Owners
		uploads, declines = map[string]uploadRecord{}, map[string]declineRecord{}
		if err := b.Bucket(bucketUploads).ForEach(func(k, v []byte) error {
			var u uploadRecord
			if err := json.Unmarshal(v, &u); err != nil {
				return err
			}
			uploads[string(k)] = u
			return nil
		}); err != nil {
			return fmt.Errorf("job %s: upload record: %w", id, err)
		}
		return b.Bucket(bucketDecline).ForEach(func(k, v []byte) error {
			var d declineRecord
			if err := json.Unmarshal(v, &d); err != nil {
				return fmt.Errorf("job %s: decline record: %w", id, err)
			}
			declines[string(k)] = d
			return nil
		})
	})
	return owners, uploads, declines, err
}

// createJob stores a new job, and a round's public matrix (its frames,
// tickets/<id>/q/NNNNNN).
func (s *store) createJob(id string, rec *jobRecord, userPK []byte, matrix [][]byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.Bucket(bucketJobs).CreateBucket([]byte(id)); err != nil {
			return err
		}
		for i, f := range matrix {
			if err := tx.Bucket(bucketTickets).Put(seqKey(id+"/q", i), f); err != nil {
				return err
			}
		}
		return putJob(tx, id, rec, userPK)
	})
}

// matrix returns a round's public matrix's frames.
func (s *store) matrix(id string) (out [][]byte, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketTickets).Cursor()
		prefix := id + "/q/"
		for k, v := c.Seek([]byte(prefix)); k != nil && hasPrefix(k, prefix); k, v = c.Next() {
			out = append(out, slices.Clone(v))
		}
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("round %s…: no public matrix in the store", id[:12])
	}
	return out, err
}

// putJob writes a job's ticket, user key and progress, and creates the
// buckets of its owners' answers, in the job's existing bucket.
func putJob(tx *bolt.Tx, id string, rec *jobRecord, userPK []byte) error {
	b := tx.Bucket(bucketJobs).Bucket([]byte(id))
	for _, name := range [][]byte{bucketUploads, bucketDecline} {
		if _, err := b.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	if err := putJSON(b, keyProgress, rec.jobProgress); err != nil {
		return err
	}
	tickets := tx.Bucket(bucketTickets)
	if err := putJSON(tickets, []byte(id), rec.jobTicket); err != nil {
		return err
	}
	return tickets.Put(userPKKey(id), userPK)
}

// addUpload includes one owner's upload: its record, the new running sum,
// its ciphertexts' digests (refused, with nothing written, if any was seen
// before) and its budget report, with the job's progress, in one
// transaction. The upload may be acknowledged once it returns nil.
func (s *store) addUpload(id string, prog *jobProgress, u uploadRecord, sum, digests [][]byte, budget *budgetRecord) error {
	return s.addUploads(id, prog, func(tx uploadTx) error {
		if err := tx.markSeen(digests); err != nil {
			return err
		}
		if err := tx.put(u, budget); err != nil {
			return err
		}
		return tx.putSum(sum)
	})
}

// addUploads includes a batch of uploads in one transaction: fn records
// each (uploadTx) and the new running sum, and may change prog (written
// after it). Nothing is written if fn fails.
func (s *store) addUploads(id string, prog *jobProgress, fn func(uploadTx) error) error {
	return s.update(id, prog, func(tx *bolt.Tx, b *bolt.Bucket) error {
		return fn(uploadTx{tx: tx, b: b, id: id})
	})
}

// uploadTx is the write transaction of a batch of uploads to one job.
type uploadTx struct {
	tx *bolt.Tx
	b  *bolt.Bucket
	id string
}

// markSeen records an upload's ciphertext digests, refusing (with nothing
// written) any seen before, in this job or another.
func (t uploadTx) markSeen(digests [][]byte) error { return markSeen(t.tx, t.id, digests) }

// put records an owner's inclusion and its budget report.
func (t uploadTx) put(u uploadRecord, budget *budgetRecord) error {
	if err := putJSON(t.b.Bucket(bucketUploads), []byte(u.Owner), u); err != nil {
		return err
	}
	return putBudget(t.tx, budget)
}

// putSum replaces the job's running sum.
func (t uploadTx) putSum(sum [][]byte) error { return putSeq(t.b, "sum", sum) }

// addDecline records an owner's decline and its budget report.
func (s *store) addDecline(id string, prog *jobProgress, d declineRecord, budget *budgetRecord) error {
	return s.update(id, prog, func(tx *bolt.Tx, b *bolt.Bucket) error {
		if err := putJSON(b.Bucket(bucketDecline), []byte(d.Owner), d); err != nil {
			return err
		}
		return putBudget(tx, budget)
	})
}

// seal replaces the running sum by the blinded sum and its masks.
func (s *store) seal(id string, prog *jobProgress, blinded, masks [][]byte) error {
	return s.update(id, prog, func(_ *bolt.Tx, b *bolt.Bucket) error {
		if err := putSeq(b, "blinded", blinded); err != nil {
			return err
		}
		if err := putSeq(b, "mask", masks); err != nil {
			return err
		}
		return deletePrefix(b, "sum/")
	})
}

// setProgress records a step that writes no ciphertexts.
func (s *store) setProgress(id string, prog *jobProgress) error { return s.update(id, prog, nil) }

// putShares stores member pt's key-switch shares.
func (s *store) putShares(id string, pt uint32, shares [][]byte) error {
	return s.update(id, nil, func(_ *bolt.Tx, b *bolt.Bucket) error {
		for i, v := range shares {
			if err := b.Put(shareKey(pt, i), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// finish stores the result and frees what the key switch used (and a
// round's public matrix: no one uploads under it any more).
func (s *store) finish(id string, prog *jobProgress, result [][]byte) error {
	return s.update(id, prog, func(tx *bolt.Tx, b *bolt.Bucket) error {
		if err := putSeq(b, "result", result); err != nil {
			return err
		}
		if err := deletePrefix(tx.Bucket(bucketTickets), id+"/q/"); err != nil {
			return err
		}
		return deletePrefixes(b, "blinded/", "mask/", "share/")
	})
}

// fail ends a job without a release (a failure or the user's cancel) and
// frees its ciphertexts (and a round's public matrix).
func (s *store) fail(id string, prog *jobProgress) error {
	return s.update(id, prog, func(tx *bolt.Tx, b *bolt.Bucket) error {
		if err := deletePrefix(tx.Bucket(bucketTickets), id+"/q/"); err != nil {
			return err
		}
		return deletePrefixes(b, "sum/", "blinded/", "mask/", "share/")
	})
}

// publish stores the user's published result document.
// contacts returns the owners that ever called this proxy.
func (s *store) contacts() (map[string]bool, error) {
	out := map[string]bool{}
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketContact).ForEach(func(k, _ []byte) error {
			out[string(k)] = true
			return nil
		})
	})
	return out, err
}

// putContact records an owner's first call.
func (s *store) putContact(owner string, at time.Time) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketContact).Put([]byte(owner), []byte(at.UTC().Format(time.RFC3339)))
	})
}

func (s *store) publish(id string, doc []byte) error {
	return s.update(id, nil, func(_ *bolt.Tx, b *bolt.Bucket) error { return b.Put(keyPublished, doc) })
}

// published returns the user's published result document (nil when none).
func (s *store) published(id string) (out []byte, err error) {
	err = s.view(id, func(tx *bolt.Tx, b *bolt.Bucket) error {
		out = slices.Clone(b.Get(keyPublished))
		return nil
	})
	return out, err
}

// seq reads n values stored under a prefix.
func (s *store) seq(id, prefix string, n int) (out [][]byte, err error) {
	err = s.view(id, func(tx *bolt.Tx, b *bolt.Bucket) error {
		out, err = getSeq(b, prefix, n)
		return err
	})
	return out, err
}

// switchInputs are what a key switch needs, encoded.
type switchInputs struct {
	blinded [][]byte
	masks   [][]byte
	userPK  []byte
	shares  map[uint32][][]byte // the members that answered
}

func (s *store) switchInputs(id string, n, masks int, active []uint32) (*switchInputs, error) {
	in := &switchInputs{shares: map[uint32][][]byte{}}
	err := s.view(id, func(tx *bolt.Tx, b *bolt.Bucket) error {
		var err error
		if in.blinded, err = getSeq(b, "blinded", n); err != nil {
			return err
		}
		if in.masks, err = getSeq(b, "mask", masks); err != nil {
			return err
		}
		if masks == 0 && b.Get(seqKey("mask", 0)) != nil {
			return errors.New("it was sealed, blinded, by an earlier version of the proxy, whose members removed the blinding in shares; run the job again")
		}
		in.userPK = slices.Clone(tx.Bucket(bucketTickets).Get(userPKKey(id)))
		for _, pt := range active {
			if b.Get(shareKey(pt, 0)) == nil {
				continue
			}
			ss := make([][]byte, n)
			for i := range ss {
				if ss[i] = slices.Clone(b.Get(shareKey(pt, i))); ss[i] == nil {
					return fmt.Errorf("share %d of member %d missing from the store", i, pt)
				}
			}
			in.shares[pt] = ss
		}
		return nil
	})
	return in, err
}

// userPK returns the user's HE public key stored with the job.
func (s *store) userPK(id string) (out []byte, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		out = slices.Clone(tx.Bucket(bucketTickets).Get(userPKKey(id)))
		return nil
	})
	return out, err
}

// budgets returns the owners' budget reports (those that decode).
func (s *store) budgets() []budgetRecord {
	var out []budgetRecord
	_ = s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketBudgets).ForEach(func(_, v []byte) error {
			var b budgetRecord
			if json.Unmarshal(v, &b) == nil {
				out = append(out, b)
			}
			return nil
		})
	})
	return out
}

// setBudget replaces an owner's budget report for a dataset.
func (s *store) setBudget(b *budgetRecord) error {
	return s.db.Update(func(tx *bolt.Tx) error { return putBudget(tx, b) })
}

func putBudget(tx *bolt.Tx, b *budgetRecord) error {
	if b == nil {
		return nil
	}
	return putJSON(tx.Bucket(bucketBudgets), []byte(b.Owner+"/"+b.Dataset), b)
}

// markSeen records the digests of an upload's ciphertexts, refusing the
// upload if any of them was folded in before, in this job or another: an
// encryption is fresh every time, so a ciphertext seen twice is a replay (an
// old upload sent again to a later job, or another owner's ciphertext). The
// same upload re-sent to the same job never gets here: it is acknowledged
// again before it is read.
func markSeen(tx *bolt.Tx, jobID string, digests [][]byte) error {
	b := tx.Bucket(bucketSeen)
	for i, d := range digests {
		if prev := b.Get(d); prev != nil {
			return bad("ciphertext %d was already uploaded (to job %s…): an upload is for one job, once", i, prev)
		}
		for _, e := range digests[:i] {
			if bytes.Equal(e, d) {
				return bad("ciphertext %d repeats an earlier one of the same upload", i)
			}
		}
	}
	for _, d := range digests {
		if err := b.Put(d, []byte(jobID[:16])); err != nil {
			return err
		}
	}
	return nil
}

func putSeq(b *bolt.Bucket, prefix string, vs [][]byte) error {
	for i, v := range vs {
		if err := b.Put(seqKey(prefix, i), v); err != nil {
			return err
		}
	}
	return nil
}

// getSeq reads n values under a prefix (copied out of the transaction).
func getSeq(b *bolt.Bucket, prefix string, n int) ([][]byte, error) {
	out := make([][]byte, n)
	for i := range out {
		v := b.Get(seqKey(prefix, i))
		if v == nil {
			return nil, fmt.Errorf("%s %d missing from the store", prefix, i)
		}
		out[i] = slices.Clone(v)
	}
	return out, nil
}

func deletePrefixes(b *bolt.Bucket, prefixes ...string) error {
	for _, prefix := range prefixes {
		if err := deletePrefix(b, prefix); err != nil {
			return err
		}
	}
	return nil
}

func deletePrefix(b *bolt.Bucket, prefix string) error {
	c := b.Cursor()
	for k, _ := c.Seek([]byte(prefix)); k != nil && hasPrefix(k, prefix); k, _ = c.Seek([]byte(prefix)) {
		if err := c.Delete(); err != nil {
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
