package owner

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/fedpca/fedpca/protocol/he"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
)

// committeeEnc is the committee key an owner encrypts under, with its
// encryptor. Between jobs the owner prepares encryptions of zero under it
// (he.Encryptor.Prepare), as many as its latest share had ciphertexts, so
// that its next share costs encoding and an addition instead of a public-key
// encryption: about 3.5 ms of the 4 ms a ciphertext takes. They are kept in
// memory only, and each masks one ciphertext (he.Encryptor). The encryptor
// (about 1.4 MB of buffers and tables) is kept only while it holds prepared
// encryptions: the owners of a farm beyond maxPrepared make one per share.
type committeeEnc struct {
	fp string // the key's fingerprint
	p  he.Params
	pk *rlwe.PublicKey

	mu      sync.Mutex    // one job, or one preparation, at a time
	enc     *he.Encryptor // nil when it holds no prepared encryption
	want    int           // ciphertexts of the latest share
	dropped bool          // replaced by another key: its prepared count is given back
}

func newCommitteeEnc(fp string, p he.Params, pk *rlwe.PublicKey) (*committeeEnc, error) {
	if pk == nil {
		return nil, errors.New("encryptor: no public key")
	}
	return &committeeEnc{fp: fp, p: p, pk: pk}, nil
}

// encryptor returns the encryptor, made if there is none. With c.mu held.
func (c *committeeEnc) encryptor() (*he.Encryptor, error) {
	if c.enc == nil {
		enc, err := he.NewEncryptor(c.p, c.pk)
		if err != nil {
			return nil, err
		}
		c.enc = enc
	}
	return c.enc, nil
}

// release lets the encryptor go when it holds nothing prepared. With c.mu
// held.
func (c *committeeEnc) release() {
	if c.enc != nil && c.enc.Prepared() == 0 {
		c.enc = nil
	}
}

// ready is the number of prepared encryptions held.
func (c *committeeEnc) ready() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.enc == nil {
		return 0
	}
	return c.enc.Prepared()
}

// maxPrepared bounds the encryptions of zero prepared by all the owners of
// one process (a farm of simulated owners): 160 ciphertexts of 393 KB.
// Owners beyond it encrypt afresh.
const maxPrepared = 160

var (
	prepared  atomic.Int64             // encryptions of zero held in this process
	preparing = make(chan struct{}, 1) // one preparation at a time per process: background work
)

// encrypt runs fn with the encryptor and records the ciphertexts it made
// as the number to prepare next.
func (c *committeeEnc) encrypt(fn func(*he.Encryptor) (int, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	enc, err := c.encryptor()
	if err != nil {
		return err
	}
	defer c.release()
	before := enc.Prepared()
	n, err := fn(enc)
	if !c.dropped {
		prepared.Add(int64(enc.Prepared() - before))
	}
	if err == nil {
		c.want = n
	}
	return err
}

// prepare makes encryptions of zero until the latest share's number is
// ready, one at a time, until ctx ends or the process holds maxPrepared.
func (c *committeeEnc) prepare(ctx context.Context) error {
	for ctx.Err() == nil {
		select {
		case preparing <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		made, err := c.prepareOne()
		<-preparing
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
	defer c.release()
	have := 0
	if c.enc != nil {
		have = c.enc.Prepared()
	}
	if c.dropped || have >= c.want || prepared.Load() >= maxPrepared {
		return false, nil
	}
	enc, err := c.encryptor()
	if err != nil {
		return false, err
	}
	if _, err := enc.Prepare(); err != nil {
		return false, err
	}
	prepared.Add(1)
	return true, nil
}

// drop gives back the count of a replaced key's prepared encryptions (a
// job still running under the key may use them) and prepares no more.
func (c *committeeEnc) drop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.enc != nil {
		prepared.Add(-int64(c.enc.Prepared()))
	}
	c.dropped = true
}
