package csp

import (
	"crypto/ecdh"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
)

// Solve runs a components job's computation (docs/PROTOCOL.md section 7.2).
func (c *CSP) Solve(stream fedpcav1.CspService_SolveServer) error {
	return c.status(c.solve(stream))
}

// party returns this member's rank among the active points.
func party(active []he.Point, me he.Point) int {
	s := slices.Clone(active)
	slices.Sort(s)
	return slices.Index(s, me)
}

func (c *CSP) solve(stream fedpcav1.CspService_SolveServer) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	hd := first.GetHeader()
	if hd == nil || hd.GetJob() == nil {
		return invalid("the first message must be the solve header")
	}
	c.mu.Lock()
	st, member := c.state, c.member
	c.mu.Unlock()
	if st == nil {
		return ErrNoKey
	}
	chk, err := c.checkHeader(hd.GetJob(), st)
	me := 0
	if err == nil {
		me, err = checkSolve(chk, hd, st.Secret.Point)
	}
	if err != nil {
		c.m.switches.WithLabelValues("refused").Inc()
		return err
	}
	id := chk.spec.ID()
	defer c.switching.lock(id)()

	h := headerDigest(hd.GetJob())
	cts, err := c.readSum(chk.n, h, func() ([]byte, error) {
		msg, err := stream.Recv()
		return msg.GetCiphertext(), err
	})
	if err != nil {
		return err
	}
	if err := c.verifyUploads(solveUploads(stream), chk, st, cts); err != nil {
		c.m.switches.WithLabelValues("refused").Inc()
		c.log.Warn("solve refused: the sum is not the named owners' proven uploads", "job", id[:16], "error", err)
		return err
	}
	digest := hex.EncodeToString(h.Sum(nil))
	stored, rec, err := c.storedShares(id)
	if err != nil {
		return fmt.Errorf("read solve record: %w", err)
	}
	if rec != nil {
		if rec.Digest != digest || rec.Release != job.ReleaseComponents {
			c.m.switches.WithLabelValues("refused").Inc()
			return fmt.Errorf("%w: job %s… was already solved on %s with another request (active %v, %d owners)", ErrSwitched, id[:12], rec.At.Format(time.RFC3339), rec.Active, rec.Owners)
		}
		// The same request again (the proxy lost the answer): the stored
		// output, not a second computation with fresh noise.
		c.m.switches.WithLabelValues("replayed").Inc()
		return stream.Send(&fedpcav1.SolveResponse{Msg: &fedpcav1.SolveResponse_Output{Output: stored[0]}})
	}
	start := time.Now()
	box, err := c.runSolve(stream, chk, st, member, hd, me, cts)
	if err != nil {
		c.m.switches.WithLabelValues("refused").Inc()
		return err
	}
	rec = &switchRecord{
		JobID: id, User: chk.spec.User, Dataset: chk.spec.Dataset, Analysis: chk.spec.Analysis,
		Digest: digest, Owners: len(chk.owners), Ciphertexts: chk.n, NoNoise: chk.spec.NoNoise, At: time.Now().UTC(),
		Release: job.ReleaseComponents,
	}
	for _, a := range chk.active {
		rec.Active = append(rec.Active, uint32(a))
	}
	if err := c.storeShares(rec, [][]byte{box}); err != nil {
		return fmt.Errorf("store solve record: %w", err)
	}
	c.m.seconds.Observe(time.Since(start).Seconds())
	c.m.switches.WithLabelValues("solved").Inc()
	c.log.Info("solve", "job", id[:16], "user", rec.User, "dataset", rec.Dataset, "active", fmt.Sprint(rec.Active), "owners", rec.Owners, "no_noise", rec.NoNoise, "seconds", time.Since(start).Seconds())
	return stream.Send(&fedpcav1.SolveResponse{Msg: &fedpcav1.SolveResponse_Output{Output: box}})
}

// checkSolve checks what a solve header adds to a key-switch header: a
// components job, this member's party index, its seed. It returns the
// party index.
func checkSolve(chk *checked, hd *fedpcav1.SolveHeader, point he.Point) (int, error) {
	if !chk.spec.Components() {
		return 0, invalid("job %s… releases its statistics: it is key-switched, not solved", chk.spec.ID()[:12])
	}
	me := party(chk.active, point)
	if int(hd.GetParty()) != me {
		return 0, invalid("party %d: this member (point %d) is party %d of the active set %v", hd.GetParty(), point, me, chk.active)
	}
	want := len(mpc.Seed{})
	if me == 0 {
		want = 0
	}
	if len(hd.GetSeed()) != want {
		return 0, invalid("seed of %d bytes for party %d: party 0 gets corrections, the others a %d-byte seed", len(hd.GetSeed()), me, len(mpc.Seed{}))
	}
	return me, nil
}

