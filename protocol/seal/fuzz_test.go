package seal

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"testing"
)

// FuzzVerify: signatures received from other parties (a user's job
// signature, a CSP member's exchange-key signature) are checked, never
// trusted: fuzzed signature bytes, messages and contexts give an error, and
// a signature made for one context never verifies in another.
func FuzzVerify(f *testing.F) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, ed, _ := ed25519.GenerateKey(rand.Reader)
	msg := []byte("3f1c")
	ecSig, _ := Sign(ec, "job-spec-v1", msg)
	edSig, _ := Sign(ed, "job-spec-v1", msg)
	f.Add(false, "job-spec-v1", msg, ecSig)
	f.Add(true, "job-spec-v1", msg, edSig)
	f.Add(false, "ceremony-exchange-key-v1", msg, ecSig)
	f.Add(false, "job-spec-v1", msg, ecSig[:len(ecSig)-1])
	f.Add(true, "job-spec-v1", msg, edSig[:63])
	f.Add(false, "job-spec-v1", msg, []byte{0x30, 0x06, 0x02, 0x01, 0x00, 0x02, 0x01, 0x00})
	f.Fuzz(func(t *testing.T, useEd bool, context string, m, sig []byte) {
		var pub any = &ec.PublicKey
		if useEd {
			pub = ed.Public()
		}
		err := Verify(pub, context, m, sig)
		if err != nil {
			if !errors.Is(err, ErrBadSignature) {
				t.Fatalf("error is not ErrBadSignature: %v", err)
			}
			return
		}
		// Verified: then it is a signature of (context, m) and of nothing
		// else with a different context.
		if Verify(pub, context+"x", m, sig) == nil {
			t.Fatal("a signature verifies in two contexts")
		}
	})
}
