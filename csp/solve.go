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
	chk, err := c.checkHeader(hd.GetJob(), st, hd.GetParties()...)
	var parties []he.Point
	if err == nil {
		parties, err = checkSolve(chk, hd, st.Secret.Point)
	}
	if err != nil {
		c.m.switches.WithLabelValues("refused").Inc()
		return err
	}
	id := chk.spec.ID()
	defer c.switching.lock(id)()

	// A computing member that is not active converts nothing: its key
	// multiplies nothing, so it is sent neither the sum nor the uploads.
	h := headerDigest(hd.GetJob())
	var cts []*rlwe.Ciphertext
	if slices.Contains(chk.active, st.Secret.Point) {
		if cts, err = c.readSum(chk.n, h, func() ([]byte, error) {
			msg, err := stream.Recv()
			return msg.GetCiphertext(), err
		}); err != nil {
			return err
		}
		if err := c.verifyUploads(solveUploads(stream), chk, st, cts); err != nil {
			c.m.switches.WithLabelValues("refused").Inc()
			c.log.Warn("solve refused: the sum is not the named owners' proven uploads", "job", id[:16], "error", err)
			return err
		}
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
	box, err := c.runSolve(stream, chk, st, member, hd, parties, cts)
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
// components job, the computing parties (with a dealer the active
// members; with the members' own randomness the three named, which hold
// the active ones), this member's party index and its seed. It returns
// the parties, in point order (a member's index among them is its party).
func checkSolve(chk *checked, hd *fedpcav1.SolveHeader, point he.Point) ([]he.Point, error) {
	s := chk.spec
	if !s.Components() {
		return nil, invalid("job %s… releases its statistics: it is key-switched, not solved", s.ID()[:12])
	}
	parties := slices.Clone(chk.active)
	slices.Sort(parties)
	if !s.Dealt() {
		parties = parties[:0]
		for _, p := range hd.GetParties() {
			parties = append(parties, he.Point(p))
		}
		if len(parties) != job.ReplicatedParties || !slices.IsSorted(parties) || len(slices.Compact(slices.Clone(parties))) != len(parties) {
			return nil, invalid("parties %v: a job whose members make their own randomness is computed by %d distinct members, in point order", hd.GetParties(), job.ReplicatedParties)
		}
		for _, p := range parties {
			if p < 1 || int(p) > s.CommitteeN {
				return nil, invalid("parties %v: member %d is not in the committee of %d", hd.GetParties(), p, s.CommitteeN)
			}
		}
		for _, a := range chk.active {
			if !slices.Contains(parties, a) {
				return nil, invalid("parties %v do not include the active member %d, which converts the sum", hd.GetParties(), a)
			}
		}
	} else if len(hd.GetParties()) != 0 {
		return nil, invalid("parties %v for a job whose randomness the proxy deals: its active members compute", hd.GetParties())
	}
	me := slices.Index(parties, point)
	if me < 0 || int(hd.GetParty()) != me {
		return nil, invalid("party %d: this member (point %d) is party %d of %v", hd.GetParty(), point, me, parties)
	}
	want := len(mpc.Seed{})
	if me == 0 || !s.Dealt() {
		want = 0
	}
	if len(hd.GetSeed()) != want {
		return nil, invalid("seed of %d bytes for party %d: with a dealer party 0 gets corrections and the others a %d-byte seed; with the members' own randomness nobody gets one", len(hd.GetSeed()), me, len(mpc.Seed{}))
	}
	return parties, nil
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
// keys, the conversion to shares (by the active members), the rounds
// among the parties; it returns the member's output share sealed to the
// user's result key.
func (c *CSP) runSolve(stream fedpcav1.CspService_SolveServer, chk *checked, st *secretFile, member *he.Member, hd *fedpcav1.SolveHeader, parties []he.Point, cts []*rlwe.Ciphertext) ([]byte, error) {
	id := chk.spec.ID()
	point := st.Secret.Point
	me := slices.Index(parties, point)

	// This job's key for the openings, signed, and the others' keys.
	priv, err := seal.NewExchangeKey()
	if err != nil {
		return nil, err
	}
	pub := priv.PublicKey().Bytes()
	sig, err := seal.Sign(c.cfg.Creds.Signer(), job.SolveKeyContext, job.SolveKeyMessage(id, uint32(point), pub))
	if err != nil {
		return nil, err
	}
	if err := stream.Send(&fedpcav1.SolveResponse{Msg: &fedpcav1.SolveResponse_Key{Key: &fedpcav1.SolveKey{Point: uint32(point), Key: pub, Signature: sig, Certificate: c.cfg.Creds.Leaf.Raw}}}); err != nil {
		return nil, err
	}
	msg, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	channels, err := c.solveChannels(msg.GetKeys(), st, id, priv, parties, me)
	if err != nil {
		return nil, err
	}

	// Encryption to shares of the verified sum (with the proxy's noise) by
	// the active members, each adding its DP noise share (the one it would
	// fold into a key switch) to its own share; a party that is not
	// active (the members' own randomness with a threshold below three)
	// holds zeros.
	x := mpc.ModT{T: c.params.T(), S: make([][]uint64, len(parties))}
	l, err := chk.spec.Layout(chk.sch)
	if err != nil {
		return nil, err
	}
	if slices.Contains(chk.active, point) {
		if x.S[me], err = c.convert(stream, chk, st, member, cts, l.Len()); err != nil {
			return nil, err
		}
	} else {
		x.S[me] = make([]uint64, l.Len())
	}

	// The rounds.
	in := newSolveInbox(stream, chk.spec.Dealt()) // its reader ends with the stream
	net := &solveNet{id: id, me: me, channels: channels, send: stream.Send, in: in}
	var e *mpc.Engine
	if chk.spec.Dealt() {
		var seed mpc.Seed
		copy(seed[:], hd.GetSeed())
		src, err := mpc.NewPartySource(len(parties), me, seed, in.correction)
		if err != nil {
			return nil, err
		}
		e, err = mpc.NewPartyEngine(len(parties), me, mpc.DefaultParams, src, sumNet{net})
		if err != nil {
			return nil, err
		}
	} else {
		keys, err := replicatedKeys(channels, me)
		if err != nil {
			return nil, err
		}
		if e, err = mpc.NewReplicatedPartyEngine(me, mpc.DefaultParams, keys, net); err != nil {
			return nil, err
		}
	}
	pj, err := chk.spec.Program(chk.sch, len(chk.owners))
	if err != nil {
		return nil, invalid("%v", err)
	}
	out, err := pj.Run(e, x)
	if err == nil {
		err = e.Err()
	}
	var words []mpc.Word
	if err == nil {
		words, err = e.OutputShare(out)
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
	return seal.Seal(key, job.OutputAAD(id, uint32(point)), job.EncodeShare(words))
}

// convert runs an active member's encryption to shares of the verified sum,
// re-randomised under the committee key as a key switch's is
// (job.Rerandomise; the receiver, the lowest active point, completes its
// share with the public shares' aggregate the proxy sends it), and adds the
// member's DP noise share: its share mod T of the layout's n values.
func (c *CSP) convert(stream fedpcav1.CspService_SolveServer, chk *checked, st *secretFile, member *he.Member, cts []*rlwe.Ciphertext, n int) ([]uint64, error) {
	slots := make([]he.SlotShare, len(cts))
	_, cpk, err := c.committeeKeys(st)
	if err != nil {
		return nil, err
	}
	if cts, err = job.Rerandomise(c.params, cpk, chk.id, cts); err != nil {
		return nil, err
	}
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
	if member.Point() == he.ConversionReceiver(chk.active) {
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
	noise, err := job.ServerNoise(chk.spec, chk.sch, dp.RoleCSP, len(chk.owners), nil)
	if err != nil {
		return nil, fmt.Errorf("noise share: %w", err)
	}
	t := c.params.T()
	mine := make([]uint64, 0, n)
	for _, s := range slots {
		mine = append(mine, s...)
	}
	mine = mine[:n]
	for i, v := range noise {
		mine[i] = (mine[i] + uint64((int64(t)+v%int64(t))%int64(t))) % t
	}
	return mine, nil
}

// replicatedKeys derives party me's two keys of the replicated computation
// from its channels: K_j, which parties j - 1 and j share, from their
// channel under the label "prss j" (mpc.ReplicatedKeys).
func replicatedKeys(channels []*seal.Channel, me int) (mpc.ReplicatedKeys, error) {
	var keys mpc.ReplicatedKeys
	prev, next := (me+2)%3, (me+1)%3
	var err error
	if keys.Prev, err = channels[prev].Key(fmt.Sprintf("prss %d", me)); err != nil {
		return keys, err
	}
	keys.Next, err = channels[next].Key(fmt.Sprintf("prss %d", next))
	return keys, err
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

func newSolveInbox(stream fedpcav1.CspService_SolveServer, dealt bool) *solveInbox {
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
			case msg.GetCorrection() != nil && dealt:
				in.corrections.push(msg.GetCorrection())
			case msg.GetCorrection() != nil:
				in.err = invalid("a correction for a job whose randomness is the members' own: nobody deals it")
				return
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

// solveNet carries a member's messages of each round, sealed to each other
// party on its channel and relayed by the proxy, in frames of at most
// job.FrameWords words (an empty message is one empty frame). Each channel
// numbers its frames (the nonces) in each direction, and every frame is
// bound to the job, the round, its index and both parties. It is the
// replicated computation's PeerNet; sumNet makes it the dealer's Net.
type solveNet struct {
	id         string
	me         int
	channels   []*seal.Channel
	send       func(*fedpcav1.SolveResponse) error
	in         *solveInbox
	round      uint64
	sent, recv []uint64 // frames sealed to and opened from each party
}

// Exchange sends out[p] to every other party p and returns what each sent
// this member in the same round.
func (n *solveNet) Exchange(out [][]mpc.Word) ([][]mpc.Word, error) {
	n.round++
	parties := len(n.channels)
	if n.sent == nil {
		n.sent, n.recv = make([]uint64, parties), make([]uint64, parties)
	}
	frames := make([][][2]int, parties)
	most := 0
	for p := range parties {
		if p != n.me {
			frames[p] = job.Frames(len(out[p]))
			most = max(most, len(frames[p]))
		}
	}
	for f := range most {
		msg := &fedpcav1.SolveRound{Round: n.round}
		for p, ch := range n.channels {
			if p == n.me || f >= len(frames[p]) {
				continue
			}
			fr := frames[p][f]
			msg.Openings = append(msg.Openings, &fedpcav1.SealedOpening{FromParty: uint32(n.me), ToParty: uint32(p), More: f < len(frames[p])-1,
				Sealed: ch.Seal(n.sent[p], job.EncodeShare(out[p][fr[0]:fr[1]]), job.OpeningAAD(n.id, n.round, f, uint32(n.me), uint32(p)))})
			n.sent[p]++
		}
		if err := n.send(&fedpcav1.SolveResponse{Msg: &fedpcav1.SolveResponse_Round{Round: msg}}); err != nil {
			return nil, err
		}
	}
	in := make([][]mpc.Word, parties)
	got := make([]int, parties) // frames opened from each party this round
	done := make([]bool, parties)
	for waiting := parties - 1; waiting > 0; {
		r, ok := n.in.rounds.pop(n.in.done)
		if !ok {
			return nil, n.in.err
		}
		if r.GetRound() != n.round {
			return nil, invalid("round %d relayed where round %d was due", r.GetRound(), n.round)
		}
		for _, o := range r.GetOpenings() {
			from := o.GetFromParty()
			if o.GetToParty() != uint32(n.me) || int(from) >= parties || int(from) == n.me || done[from] {
				return nil, invalid("round %d: an opening from party %d to party %d", n.round, from, o.GetToParty())
			}
			f := got[from]
			b, err := n.channels[from].Open(n.recv[from], o.GetSealed(), job.OpeningAAD(n.id, n.round, f, from, uint32(n.me)))
			if err != nil {
				return nil, invalid("round %d: party %d's frame %d: %v", n.round, from, f, err)
			}
			n.recv[from]++
			if len(b)%16 != 0 || len(b) > 16*job.FrameWords || (o.GetMore() && len(b) != 16*job.FrameWords) {
				return nil, invalid("round %d: party %d sent %d bytes in frame %d (more %v)", n.round, from, len(b), f, o.GetMore())
			}
			for i := 0; i < len(b); i += 16 {
				in[from] = append(in[from], mpc.WordFromBytes(b[i:]))
			}
			got[from]++
			if !o.GetMore() {
				done[from] = true
				waiting--
			}
		}
	}
	return in, nil
}

// sumNet is the dealer's Net over a solveNet: every party's share of the
// round's masked values to every other, their sum returned.
type sumNet struct{ *solveNet }

func (n sumNet) Exchange(mine []mpc.Word) ([]mpc.Word, error) {
	out := make([][]mpc.Word, len(n.channels))
	for p := range out {
		out[p] = mine
	}
	in, err := n.solveNet.Exchange(out)
	if err != nil {
		return nil, err
	}
	sum := slices.Clone(mine)
	for p, words := range in {
		if p == n.me {
			continue
		}
		if len(words) != len(mine) {
			return nil, invalid("round %d: party %d opened %d words, want %d", n.round, p, len(words), len(mine))
		}
		for i, w := range words {
			sum[i] = sum[i].Add(w)
		}
	}
	return sum, nil
}
