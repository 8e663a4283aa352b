package csp

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/fedpca/fedpca/transport"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/ring"
)

// SwitchRecord is the audit record of a key switch, stored with the shares.
type SwitchRecord = switchRecord

// switchRecord is the audit record of a key switch, stored with the shares.
type switchRecord struct {
	JobID       string    `json:"job_id"`
	User        string    `json:"user"`
	Dataset     string    `json:"dataset"`
	Analysis    string    `json:"analysis"`
	Digest      string    `json:"request_digest"`
	Active      []uint32  `json:"active"`
	Owners      int       `json:"owners"`
	Ciphertexts int       `json:"ciphertexts"`
	NoNoise     bool      `json:"no_noise"`
	At          time.Time `json:"at"`
	// Release is "components" for a solved job, whose one stored share is
	// the member's sealed output.
	Release string `json:"release,omitempty"`
	// Parent and Round, for round Round >= 1 of a power-method job (JobID
	// is the round's ID): the member switches one round of each number of
	// a parent (the power-rounds index, written with the record).
	Parent string `json:"parent,omitempty"`
	Round  int    `json:"round,omitempty"`
}

// checked is a validated key-switch header.
type checked struct {
	// id is the job's ID: the spec's, or its round's (round.Round >= 1).
	id     string
	round  job.RoundSpec
	spec   *job.Spec
	sch    *schema.Schema
	userPK *rlwe.PublicKey
	active []he.Point
	owners []string
	// keys are the included owners' keys, as the job names them.
	keys map[string]string
	n    int
}

// checkHeader validates everything about a key-switch request that can be
// checked before the ciphertexts arrive.
func (c *CSP) checkHeader(h *fedpcav1.KeySwitchHeader, st *secretFile, parties ...uint32) (*checked, error) {
	spec, err := job.ParseSpec(h.GetSpec())
	if err != nil {
		return nil, invalid("spec: %v", err)
	}
	var round job.RoundSpec
	if h.GetRoundSpec() != nil {
		if round, err = job.ParseRoundSpec(h.GetRoundSpec()); err != nil {
			return nil, invalid("%v", err)
		}
	}
	id := job.JobID(spec, round)
	if id != h.GetJobId() {
		return nil, invalid("job_id %q is not the ID %s of the spec (and round) it comes with", h.GetJobId(), id)
	}
	if _, err := transport.VerifyTicket(c.cfg.Creds, spec, h.GetSignature(), h.GetUserCertificate()); err != nil {
		return nil, forbidden("job %s…: %v", spec.ID()[:12], err)
	}
	if round.Round > 0 {
		if err := transport.VerifyRound(c.cfg.Creds, spec, round, h.GetRoundSignature(), h.GetUserCertificate()); err != nil {
			return nil, forbidden("%v", err)
		}
	}
	// An exact components job is the owners' choice (their
	// --allow-exact-components): the members learn nothing either way.
	if spec.NoNoise && !spec.Components() && !c.cfg.AllowNoNoise {
		return nil, forbidden("job %s… has no DP noise; this member refuses such jobs (they exist for tests and simulations)", spec.ID()[:12])
	}
	userPK, err := c.params.Codecs().PublicKey.Unmarshal(h.GetUserPublicKey())
	if err != nil {
		return nil, invalid("user_public_key: %v", err)
	}
	if job.Fingerprint(h.GetUserPublicKey()) != spec.UserKey {
		return nil, forbidden("user_public_key is not the key the spec names (%s…); this member switches only to the signed key", spec.UserKey[:12])
	}
	sch, err := schema.Parse(h.GetSchema())
	if err != nil {
		return nil, invalid("schema: %v", err)
	}
	if err := spec.Check(sch, c.params); err != nil {
		return nil, invalid("%v", err)
	}
	if spec.CommitteeKey != st.Fingerprint {
		return nil, fmt.Errorf("%w: job %s… is for committee key %s…, this member holds %s…", ErrOtherCommittee, spec.ID()[:12], spec.CommitteeKey[:12], st.Fingerprint[:12])
	}
	if spec.CommitteeN != st.Secret.N || spec.CommitteeThreshold != st.Secret.Threshold {
		return nil, invalid("spec committee %d-of-%d, this member's is %d-of-%d", spec.CommitteeThreshold, spec.CommitteeN, st.Secret.Threshold, st.Secret.N)
	}
	committee := spec.Committee()
	active := make([]he.Point, len(h.GetActive()))
	for i, a := range h.GetActive() {
		active[i] = he.Point(a)
	}
	if err := committee.CheckActive(active); err != nil {
		return nil, invalid("active: %v", err)
	}
	if !slices.Contains(active, st.Secret.Point) && !slices.Contains(parties, uint32(st.Secret.Point)) {
		return nil, invalid("active set %v does not include this member (%d)", active, st.Secret.Point)
	}
	owners := h.GetOwners()
	jobOwners := transport.Owners(h.GetJobOwnerRefs())
	if err := spec.CheckIncluded(jobOwners, owners); err != nil {
		return nil, invalid("%v", err)
	}
	keys := make(map[string]string, len(owners))
	for _, o := range jobOwners {
		keys[o.ID] = o.Key
	}
	values, err := spec.RoundLen(sch, round.Round)
	if err != nil {
		return nil, invalid("%v", err)
	}
	n := c.params.Chunks(values)
	if int(h.GetCiphertexts()) != n {
		return nil, invalid("ciphertexts: %d announced, the job's layout needs %d", h.GetCiphertexts(), n)
	}
	return &checked{id: id, round: round, spec: spec, sch: sch, userPK: userPK, active: active, owners: owners, keys: keys, n: n}, nil
}

