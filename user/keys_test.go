package user

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedpca/fedpca/protocol/he"
)

// A key directory without keys is ErrNoKeys (callers such as the simulator
// generate keys on it) and says how to make them; a damaged key is not.
func TestLoadKeysErrNoKeys(t *testing.T) {
	p, err := he.NewDefaultParams()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	_, err = LoadKeys(dir, p)
	if !errors.Is(err, ErrNoKeys) || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "fedpca user keygen") {
		t.Fatalf("empty directory: %v, want ErrNoKeys naming keygen", err)
	}
	if _, err := GenerateKeys(dir, p); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(dir, p); err != nil {
		t.Fatalf("generated keys: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, PublicKeyFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(dir, p); !errors.Is(err, ErrNoKeys) {
		t.Fatalf("public key missing: %v, want ErrNoKeys", err)
	}
	if err := os.WriteFile(filepath.Join(dir, PublicKeyFile), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeys(dir, p); err == nil || errors.Is(err, ErrNoKeys) {
		t.Fatalf("damaged public key: %v, want an error other than ErrNoKeys", err)
	}
}
