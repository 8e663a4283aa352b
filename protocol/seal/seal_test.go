package seal

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"testing"
)

func TestSignVerify(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	for _, s := range []struct {
		name string
		sign func(string, []byte) ([]byte, error)
		pub  any
	}{
		{"ecdsa", func(c string, m []byte) ([]byte, error) { return Sign(ec, c, m) }, &ec.PublicKey},
		{"ed25519", func(c string, m []byte) ([]byte, error) { return Sign(ed, c, m) }, ed.Public()},
	} {
		sig, err := s.sign("job", []byte("abc"))
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(s.pub, "job", []byte("abc"), sig); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
		if err := Verify(s.pub, "exchange", []byte("abc"), sig); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: signature valid in another context: %v", s.name, err)
		}
		if err := Verify(s.pub, "job", []byte("abd"), sig); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: signature valid for another message: %v", s.name, err)
		}
	}
}

func TestSealOpen(t *testing.T) {
	a, _ := NewExchangeKey()
	b, _ := NewExchangeKey()
	msg := bytes.Repeat([]byte("share"), 1000)
	box, err := Seal(a.PublicKey().Bytes(), []byte("ceremony|1|2"), msg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(a, []byte("ceremony|1|2"), box)
	if err != nil || !bytes.Equal(got, msg) {
		t.Fatalf("open: %v", err)
	}
	if _, err := Open(b, []byte("ceremony|1|2"), box); !errors.Is(err, ErrOpen) {
		t.Errorf("wrong key: %v", err)
	}
	if _, err := Open(a, []byte("ceremony|1|3"), box); !errors.Is(err, ErrOpen) {
		t.Errorf("wrong aad: %v", err)
	}
	box[50] ^= 1
	if _, err := Open(a, []byte("ceremony|1|2"), box); !errors.Is(err, ErrOpen) {
		t.Errorf("tampered: %v", err)
	}
	if _, err := Open(a, nil, box[:10]); !errors.Is(err, ErrOpen) {
		t.Errorf("short: %v", err)
	}
	if _, err := Seal([]byte("short"), nil, msg); err == nil {
		t.Error("bad recipient key accepted")
	}
}

func FuzzOpen(f *testing.F) {
	a, _ := NewExchangeKey()
	box, _ := Seal(a.PublicKey().Bytes(), []byte("x"), []byte("hello"))
	f.Add(box)
	f.Add(box[:len(box)-1])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		// Whatever the bytes: Open refuses with ErrOpen and no plaintext, or
		// they are the honest box (a forgery from fuzzed bytes would break
		// AES-GCM; the key is bound to the ephemeral key's exact bytes, so
		// no other encoding of it opens), and another aad never opens them.
		pt, err := Open(a, []byte("x"), b)
		switch {
		case err != nil && (!errors.Is(err, ErrOpen) || pt != nil):
			t.Fatalf("refused with %v and %d plaintext bytes, want ErrOpen and none", err, len(pt))
		case err == nil && (!bytes.Equal(b, box) || string(pt) != "hello"):
			t.Fatalf("%d fuzzed bytes opened to %q: a forgery", len(b), pt)
		}
		if _, err := Open(a, []byte("y"), b); !errors.Is(err, ErrOpen) {
			t.Fatalf("opened with another aad: %v", err)
		}
	})
}

func TestChannel(t *testing.T) {
	a, _ := NewExchangeKey()
	b, _ := NewExchangeKey()
	ab, err := NewChannel(a, b.PublicKey().Bytes(), "job 1")
	if err != nil {
		t.Fatal(err)
	}
	ba, err := NewChannel(b, a.PublicKey().Bytes(), "job 1")
	if err != nil {
		t.Fatal(err)
	}
	box := ab.Seal(7, []byte("opening"), []byte("aad"))
	if got, err := ba.Open(7, box, []byte("aad")); err != nil || string(got) != "opening" {
		t.Fatalf("open: %q, %v", got, err)
	}
	for _, bad := range []struct {
		name string
		open func() ([]byte, error)
	}{
		{"another number", func() ([]byte, error) { return ba.Open(8, box, []byte("aad")) }},
		{"another aad", func() ([]byte, error) { return ba.Open(7, box, []byte("other")) }},
		{"its own message back", func() ([]byte, error) { return ab.Open(7, box, []byte("aad")) }},
	} {
		if _, err := bad.open(); !errors.Is(err, ErrOpen) {
			t.Errorf("%s: %v, want ErrOpen", bad.name, err)
		}
	}
	other, _ := NewChannel(b, a.PublicKey().Bytes(), "job 2")
	if _, err := other.Open(7, box, []byte("aad")); !errors.Is(err, ErrOpen) {
		t.Errorf("another context opened: %v", err)
	}
	if _, err := NewChannel(a, a.PublicKey().Bytes(), "x"); err == nil {
		t.Error("a channel to oneself")
	}
	// Derived keys: the same at both ends, another for another label,
	// context or peer.
	k1, _ := ab.Key("prss 1")
	k2, _ := ba.Key("prss 1")
	k3, _ := ab.Key("prss 2")
	k4, _ := other.Key("prss 1")
	c, _ := NewExchangeKey()
	ac, _ := NewChannel(a, c.PublicKey().Bytes(), "job 1")
	k5, _ := ac.Key("prss 1")
	if k1 != k2 || k1 == k3 || k1 == k4 || k1 == k5 || k1 == ([32]byte{}) {
		t.Errorf("derived keys: both ends %v, other label %v, other context %v, other peer %v", k1 == k2, k1 != k3, k1 != k4, k1 != k5)
	}
}
