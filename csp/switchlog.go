package csp

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/transport"
)

// The switch log (the switches bucket of csp.db) is what makes a member
// switch a job at most once: a second request for a switched job gets the
// stored shares, never fresh ones. It is worth that only beside the key it
// is the log of. A member started with its key file and a new csp.db (a
// lost or wiped store, a key file restored without its log) would switch an
// old job again with fresh noise, and a user holding both answers averages
// the members' noise down (two switches halve its variance). So the log
// records the key it belongs to, and a member refuses to start on a log that
// is not its key's.
//
// The binding names the member's own share, not only the committee key
// (every member of a committee holds the same committee key): the member's
// ID, the ceremony, its point and the committee key's fingerprint. A new
// key takes over the log in two steps, so that a crash between writing the
// key file and recording the binding is recovered at the next start: the
// binding it is about to install is recorded as pending first, and only a
// log without any switch record can be taken over.
//
// What the binding cannot tell: an older copy of this same key's log (a
// backup restored after the member switched more jobs) is its key's log,
// and the jobs switched since the copy was made could be switched again.
// Back csp.db up with secret-key.json and restore them together, from the
// newest backup.

var (
	bucketLog  = []byte("log")
	logKey     = []byte("key")
	logPending = []byte("pending")
)

// logBinding names the key a switch log belongs to: one member's share of
// one committee key.
type logBinding struct {
	Member       string `json:"member"`
	Ceremony     string `json:"ceremony_id"`
	Point        uint32 `json:"point"`
	CommitteeKey string `json:"committee_key_fingerprint"`
}

// bindingOf is the binding of the member's key material.
func bindingOf(member string, st *secretFile) logBinding {
	return logBinding{Member: member, Ceremony: st.CeremonyID, Point: uint32(st.Secret.Point), CommitteeKey: st.Fingerprint}
}

func (b logBinding) String() string {
	return fmt.Sprintf("csp/%s's share (point %d) of committee key %s (ceremony %s)", b.Member, b.Point, short(b.CommitteeKey), b.Ceremony)
}

func short(fp string) string {
	if len(fp) > 16 {
		return fp[:16] + "…"
	}
	return fp
}

// ErrForeignLog reports a switch log that is not the log of the member's
// key: the member does not start on it.
var ErrForeignLog = errors.New("the switch log is not this member's key's")

// logState is what the store says about its log.
type logState struct {
	key, pending *logBinding
	switches     int // switch records
}

// describe names the key the log is bound to.
func (s logState) describe() string {
	if s.key == nil {
		return "a log bound to no key"
	}
	return "the log of " + s.key.String()
}

func readLog(tx *bolt.Tx) (logState, error) {
	var s logState
	if b := tx.Bucket(bucketSwitches); b != nil {
		if err := b.ForEachBucket(func([]byte) error { s.switches++; return nil }); err != nil {
			return s, err
		}
	}
	b := tx.Bucket(bucketLog)
	if b == nil {
		return s, nil
	}
	for _, f := range []struct {
		k   []byte
		dst **logBinding
	}{{logKey, &s.key}, {logPending, &s.pending}} {
		v := b.Get(f.k)
		if v == nil {
			continue
		}
		lb, err := decodeBinding(v)
		if err != nil {
			return s, fmt.Errorf("%s: switch log binding %q: %w", dbFileName, f.k, err)
		}
		*f.dst = lb
	}
	return s, nil
}

// decodeBinding decodes and checks a stored binding: a member ID, a
// ceremony, a point and a key fingerprint.
func decodeBinding(v []byte) (*logBinding, error) {
	var lb logBinding
	if err := json.Unmarshal(v, &lb); err != nil {
		return nil, err
	}
	if err := (transport.Identity{Role: transport.RoleCSP, ID: lb.Member}).Validate(); err != nil {
		return nil, err
	}
	if lb.Ceremony == "" || len(lb.Ceremony) > 128 || lb.Point < 1 || !job.ValidJobID(lb.CommitteeKey) {
		return nil, fmt.Errorf("ceremony %.40q, point %d, key %.70q: want a ceremony ID, a point and a 64-hex-digit fingerprint", lb.Ceremony, lb.Point, lb.CommitteeKey)
	}
	return &lb, nil
}

