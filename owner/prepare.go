package owner

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/fedpca/fedpca/transport"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// committeeEnc is the committee key an owner encrypts under, with the
// encryptions of zero it prepared under it. Between jobs the owner prepares
// as many as its latest share had ciphertexts (he.Encryptor.Prepare), so
// that its next share costs encoding and an addition instead of a
// public-key encryption: about 3.5 ms of the 4 ms a ciphertext takes. They
// are kept in memory only, and each masks one ciphertext (he.Encryptor).
// The owner holds only them (524 KB each at the default parameters, with
// the 16 KB witness of each, which proves the upload) and
// borrows an encryptor (about 1.4 MB of buffers and tables) to make or use
// them (encryptors; the owners of a farm share them).
type committeeEnc struct {
	fp     string // the key's fingerprint
	encs   *encryptors
	budget *PrepareBudget

	mu      sync.Mutex // one job, or one preparation, at a time
	zeros   []he.Zero  // prepared encryptions of zero, each used once
	want    int        // ciphertexts of the latest share
	dropped bool       // replaced by another key: its prepared count is given back
}

func newCommitteeEnc(fp string, encs *encryptors, budget *PrepareBudget) *committeeEnc {
	return &committeeEnc{fp: fp, encs: encs, budget: budget}
}

// encryptors lends encryptors under one committee key, keeping as many as
// are used at once (at most 2 x GOMAXPROCS): making one takes about 1 ms
// and 1.4 MB. Safe for concurrent use.
type encryptors struct {
	p    he.Params
	pk   *rlwe.PublicKey
	free *transport.FreeList[*he.Encryptor]
	// proofs is the key the upload proofs are made with under pk.
	proofs *zk.Key
}

func newEncryptors(p he.Params, pk *rlwe.PublicKey) (*encryptors, error) {
	if pk == nil {
		return nil, errors.New("encryptor: no public key")
	}
	key, err := p.ProofKey(pk)
	if err != nil {
		return nil, err
	}
	return &encryptors{p: p, pk: pk, free: transport.NewFreeList[*he.Encryptor](2 * runtime.GOMAXPROCS(0)), proofs: key}, nil
}

// with runs fn with an encryptor holding zs, and returns the encryptions
// of zero fn did not use.
func (e *encryptors) with(zs []he.Zero, fn func(*he.Encryptor) error) ([]he.Zero, error) {
	enc, ok := e.free.Get()
	if !ok {
		var err error
		if enc, err = he.NewEncryptor(e.p, e.pk); err != nil {
			return zs, err
		}
	}
	enc.Give(zs)
	err := fn(enc)
	zs = enc.Take() // an encryptor kept holds none
	e.free.Put(enc)
	return zs, err
}

// PrepareBudget bounds the encryptions of zero prepared ahead by the owners
// sharing it (Config.Prepare); owners beyond it encrypt afresh. Their
// preparations run one at a time: background work. Safe for concurrent
// use.
type PrepareBudget struct {
	max  int64
	held atomic.Int64
	one  chan struct{}
}

// NewPrepareBudget returns a budget of max encryptions of zero (540 KB each
// at the default parameters).
func NewPrepareBudget(max int) *PrepareBudget {
	return &PrepareBudget{max: int64(max), one: make(chan struct{}, 1)}
}

// defaultPrepare is the budget of the owners of a process given none: 160
// ciphertexts, 86 MB.
var defaultPrepare = NewPrepareBudget(160)

// encrypt runs fn with an encryptor holding the prepared encryptions of
// zero, keeps those it did not use and records the ciphertexts it made as
// the number to prepare next.
func (c *committeeEnc) encrypt(fn func(*he.Encryptor) (int, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	before, n := len(c.zeros), 0
	var err error
	c.zeros, err = c.encs.with(c.zeros, func(enc *he.Encryptor) (err error) {
		n, err = fn(enc)
		return err
	})
	if !c.dropped {
		c.budget.held.Add(int64(len(c.zeros) - before))
	}
	if err == nil {
		c.want = n
	}
	return err
}

// ready is the number of prepared encryptions held.
func (c *committeeEnc) ready() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.zeros)
}

// prepare makes encryptions of zero until the latest share's number is
// ready, one at a time, until ctx ends or the budget is spent.
func (c *committeeEnc) prepare(ctx context.Context) error {
	for ctx.Err() == nil {
		select {
		case c.budget.one <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		made, err := c.prepareOne()
		<-c.budget.one
		if !made || err != nil {
			return err
		}
	}
	return nil
}

// prepareOne makes one encryption of zero if one more is wanted, and says
// whether it did.
func (c *committeeEnc) prepareOne() (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped || len(c.zeros) >= c.want || c.budget.held.Load() >= c.budget.max {
		return false, nil
	}
	before := len(c.zeros)
	var err error
	c.zeros, err = c.encs.with(c.zeros, func(enc *he.Encryptor) error {
		enc.Prepare()
		return nil
	})
	c.budget.held.Add(int64(len(c.zeros) - before))
	return err == nil, err
}

// drop gives back the count of a replaced key's prepared encryptions (a
// job still running under the key may use them) and prepares no more.
func (c *committeeEnc) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dropped {
		c.budget.held.Add(-int64(len(c.zeros)))
	}
	c.dropped = true
}