// hashField writes a length-prefixed field.
func hashField(h hash.Hash, b []byte) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

func headerDigest(hd *fedpcav1.KeySwitchHeader) hash.Hash {
	h := sha256.New()
	for _, f := range [][]byte{[]byte(hd.GetJobId()), hd.GetSpec(), hd.GetSignature(), hd.GetUserCertificate(), hd.GetUserPublicKey(), hd.GetSchema()} {
		hashField(h, f)
	}
	if hd.GetRoundSpec() != nil {
		hashField(h, hd.GetRoundSpec())
		hashField(h, hd.GetRoundSignature())
	}
	for _, a := range hd.GetActive() {
		hashField(h, []byte(fmt.Sprint(a)))
	}
	for _, o := range hd.GetOwners() {
		hashField(h, []byte(o))
	}
	hashField(h, []byte(fmt.Sprintf("job_owners %d", len(hd.GetJobOwnerRefs()))))
	for _, o := range hd.GetJobOwnerRefs() {
		hashField(h, []byte(o.GetId()))
		hashField(h, []byte(o.GetKey()))
	}
	return h
}

// jobLocks serialises the key switches of each job. A job's lock lives
// while a switch of that job holds or waits for it, and is deleted when the
// last one leaves: a member that switches job after job keeps no state per
// job. The zero value is ready; safe for concurrent use.
type jobLocks struct {
	mu    sync.Mutex
	locks map[string]*jobLock
}

type jobLock struct {
	sync.Mutex
	users int // switches holding or waiting for it; guarded by jobLocks.mu
}

// lock waits for the job's lock and returns its release.
func (l *jobLocks) lock(id string) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*jobLock{}
	}
	m := l.locks[id]
	if m == nil {
		m = &jobLock{}
		l.locks[id] = m
	}
	m.users++
	l.mu.Unlock()
	m.Lock()
	return func() {
		m.Unlock()
		l.mu.Lock()
		if m.users--; m.users == 0 {
			delete(l.locks, id)
		}
		l.mu.Unlock()
	}
}

// len is the number of jobs with a switch in progress or waiting.
func (l *jobLocks) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}

// KeySwitch implements fedpcav1.CspServiceServer.
func (c *CSP) KeySwitch(stream fedpcav1.CspService_KeySwitchServer) error {
	return c.status(c.keySwitch(stream))
}

