package seal

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

func signed(context string, msg []byte) []byte {
	b := make([]byte, 0, len("fedpca/")+len(context)+1+len(msg))
	b = append(b, "fedpca/"...)
	b = append(b, context...)
	b = append(b, 0)
	return append(b, msg...)
}

// Sign signs msg for the given context with an ECDSA P-256 or Ed25519 key.
func Sign(signer crypto.Signer, context string, msg []byte) ([]byte, error) {
	b := signed(context, msg)
	switch signer.Public().(type) {
	case *ecdsa.PublicKey:
		d := sha256.Sum256(b)
		return signer.Sign(rand.Reader, d[:], crypto.SHA256)
	case ed25519.PublicKey:
		return signer.Sign(rand.Reader, b, crypto.Hash(0))
	}
	return nil, fmt.Errorf("sign: unsupported key type %T", signer.Public())
}

// ErrBadSignature reports a signature that does not verify.
var ErrBadSignature = errors.New("signature does not verify")

// Verify checks a signature made by Sign.
func Verify(pub crypto.PublicKey, context string, msg, sig []byte) error {
	b := signed(context, msg)
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		d := sha256.Sum256(b)
		if !ecdsa.VerifyASN1(k, d[:], sig) {
			return ErrBadSignature
		}
		return nil
	case ed25519.PublicKey:
		if !ed25519.Verify(k, b, sig) {
			return ErrBadSignature
		}
		return nil
	}
	return fmt.Errorf("verify: unsupported key type %T", pub)
}

// NewExchangeKey returns a fresh X25519 key pair for receiving sealed boxes.
func NewExchangeKey() (*ecdh.PrivateKey, error) { return ecdh.X25519().GenerateKey(rand.Reader) }

const (
	keyLen   = 32
	nonceLen = 12
	info     = "fedpca sealed box v1"
)

func boxKey(shared, ephPub, recipPub []byte) ([]byte, error) {
	salt := append(append([]byte{}, ephPub...), recipPub...)
	return hkdf.Key(sha256.New, shared, salt, info, keyLen)
}

// Seal encrypts plaintext to the X25519 public key recipient, bound to aad.
func Seal(recipient, aad, plaintext []byte) ([]byte, error) {
	rpub, err := ecdh.X25519().NewPublicKey(recipient)
	if err != nil {
		return nil, fmt.Errorf("seal: recipient key: %w", err)
	}
	eph, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	shared, err := eph.ECDH(rpub)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	k, err := boxKey(shared, eph.PublicKey().Bytes(), recipient)
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(k)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 32+nonceLen+len(plaintext)+gcm.Overhead())
	out = append(out, eph.PublicKey().Bytes()...)
	nonce := make([]byte, nonceLen)
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out = append(out, nonce...)
	return gcm.Seal(out, nonce, plaintext, aad), nil
}

// ErrOpen reports a box that cannot be opened: wrong key, wrong additional
// data, or tampered bytes.
var ErrOpen = errors.New("sealed box does not open")

// Open decrypts a box made by Seal for priv's public key with the same aad.
func Open(priv *ecdh.PrivateKey, aad, box []byte) ([]byte, error) {
	if len(box) < 32+nonceLen+16 {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrOpen, len(box))
	}
	epub, err := ecdh.X25519().NewPublicKey(box[:32])
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOpen, err)
	}
	shared, err := priv.ECDH(epub)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrOpen, err)
	}
	k, err := boxKey(shared, box[:32], priv.PublicKey().Bytes())
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(k)
	if err != nil {
		return nil, err
	}
	pt, err := gcm.Open(nil, box[32:32+nonceLen], box[32+nonceLen:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}