// solveUploads reads a solve request's uploads.
func solveUploads(stream fedpcav1.CspService_SolveServer) nextUpload {
	return func() (*fedpcav1.OwnerUpload, *fedpcav1.UploadPart, string, error) {
		msg, err := stream.Recv()
		if err != nil {
			return nil, nil, "", err
		}
		what := fmt.Sprintf("a %T", msg.GetMsg())
		return msg.GetUpload(), msg.GetPart(), what, nil
	}
}

// runSolve runs the computation of a verified request: the job's exchange
// keys, the conversion to shares, the rounds; it returns the member's
// output share sealed to the user's result key.
func (c *CSP) runSolve(stream fedpcav1.CspService_SolveServer, chk *checked, st *secretFile, member *he.Member, hd *fedpcav1.SolveHeader, me int, cts []*rlwe.Ciphertext) ([]byte, error) {
	id := chk.spec.ID()
	active := slices.Clone(chk.active)
	slices.Sort(active)
	point := uint32(st.Secret.Point)

	// This job's key for the openings, signed, and the others' keys.
	priv, err := seal.NewExchangeKey()
	if err != nil {
		return nil, err
	}
	pub := priv.PublicKey().Bytes()
	sig, err := seal.Sign(c.cfg.Creds.Signer(), job.SolveKeyContext, job.SolveKeyMessage(id, point, pub))
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&fedpcav1.SolveResponse{Msg: &fedpcav1.SolveResponse_Key{Key: &fedpcav1.SolveKey{Point: point, Key: pub, Signature: sig, Certificate: c.cfg.Creds.Leaf.Raw}}}); err != nil {
		return nil, err
	}
	msg, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	channels, err := c.solveChannels(msg.GetKeys(), st, id, priv, active, me)
	if err != nil {
		return nil, err
	}

	// Encryption to shares of the verified sum (its blinding and the
	// proxy's noise included; the dealer removes the masks in shares).
	slots := make([]he.SlotShare, len(cts))
	c.memberMu.Lock()
	for i, ct := range cts {
		var conv *he.ConversionShare
		if slots[i], conv, err = member.EncToShare(ct, chk.active); err != nil {
			c.memberMu.Unlock()
			return nil, fmt.Errorf("conversion of ciphertext %d: %w", i, err)
		}
		if err := stream.Send(&fedpcav1.SolveResponse{Msg: &fedpcav1.SolveResponse_Conversion{Conversion: c.params.Codecs().ConversionShare.Marshal(conv)}}); err != nil {
			c.memberMu.Unlock()
			return nil, err
		}
	}
	c.memberMu.Unlock()
	if me == 0 {
		for i, ct := range cts {
			msg, err := stream.Recv()
			if err != nil {
				return nil, err
			}
			agg, err := c.params.Codecs().ConversionShare.Unmarshal(msg.GetConversion())
			if err != nil {
				return nil, invalid("conversion aggregate %d: %v", i, err)
			}
			c.memberMu.Lock()
			slots[i], err = member.GetShare(ct, chk.active, agg, slots[i])
			c.memberMu.Unlock()
			if err != nil {
				return nil, fmt.Errorf("conversion of ciphertext %d: %w", i, err)
			}
		}
	}
	l, err := chk.spec.Layout(chk.sch)
	if err != nil {
		return nil, err
	}
	// The member's noise share, as it would fold it into a key switch.
	noise, err := job.ServerNoise(chk.spec, chk.sch, dp.RoleCSP, len(chk.owners), nil)
	if err != nil {
		return nil, fmt.Errorf("noise share: %w", err)
	}
	t := c.params.T()
	mine := make([]uint64, 0, l.Len())
	for _, s := range slots {
		mine = append(mine, s...)
	}
	mine = mine[:l.Len()]
	for i, v := range noise {
		mine[i] = (mine[i] + uint64((int64(t)+v%int64(t))%int64(t))) % t
	}
	x := mpc.ModT{T: t, S: make([][]uint64, len(active))}
	x.S[me] = mine

	// The rounds.
	in := newSolveInbox(stream) // its reader ends with the stream
	var seed mpc.Seed
	copy(seed[:], hd.GetSeed())
	src, err := mpc.NewPartySource(len(active), me, seed, in.correction)
	if err != nil {
		return nil, err
	}
	net := &solveNet{id: id, me: me, channels: channels, send: stream.Send, in: in}
	e, err := mpc.NewPartyEngine(len(active), me, mpc.DefaultParams, src, net)
	if err != nil {
		return nil, err
	}
	pj, err := chk.spec.Program(chk.sch, len(chk.owners))
	if err != nil {
		return nil, invalid("%v", err)
	}
	out, err := pj.Run(e, x)
	if err == nil {
		err = e.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("components of job %s… (round %d): %w", id[:12], e.Cost.Rounds, err)
	}
	// Public: the program's rounds and sizes depend on d and k only.
	c.log.Debug("solve rounds", "job", id[:16], "rounds", e.Cost.Rounds, "opened_bytes_sent", e.Cost.BytesPerParty)
	key, err := hex.DecodeString(chk.spec.ResultKey)
	if err != nil {
		return nil, invalid("result_key: %v", err)
	}
	return seal.Seal(key, job.OutputAAD(id, point), job.EncodeShare(out.S[me].V))
}