func (c *CSP) keySwitch(stream fedpcav1.CspService_KeySwitchServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hd := first.GetHeader()
	if hd == nil {
		return invalid("the first message must be the header")
	}
	c.mu.Lock()
	st, member := c.state, c.member
	c.mu.Unlock()
	if st == nil {
		return ErrNoKey
	}
	chk, err := c.checkHeader(hd, st)
	if err == nil && chk.spec.Components() {
		err = forbidden("job %s… releases only its components: its sum is solved among the members (Solve), never switched to the user", chk.id[:12])
	}
	if err != nil {
		c.m.switches.WithLabelValues("refused").Inc()
		return err
	}
	defer c.switching.lock(hd.GetJobId())()

	h := headerDigest(hd)
	cts, err := c.readSum(chk.n, h, func() ([]byte, error) {
		msg, err := stream.Recv()
		return msg.GetCiphertext(), err
	})
	if err != nil {
		return err
	}
	verifyStart := time.Now()
	if err := c.verifyUploads(switchUploads(stream), chk, st, cts); err != nil {
		c.m.switches.WithLabelValues("refused").Inc()
		c.log.Warn("key switch refused: the sum is not the named owners' proven uploads", "job", chk.id[:16], "error", err)
		return err
	}
	c.m.verify.Observe(time.Since(verifyStart).Seconds())
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		if err == nil {
			return invalid("more than the announced ciphertexts and uploads")
		}
		return err
	}
	digest := hex.EncodeToString(h.Sum(nil))

	shares, rec, err := c.storedShares(chk.id)
	if err != nil {
		return fmt.Errorf("read switch record: %w", err)
	}
	if rec == nil && chk.round.Round > 0 {
		if err := c.db.View(func(tx *bolt.Tx) error { return roundFree(tx, chk.round) }); err != nil {
			c.m.switches.WithLabelValues("refused").Inc()
			return err
		}
	}
	if rec != nil && rec.Digest != digest {
		c.m.switches.WithLabelValues("refused").Inc()
		return fmt.Errorf("%w: job %s… was already switched on %s with another request (active %v, %d owners)", ErrSwitched, chk.id[:12], rec.At.Format(time.RFC3339), rec.Active, rec.Owners)
	}
	if rec != nil {
		c.m.switches.WithLabelValues("replayed").Inc()
		c.log.Info("key switch replayed", "job", chk.id[:16], "user", chk.spec.User)
	} else {
		start := time.Now()
		if shares, err = c.computeShares(chk, st, member, cts); err != nil {
			c.m.switches.WithLabelValues("refused").Inc()
			return err
		}
		c.m.seconds.Observe(time.Since(start).Seconds())
		c.m.switches.WithLabelValues("switched").Inc()
		rec = &switchRecord{
			JobID: chk.id, User: chk.spec.User, Dataset: chk.spec.Dataset, Analysis: chk.spec.Analysis,
			Digest: digest, Owners: len(chk.owners), Ciphertexts: chk.n, NoNoise: chk.spec.NoNoise, At: time.Now().UTC(),
		}
		if chk.round.Round > 0 {
			rec.Parent, rec.Round = chk.round.Parent, chk.round.Round
		}
		for _, a := range chk.active {
			rec.Active = append(rec.Active, uint32(a))
		}
		if err := c.storeShares(rec, shares); err != nil {
			return fmt.Errorf("store switch record: %w", err)
		}
		c.log.Info("key switch", "job", rec.JobID[:16], "user", rec.User, "dataset", rec.Dataset, "active", fmt.Sprint(rec.Active), "owners", rec.Owners, "ciphertexts", rec.Ciphertexts, "no_noise", rec.NoNoise)
	}
	for _, s := range shares {
		if err := stream.Send(&fedpcav1.KeySwitchResponse{Share: s}); err != nil {
			return err
		}
	}
	c.prepareSwitch(member, chk.n)
	return nil
}