func putBinding(tx *bolt.Tx, k []byte, lb logBinding) error {
	b, err := tx.CreateBucketIfNotExists(bucketLog)
	if err != nil {
		return err
	}
	v, err := json.Marshal(lb)
	if err != nil {
		return err
	}
	return b.Put(k, v)
}

// checkLog runs at start, after the key file is loaded: the member starts
// only on the switch log of its key (or, without a key, on a log that holds
// no switch).
func (c *CSP) checkLog() error {
	return c.db.Update(func(tx *bolt.Tx) error {
		s, err := readLog(tx)
		if err != nil {
			return err
		}
		dbPath, keyPath := filepath.Join(c.cfg.Store, dbFileName), c.secretPath()
		if c.state == nil {
			if s.switches == 0 {
				return nil // a new member, or a ceremony that never finished: nothing to lose
			}
			return fmt.Errorf("%w: %s holds %s (%s), but %s is missing. Restore %s from the backup that %s comes from; to join a new committee instead, move the state directory aside (docs/RELIABILITY.md, \"A member's state\")",
				ErrForeignLog, dbPath, records(s.switches), s.describe(), keyPath, secretFileName, dbFileName)
		}
		want := bindingOf(c.cfg.ID, c.state)
		switch {
		case s.key != nil && *s.key == want:
			if s.pending != nil { // a ceremony that did not finish
				return tx.Bucket(bucketLog).Delete(logPending)
			}
			return nil
		case s.pending != nil && *s.pending == want && s.switches == 0:
			// The key file was written and the member stopped before the
			// binding was: finish it.
			if err := putBinding(tx, logKey, want); err != nil {
				return err
			}
			return tx.Bucket(bucketLog).Delete(logPending)
		}
		found := fmt.Sprintf("records no key (a new or replaced %s, with %s)", dbFileName, records(s.switches))
		if s.switches > 0 {
			found = fmt.Sprintf("records no key (a %s with %s: one written before switch logs were bound to keys, which cannot be told from another key's)", dbFileName, records(s.switches))
		}
		if s.key != nil {
			found = fmt.Sprintf("is the log of %s, with %s", s.key, records(s.switches))
		}
		return fmt.Errorf("%w: %s holds %s, but the switch log %s %s. A member without its key's log could switch a job it already switched again, with fresh noise, which a user could average away. "+
			"Restore %s from the same backup as %s (back them up together); if this key's log is lost, do not run this key again: move the state directory aside and give the committee a new key (docs/RELIABILITY.md, \"A member's state\")",
			ErrForeignLog, keyPath, want, dbPath, found, dbFileName, secretFileName)
	})
}

func records(n int) string {
	switch n {
	case 0:
		return "no switch record"
	case 1:
		return "1 switch record"
	}
	return fmt.Sprintf("%d switch records", n)
}

// beginBind records, before a ceremony's key file is written, that the
// switch log is about to be the new key's. A log holding switches of
// another key is not taken over.
func (c *CSP) beginBind(lb logBinding) error {
	return c.db.Update(func(tx *bolt.Tx) error {
		s, err := readLog(tx)
		if err != nil {
			return err
		}
		if s.key != nil && *s.key == lb {
			return nil
		}
		if s.switches > 0 {
			return fmt.Errorf("%w: this member's switch log holds %s (%s); a new key cannot take it over (move the state directory aside to join a new committee)", ErrCeremony, records(s.switches), s.describe())
		}
		return putBinding(tx, logPending, lb)
	})
}

// endBind makes the switch log the new key's, once its key file is written.
func (c *CSP) endBind(lb logBinding) error {
	return c.db.Update(func(tx *bolt.Tx) error {
		if err := putBinding(tx, logKey, lb); err != nil {
			return err
		}
		return tx.Bucket(bucketLog).Delete(logPending)
	})
}