// solveChannels checks every other active member's signed key for the job
// (its certificate is the member's at that point of the committee, of the
// key this member verified in the ceremony and attested) and derives a
// channel to each, by party.
func (c *CSP) solveChannels(keys *fedpcav1.SolveKeys, st *secretFile, id string, priv *ecdh.PrivateKey, active []he.Point, me int) ([]*seal.Channel, error) {
	if keys == nil {
		return nil, invalid("expected the active members' solve keys")
	}
	byPoint := map[uint32]*fedpcav1.SolveKey{}
	for _, k := range keys.GetKeys() {
		byPoint[k.GetPoint()] = k
	}
	channels := make([]*seal.Channel, len(active))
	for p, pt := range active {
		if p == me {
			continue
		}
		k := byPoint[uint32(pt)]
		if k == nil {
			return nil, invalid("no solve key for member %d", pt)
		}
		name := memberName(st, uint32(pt))
		if _, err := transport.VerifyMemberSignature(c.cfg.Creds, name, st.MemberKeys[pt-1], k.GetCertificate(), job.SolveKeyContext, job.SolveKeyMessage(id, uint32(pt), k.GetKey()), k.GetSignature()); err != nil {
			return nil, invalid("the solve key of member %d is not signed by csp/%s: %v", pt, name, err)
		}
		ch, err := seal.NewChannel(priv, k.GetKey(), "solve "+id)
		if err != nil {
			return nil, invalid("member %d's solve key: %v", pt, err)
		}
		channels[p] = ch
	}
	return channels, nil
}

// memberName is the committee member's ID at point pt.
func memberName(st *secretFile, pt uint32) string {
	for _, m := range st.Members {
		if m.GetPoint() == pt {
			return m.GetId()
		}
	}
	return ""
}

// solveInbox reads the proxy's messages after the conversion: party 0's
// correction frames and every party's round frames, each in its own
// unbounded queue, so that its reader never blocks: the proxy relays one
// member's frames to the others while they send theirs.
type solveInbox struct {
	corrections queue[*fedpcav1.Correction]
	rounds      queue[*fedpcav1.SolveRound]
	done        chan struct{}
	err         error // set before done closes
}

func newSolveInbox(stream fedpcav1.CspService_SolveServer) *solveInbox {
	in := &solveInbox{corrections: newQueue[*fedpcav1.Correction](), rounds: newQueue[*fedpcav1.SolveRound](), done: make(chan struct{})}
	go func() {
		defer close(in.done)
		for {
			msg, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = errors.New("the proxy ended the computation")
				}
				in.err = err
				return
			}
			switch {
			case msg.GetCorrection() != nil:
				in.corrections.push(msg.GetCorrection())
			case msg.GetRound() != nil:
				in.rounds.push(msg.GetRound())
			default:
				in.err = invalid("unexpected %T during the rounds", msg.GetMsg())
				return
			}
		}
	}()
	return in
}

// queue is an unbounded FIFO with one consumer.
type queue[T any] struct {
	mu    sync.Mutex
	items []T
	wake  chan struct{}
}

func newQueue[T any]() queue[T] { return queue[T]{wake: make(chan struct{}, 1)} }

func (q *queue[T]) push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// pop returns the next item, waiting for one; false once done is closed
// and the queue is empty.
func (q *queue[T]) pop(done <-chan struct{}) (T, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			v := q.items[0]
			var zero T
			q.items[0] = zero
			q.items = q.items[1:]
			q.mu.Unlock()
			return v, true
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-done:
			q.mu.Lock()
			empty := len(q.items) == 0
			q.mu.Unlock()
			if empty {
				var zero T
				return zero, false
			}
		}
	}
}