// verifyUploads receives, after the blinded sum, the upload of every owner
// the header names as included, in that order (an OwnerUpload, then one
// UploadPart per ciphertext), and checks that this member may switch the
// sum: every upload is signed by its owner's certificate (the owner's
// upload statement), every ciphertext's c1 is proven well formed for this
// job and owner (protocol/zk, verified here on GOMAXPROCS workers), and the
// c1 of each blinded ciphertext is exactly the sum of the owners' c1 (the
// proxy's noise and mask touch only c0). Otherwise the switch is refused
// and no share is made: a subset, a double count, a dropped, foreign or
// crafted ciphertext, whoever sent it.
func (c *CSP) verifyUploads(next nextUpload, chk *checked, st *secretFile, cts []*rlwe.Ciphertext) error {
	key, _, err := c.committeeKeys(st)
	if err != nil {
		return err
	}
	v := newVerifier(c.params, key, chk.id, chk.n, runtime.GOMAXPROCS(0))
	defer v.stop()
	for _, owner := range chk.owners {
		up, _, what, err := next()
		if errors.Is(err, io.EOF) {
			return invalid("the stream ended before owner %s's upload: every included owner's upload must come with the sum", owner)
		}
		if err != nil {
			return err
		}
		if up == nil || up.GetOwner() != owner {
			return invalid("expected owner %s's upload (the header's order), got %s", owner, what)
		}
		digests := make([]job.PartDigests, chk.n)
		var group []job.Part // the parts of the proof group under way
		for i := range chk.n {
			_, pm, what, err := next()
			if err != nil {
				if errors.Is(err, io.EOF) {
					return invalid("owner %s's upload ended after %d of %d ciphertexts", owner, i, chk.n)
				}
				return err
			}
			if pm == nil || len(pm.GetC0Digest()) != sha256.Size {
				return invalid("owner %s's ciphertext %d: expected an upload part with a 32-byte c0 digest, got %s", owner, i, what)
			}
			part := job.Part{C1: pm.GetC1(), Proof: pm.GetProof()}
			copy(part.C0Digest[:], pm.GetC0Digest())
			if err := checkC0(chk.spec, owner, i, pm, &part); err != nil {
				return err
			}
			digests[i] = part.Digests()
			group = append(group, part)
			first, ends := job.ProofEnds(i, chk.n)
			if !ends {
				continue
			}
			if err := v.add(owner, first, group); err != nil {
				return err
			}
			group = nil
		}
		if err := transport.VerifyOwnerSignature(c.cfg.Creds, job.Owner{ID: owner, Key: chk.keys[owner]}, up.GetCertificate(), job.UploadContext,
			job.UploadStatement(chk.id, owner, digests), up.GetSignature()); err != nil {
			return invalid("owner %s's upload is not signed by the key the job names it by (%v): the proxy cannot vouch for an upload", owner, err)
		}
	}
	sums, err := v.wait()
	if err != nil {
		return err
	}
	rq := c.params.RingQ().AtLevel(c.params.Level())
	for i, ct := range cts {
		if !rq.Equal(sums[i][1], ct.Value[1]) {
			return invalid("ciphertext %d of the sum is not the sum of the %d included owners' proven uploads (its c1 differs: a subset, a double count, a dropped or foreign upload, or a crafted ciphertext); no share made", i, len(chk.owners))
		}
		if chk.spec.BindsC0() && !rq.Equal(sums[i][0], ct.Value[0]) {
			return invalid("ciphertext %d of the sum is not exactly the %d included owners' uploads: its c0 differs from the sum of their signed c0 (in an exact components job nothing may be added to the sum); no share made", i, len(chk.owners))
		}
	}
	return nil
}

// checkC0 takes an upload part's c0 into part where the job binds c0 (it
// must come, and hash to the signed digest), and refuses one where it does
// not.
func checkC0(spec *job.Spec, owner string, i int, pm *fedpcav1.UploadPart, part *job.Part) error {
	c0 := pm.GetC0()
	switch {
	case !spec.BindsC0() && len(c0) > 0:
		return invalid("owner %s's ciphertext %d: c0 sent for a job whose members do not check it", owner, i)
	case !spec.BindsC0():
		return nil
	case len(c0) == 0:
		return invalid("owner %s's ciphertext %d: no c0: an exact components job's members check the sum's c0 against the owners'", owner, i)
	case sha256.Sum256(c0) != part.C0Digest:
		return invalid("owner %s's ciphertext %d: its c0 is not the one the owner signed (digest differs)", owner, i)
	}
	part.C0 = c0
	return nil
}

