package chaos

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// mountSmall mounts a tmpfs of the given size (e.g. "64m") at dir, so that
// a node's state can be made to run out of space. It needs root (or
// CAP_SYS_ADMIN); the error says so.
func mountSmall(dir, size string) (unmount func() error, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("filling a node's disk needs a small filesystem: run as root to mount one")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mount a tmpfs at %s: %v: %s", dir, err, bytes.TrimSpace(out))
	}
	return func() error {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			return fmt.Errorf("umount %s: %v: %s", dir, err, bytes.TrimSpace(out))
		}
		return nil
	}, nil
}

// fillDisk writes a file in dir until its filesystem has no space left;
// free removes it.
func fillDisk(dir string) (free func() error, err error) {
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	free = func() error { return os.Remove(path) }
	for _, chunk := range []int{1 << 20, 4 << 10, 1} {
		b := make([]byte, chunk)
		for {
			if _, err := f.Write(b); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					_ = free()
					return nil, err
				}
				break
			}
		}
	}
	return free, nil
}