// correction is party 0's dealer source: one matrix, from its frames.
func (in *solveInbox) correction() (mpc.Mat, error) {
	var m mpc.Mat
	at := 0
	for first := true; ; first = false {
		c, ok := in.corrections.pop(in.done)
		if !ok {
			return mpc.Mat{}, in.err
		}
		r, k := int(c.GetRows()), int(c.GetCols())
		if first {
			if r*k > 1<<26 {
				return mpc.Mat{}, invalid("correction of %dx%d", r, k)
			}
			m = mpc.NewMat(r, k)
		} else if r != m.R || k != m.C {
			return mpc.Mat{}, invalid("a frame of a %dx%d correction in one of %dx%d", r, k, m.R, m.C)
		}
		w := c.GetWords()
		n := len(w) / 16
		if len(w)%16 != 0 || n > job.FrameWords || at+n > len(m.V) {
			return mpc.Mat{}, invalid("a frame of %d bytes at word %d of a %dx%d correction", len(w), at, r, k)
		}
		for i := range n {
			m.V[at+i] = mpc.WordFromBytes(w[16*i:])
		}
		at += n
		if !c.GetMore() {
			if at != len(m.V) {
				return mpc.Mat{}, invalid("a %dx%d correction ended after %d words", r, k, at)
			}
			return m, nil
		}
	}
}

// solveNet is a member's Net: its share of each round's masked values
// sealed to each other party over the proxy, in frames, theirs opened and
// added. Each channel numbers its frames (the nonces) in each direction.
type solveNet struct {
	id         string
	me         int
	channels   []*seal.Channel
	send       func(*fedpcav1.SolveResponse) error
	in         *solveInbox
	round      uint64
	sent, recv []uint64 // frames sealed to and opened from each party
}

func (n *solveNet) Exchange(mine []mpc.Word) ([]mpc.Word, error) {
	n.round++
	if n.sent == nil {
		n.sent, n.recv = make([]uint64, len(n.channels)), make([]uint64, len(n.channels))
	}
	plain := job.EncodeShare(mine)
	frames := job.Frames(len(mine))
	for f, fr := range frames {
		out := &fedpcav1.SolveRound{Round: n.round}
		for p, ch := range n.channels {
			if p == n.me {
				continue
			}
			out.Openings = append(out.Openings, &fedpcav1.SealedOpening{FromParty: uint32(n.me), ToParty: uint32(p), More: f < len(frames)-1,
				Sealed: ch.Seal(n.sent[p], plain[16*fr[0]:16*fr[1]], job.OpeningAAD(n.id, n.round, f, uint32(n.me), uint32(p)))})
			n.sent[p]++
		}
		if err := n.send(&fedpcav1.SolveResponse{Msg: &fedpcav1.SolveResponse_Round{Round: out}}); err != nil {
			return nil, err
		}
	}
	sum := slices.Clone(mine)
	got := make([]int, len(n.channels)) // frames opened from each party this round
	for waiting := len(n.channels) - 1; waiting > 0; {
		r, ok := n.in.rounds.pop(n.in.done)
		if !ok {
			return nil, n.in.err
		}
		if r.GetRound() != n.round {
			return nil, invalid("round %d relayed where round %d was due", r.GetRound(), n.round)
		}
		for _, o := range r.GetOpenings() {
			from := o.GetFromParty()
			if o.GetToParty() != uint32(n.me) || int(from) >= len(n.channels) || int(from) == n.me || got[from] == len(frames) {
				return nil, invalid("round %d: an opening from party %d to party %d", n.round, from, o.GetToParty())
			}
			f := got[from]
			b, err := n.channels[from].Open(n.recv[from], o.GetSealed(), job.OpeningAAD(n.id, n.round, f, from, uint32(n.me)))
			if err != nil {
				return nil, invalid("round %d: party %d's opening (frame %d): %v", n.round, from, f, err)
			}
			n.recv[from]++
			lo, hi := frames[f][0], frames[f][1]
			if len(b) != 16*(hi-lo) {
				return nil, invalid("round %d: party %d opened %d bytes in frame %d, want %d", n.round, from, len(b), f, 16*(hi-lo))
			}
			for i := lo; i < hi; i++ {
				sum[i] = sum[i].Add(mpc.WordFromBytes(b[16*(i-lo):]))
			}
			got[from]++
			if o.GetMore() != (got[from] < len(frames)) {
				return nil, invalid("round %d: party %d's frame %d says more %v of %d frames", n.round, from, f, o.GetMore(), len(frames))
			}
			if got[from] == len(frames) {
				waiting--
			}
		}
	}
	return sum, nil
}