// readSum reads the n ciphertexts of the sum that follow a request's
// header (next returns the next message's ciphertext, nil for another
// kind), hashing each into h.
func (c *CSP) readSum(n int, h hash.Hash, next func() ([]byte, error)) ([]*rlwe.Ciphertext, error) {
	cts := make([]*rlwe.Ciphertext, n)
	for i := range cts {
		b, err := next()
		if errors.Is(err, io.EOF) {
			return nil, invalid("stream ended after %d of %d ciphertexts", i, n)
		}
		if err != nil {
			return nil, err
		}
		if b == nil {
			return nil, invalid("message %d: expected a ciphertext", i+1)
		}
		if cts[i], err = c.params.Codecs().Ciphertext.Unmarshal(b); err != nil {
			return nil, invalid("ciphertext %d: %v", i, err)
		}
		hashField(h, b)
	}
	return cts, nil
}

// nextUpload returns the next message of a request's uploads: an owner's
// upload header or one of its parts (KeySwitch and Solve carry the same
// messages), and the message's kind for errors.
type nextUpload func() (*fedpcav1.OwnerUpload, *fedpcav1.UploadPart, string, error)

// switchUploads reads a key-switch request's uploads.
func switchUploads(stream fedpcav1.CspService_KeySwitchServer) nextUpload {
	return func() (*fedpcav1.OwnerUpload, *fedpcav1.UploadPart, string, error) {
		msg, err := stream.Recv()
		if err != nil {
			return nil, nil, "", err
		}
		return msg.GetUpload(), msg.GetPart(), describe(msg), nil
	}
}

// describe names a key-switch message's kind, for errors.
func describe(m *fedpcav1.KeySwitchRequest) string {
	switch {
	case m.GetHeader() != nil:
		return "a header"
	case m.GetCiphertext() != nil:
		return "a ciphertext"
	case m.GetUpload() != nil:
		return fmt.Sprintf("owner %q's upload", m.GetUpload().GetOwner())
	case m.GetPart() != nil:
		return "an upload part"
	}
	return "an empty message"
}

// committeeKeys returns the key upload proofs are verified with and the
// committee public key it is made from (sums are re-randomised under it).
func (c *CSP) committeeKeys(st *secretFile) (*zk.Key, *rlwe.PublicKey, error) {
	c.keyMu.Lock()
	defer c.keyMu.Unlock()
	if c.zkKey == nil || c.zkFP != st.Fingerprint {
		pk, err := c.params.Codecs().PublicKey.Unmarshal(st.CommitteeKey)
		if err != nil {
			return nil, nil, fmt.Errorf("committee key: %w", err)
		}
		if c.zkKey, err = c.params.ProofKey(pk); err != nil {
			return nil, nil, err
		}
		c.zkPK, c.zkFP = pk, st.Fingerprint
	}
	return c.zkKey, c.zkPK, nil
}

// verifier checks upload parts on a pool of workers and adds up their c1,
// and their c0 when the parts carry it, per ciphertext index. Not safe for
// concurrent use (one receiving goroutine feeds it).
type verifier struct {
	params  he.Params
	key     *zk.Key
	job     string
	n       int
	work    chan verifyItem
	wg      sync.WaitGroup
	mu      sync.Mutex
	err     error
	partial [][][2]ring.Poly // per worker, per ciphertext index: c0 and c1
	done    chan struct{}
}

// verifyItem is one proof group of an owner's upload.
type verifyItem struct {
	owner string
	first int
	parts []job.Part
}

func newVerifier(p he.Params, key *zk.Key, jobID string, n, workers int) *verifier {
	v := &verifier{params: p, key: key, job: jobID, n: n, work: make(chan verifyItem, workers), partial: make([][][2]ring.Poly, workers), done: make(chan struct{})}
	rq := p.RingQ().AtLevel(p.Level())
	for w := range workers {
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			c0, c1s := rq.NewPoly(), make([]ring.Poly, zk.MaxGroup)
			for j := range c1s {
				c1s[j] = rq.NewPoly()
			}
			for it := range v.work {
				if v.failed() {
					continue
				}
				if err := job.VerifyParts(p, key, jobID, it.owner, it.first, n, it.parts, c1s[:len(it.parts)]); err != nil {
					v.fail(invalid("owner %s's upload: %v (a crafted or foreign ciphertext): no share made", it.owner, err))
					continue
				}
				if v.partial[w] == nil {
					v.partial[w] = make([][2]ring.Poly, n)
					for i := range v.partial[w] {
						v.partial[w][i] = [2]ring.Poly{rq.NewPoly(), rq.NewPoly()}
					}
				}
				for j, part := range it.parts {
					sum := &v.partial[w][it.first+j]
					rq.Add(sum[1], c1s[j], sum[1])
					if part.C0 != nil {
						if err := p.DecodePoly(part.C0, c0); err != nil {
							v.fail(invalid("owner %s's upload: ciphertext %d: c0: %v", it.owner, it.first+j, err))
							break
						}
						rq.Add(sum[0], c0, sum[0])
					}
				}
			}
		}()
	}
	return v
}

