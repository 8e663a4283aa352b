package seal

import (
	"bytes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
)

// Channel is an authenticated encryption channel between two parties that
// each hold an X25519 key and the other's public key (static-static
// X25519, HKDF-SHA-256 with both public keys as the salt, lower first, and
// the context as info; AES-256-GCM). Messages are numbered: message i in
// one direction uses nonce (i, direction), so every nonce is used once per
// key as long as the caller never reuses a number in a direction; the
// number and direction are also authenticated.
type Channel struct {
	aead cipher.AEAD
	mine []byte
	peer []byte
	// shared, salt and context derive the channel's other keys (Key).
	shared, salt []byte
	context      string
}

// NewChannel derives the channel between priv's owner and the owner of
// peer, for context.
func NewChannel(priv *ecdh.PrivateKey, peer []byte, context string) (*Channel, error) {
	ppub, err := ecdh.X25519().NewPublicKey(peer)
	if err != nil {
		return nil, fmt.Errorf("channel: peer key: %w", err)
	}
	shared, err := priv.ECDH(ppub)
	if err != nil {
		return nil, fmt.Errorf("channel: %w", err)
	}
	mine := priv.PublicKey().Bytes()
	lo, hi := mine, peer
	if bytes.Compare(lo, hi) > 0 {
		lo, hi = hi, lo
	}
	if bytes.Equal(lo, hi) {
		return nil, fmt.Errorf("channel: the peer's key is this party's own")
	}
	salt := append(append([]byte{}, lo...), hi...)
	k, err := hkdf.Key(sha256.New, shared, salt, "fedpca channel v1\x00"+context, keyLen)
	if err != nil {
		return nil, err
	}
	gcm, err := newGCM(k)
	if err != nil {
		return nil, err
	}
	return &Channel{aead: gcm, mine: mine, peer: peer, shared: shared, salt: salt, context: context}, nil
}

// Key derives a 32-byte key that only the channel's two parties know, for
// label (HKDF-SHA-256 of the same shared secret as the channel's, with
// another info: independent of the channel's key and of every other
// label's): keys two parties draw the same randomness from, such as a
// replicated computation's pseudorandom secret sharing.
func (c *Channel) Key(label string) ([32]byte, error) {
	var out [32]byte
	k, err := hkdf.Key(sha256.New, c.shared, c.salt, "fedpca channel key v1\x00"+c.context+"\x00"+label, len(out))
	if err != nil {
		return out, err
	}
	copy(out[:], k)
	return out, nil
}

// nonce is the message number and the direction: 0 from the lower public
// key to the higher, 1 the other way.
func (c *Channel) nonce(n uint64, fromMe bool) []byte {
	out := make([]byte, nonceLen)
	binary.BigEndian.PutUint64(out, n)
	if (bytes.Compare(c.mine, c.peer) < 0) != fromMe {
		out[8] = 1
	}
	return out
}

// Seal encrypts message n from this party to the peer.
func (c *Channel) Seal(n uint64, plaintext, aad []byte) []byte {
	return c.aead.Seal(nil, c.nonce(n, true), plaintext, aad)
}

// Open decrypts message n from the peer.
func (c *Channel) Open(n uint64, box, aad []byte) ([]byte, error) {
	pt, err := c.aead.Open(nil, c.nonce(n, false), box, aad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
