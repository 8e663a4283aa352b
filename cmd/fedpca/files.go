package main

import (
	"bufio"
	"os"
	"path/filepath"
)

// atomicFile is an output file written in full or not at all: it is
// written to a temporary file beside its path and renamed onto it by
// commit; discard (after commit: nothing) removes the temporary file, so
// that a failed command leaves no partial or empty output.
type atomicFile struct {
	path string
	tmp  *os.File
	w    *bufio.Writer
	done bool
}

func newAtomicFile(path string) (*atomicFile, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &atomicFile{path: path, tmp: tmp, w: bufio.NewWriter(tmp)}, nil
}

func (f *atomicFile) Write(b []byte) (int, error) { return f.w.Write(b) }

// commit flushes the file and renames it onto its path (mode 0644).
func (f *atomicFile) commit() error {
	if err := f.w.Flush(); err != nil {
		return err
	}
	if err := f.tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := f.tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.tmp.Name(), f.path); err != nil {
		return err
	}
	f.done = true
	return nil
}

// discard removes the temporary file unless commit renamed it.
func (f *atomicFile) discard() {
	if !f.done {
		f.tmp.Close()
		os.Remove(f.tmp.Name())
	}
}