func (v *verifier) failed() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err != nil
}

func (v *verifier) fail(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err == nil {
		v.err = err
	}
}

// add queues a proof group's parts for verification; it returns the first
// failure seen.
func (v *verifier) add(owner string, first int, parts []job.Part) error {
	v.mu.Lock()
	err := v.err
	v.mu.Unlock()
	if err != nil {
		return err
	}
	v.work <- verifyItem{owner: owner, first: first, parts: parts}
	return nil
}

// wait ends the verification and returns the sums of the verified c0
// (zero unless the parts carried it) and c1.
func (v *verifier) wait() ([][2]ring.Poly, error) {
	v.stop()
	if v.err != nil {
		return nil, v.err
	}
	rq := v.params.RingQ().AtLevel(v.params.Level())
	sums := make([][2]ring.Poly, v.n)
	for i := range sums {
		sums[i] = [2]ring.Poly{rq.NewPoly(), rq.NewPoly()}
		for _, pw := range v.partial {
			if pw != nil {
				rq.Add(sums[i][0], pw[i][0], sums[i][0])
				rq.Add(sums[i][1], pw[i][1], sums[i][1])
			}
		}
	}
	return sums, nil
}

// stop closes the queue and waits for the workers (once).
func (v *verifier) stop() {
	select {
	case <-v.done:
		return
	default:
		close(v.done)
		close(v.work)
		v.wg.Wait()
	}
}

// prepareSwitch makes, in the background and one at a time, n encryptions
// of zero under the user key of the switch just made, for the shares of
// that user's next job (he.Member.PrepareSwitch): the time of a public-key
// encryption per ciphertext taken off the next key switch.
func (c *CSP) prepareSwitch(member *he.Member, n int) {
	c.preparing.Add(1)
	go func() {
		defer c.preparing.Done()
		for {
			c.memberMu.Lock()
			made := member.PrepareSwitch(n)
			c.memberMu.Unlock()
			if !made {
				return
			}
		}
	}()
}

// computeShares draws the member's noise share (sized from the plan and the
// number of owners in the sum) and computes its key-switch shares of the
// re-randomised sum (job.SwitchShares).
func (c *CSP) computeShares(chk *checked, st *secretFile, member *he.Member, cts []*rlwe.Ciphertext) ([][]byte, error) {
	_, cpk, err := c.committeeKeys(st)
	if err != nil {
		return nil, err
	}
	noise, err := job.RoundNoise(chk.spec, chk.sch, dp.RoleCSP, chk.round.Round, len(chk.owners), nil)
	if err != nil {
		return nil, fmt.Errorf("noise share: %w", err)
	}
	// The member's key material is used by one switch at a time.
	c.memberMu.Lock()
	ks, err := job.SwitchShares(c.params, member, cpk, chk.id, cts, chk.userPK, chk.active, noise)
	c.memberMu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("key switch: %w", err)
	}
	out := make([][]byte, len(ks))
	for i, s := range ks {
		out[i] = c.params.Codecs().KeySwitchShare.Marshal(s)
	}
	return out, nil
}

var recordKey = []byte("record")

// bucketRounds indexes the rounds of power-method jobs this member
// switched: <parent>/<round> -> the round's job ID. The switch log keyed by
// job ID switches each round once; the index switches each round number of
// a parent once, so that a user cannot have a round released twice under
// two public matrices (each owner refuses that too: job.RoundSpec.CheckMatrix).
var bucketRounds = []byte("power-rounds")

func roundKey(rs job.RoundSpec) []byte { return []byte(fmt.Sprintf("%s/%d", rs.Parent, rs.Round)) }

