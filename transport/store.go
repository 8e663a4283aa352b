package transport

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrStoreLocked reports a state directory whose store another process
// (or another instance in this one) holds open.
var ErrStoreLocked = errors.New("another process holds the store")

// storeLockWait is how long OpenStore waits for the store's lock: long
// enough for a node restarted in the same process to see the old instance
// close it, short enough to say at once that another node runs on it.
const storeLockWait = time.Second

// OpenStore creates the state directory dir (0700) if needed and opens the
// node's bbolt store in it (file, 0600). bbolt locks the file for as long as
// it is open, so a second node started on the same state directory fails
// here with ErrStoreLocked, naming the file, rather than with bbolt's
// "timeout".
func OpenStore(dir, file string) (*bolt.DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	return openStore(filepath.Join(dir, file), false)
}

// ReadStore opens a node's store in dir read-only, for a command that reads
// a stopped node's state (the store is locked while the node runs:
// ErrStoreLocked). A missing store is an error wrapping os.ErrNotExist;
// nothing is created.
func ReadStore(dir, file string) (*bolt.DB, error) {
	path := filepath.Join(dir, file)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	return openStore(path, true)
}

// storeMmapSize is the address space a store maps from the start: bbolt
// maps its file larger as it grows, and each time copies every value the
// open write transaction holds out of the old mapping, so that an owner's
// one transaction storing a 37 MB upload (d = 784) remapped about a dozen
// times and copied it as often (44 s of CPU for 100 owners,
// docs/BENCHMARKS.md). Only the pages of the file are ever resident; the
// file is not grown to it (Linux and macOS).
const storeMmapSize = 1 << 30

func openStore(path string, readOnly bool) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: storeLockWait, ReadOnly: readOnly, InitialMmapSize: storeMmapSize})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w at %s: stop it first, or give this node its own --state directory", ErrStoreLocked, path)
	}
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return db, nil
}