// roundFree refuses a round of a parent whose round of that number this
// member switched under another ID.
func roundFree(tx *bolt.Tx, rs job.RoundSpec) error {
	b := tx.Bucket(bucketRounds)
	if b == nil {
		return nil
	}
	if prev := b.Get(roundKey(rs)); prev != nil {
		return fmt.Errorf("%w: round %d of job %s… was switched already, as job %.12s… (another public matrix): a member switches each round of a job once", ErrSwitched, rs.Round, rs.Parent[:12], prev)
	}
	return nil
}

func shareKey(i int) []byte { return []byte(fmt.Sprintf("share/%06d", i)) }

// storedShares returns the shares and record of a switched job, or nils.
func (c *CSP) storedShares(jobID string) ([][]byte, *switchRecord, error) {
	var shares [][]byte
	var rec *switchRecord
	err := c.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSwitches).Bucket([]byte(jobID))
		if b == nil {
			return nil
		}
		var err error
		if rec, err = decodeSwitchRecord(jobID, b.Get(recordKey)); err != nil {
			return err
		}
		count := rec.Ciphertexts
		if rec.Release == job.ReleaseComponents {
			count = 1
		}
		for i := range count {
			v := b.Get(shareKey(i))
			if v == nil {
				return fmt.Errorf("share %d missing", i)
			}
			shares = append(shares, slices.Clone(v))
		}
		return nil
	})
	return shares, rec, err
}

// decodeSwitchRecord decodes the stored audit record of a job's switch and
// checks it: the record of that job, a request digest, at least one
// ciphertext.
func decodeSwitchRecord(jobID string, v []byte) (*switchRecord, error) {
	var r switchRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, fmt.Errorf("switch record of job %q: %w", jobID, err)
	}
	if r.JobID != jobID || !job.ValidJobID(jobID) {
		return nil, fmt.Errorf("switch record of job %q names job %q", jobID, r.JobID)
	}
	if d, err := hex.DecodeString(r.Digest); err != nil || len(d) != sha256.Size || r.Ciphertexts < 1 {
		return nil, fmt.Errorf("switch record of job %s…: bad digest or %d ciphertexts", jobID[:12], r.Ciphertexts)
	}
	return &r, nil
}

// storeShares writes the audit record and the shares in one transaction,
// before any share is sent.
func (c *CSP) storeShares(rec *switchRecord, shares [][]byte) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	err = c.db.Update(func(tx *bolt.Tx) error {
		if rec.Round > 0 {
			rs := job.RoundSpec{Parent: rec.Parent, Round: rec.Round}
			if err := roundFree(tx, rs); err != nil {
				return err
			}
			b, err := tx.CreateBucketIfNotExists(bucketRounds)
			if err != nil {
				return err
			}
			if err := b.Put(roundKey(rs), []byte(rec.JobID)); err != nil {
				return err
			}
		}
		jb, err := tx.Bucket(bucketSwitches).CreateBucket([]byte(rec.JobID))
		if err != nil {
			return err
		}
		if err := jb.Put(recordKey, b); err != nil {
			return err
		}
		for i, s := range shares {
			if err := jb.Put(shareKey(i), s); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		c.mu.Lock()
		c.switches++
		c.mu.Unlock()
	}
	return err
}

// Audit returns the audit records of every switch, oldest first.
func (c *CSP) Audit() ([]SwitchRecord, error) { return audit(c.db) }

// ReadAudit returns the audit records of every switch a stopped member made,
// oldest first, read from its state directory (read-only; a member that
// runs holds its store: transport.ErrStoreLocked). A directory without a
// store has no records.
func ReadAudit(store string) ([]SwitchRecord, error) {
	db, err := transport.ReadStore(store, dbFileName)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("csp: %w", err)
	}
	defer db.Close()
	return audit(db)
}

func audit(db *bolt.DB) ([]SwitchRecord, error) {
	var out []switchRecord
	err := db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketSwitches)
		if b == nil {
			return nil
		}
		return b.ForEachBucket(func(k []byte) error {
			r, err := decodeSwitchRecord(string(k), b.Bucket(k).Get(recordKey))
			if err != nil {
				return err
			}
			out = append(out, *r)
			return nil
		})
	})
	slices.SortFunc(out, func(a, b switchRecord) int { return a.At.Compare(b.At) })
	return out, err
}
