package he

import (
	"bytes"
	"errors"
	"testing"
)

// hostile builds fuzzed bytes from a valid encoding: the encoding with a
// patch written over it at `at`, its first `at` bytes followed by the
// patch (a truncation or an extension), or the patch alone.
func hostile(good, patch []byte, at int, mode uint8) []byte {
	switch mode % 3 {
	case 0:
		b := bytes.Clone(good)
		if len(b) > 0 {
			copy(b[uint(at)%uint(len(b)):], patch)
		}
		return b
	case 1:
		return append(bytes.Clone(good[:max(0, min(len(good), at))]), patch...)
	}
	return patch
}

func FuzzCiphertext(f *testing.F) {
	p := params(f)
	kp := GenerateKeyPair(p)
	enc, _ := NewEncryptor(p, kp.Public)
	cts, _ := enc.EncryptVector([]int64{1})
	good := p.Codecs().Ciphertext.Marshal(cts[0])
	f.Add(good[:200], 0, uint8(0))
	f.Add([]byte{}, 100, uint8(1))
	f.Add([]byte{}, len(good), uint8(1)) // the valid encoding itself
	f.Fuzz(func(t *testing.T, patch []byte, at int, mode uint8) {
		b := hostile(good, patch, at, mode)
		ct, err := p.Codecs().Ciphertext.Unmarshal(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error is not ErrMalformed: %v", err)
			}
			return
		}
		if !bytes.Equal(p.Codecs().Ciphertext.Marshal(ct), b) {
			t.Fatal("accepted bytes do not re-encode to themselves")
		}
	})
}

// keyEncodings returns a valid encoding of every key-like wire and file
// object, by codec name: what FuzzKeys mutates.
func keyEncodings(tb testing.TB, p Params) map[string][]byte {
	tb.Helper()
	c := p.Codecs()
	seed := []byte("fedpca fuzz ceremony seed 000001")
	members, pk, err := LocalCeremony(p, Committee{N: 3, Threshold: 2}, seed)
	if err != nil {
		tb.Fatal(err)
	}
	pks, err := members[0].PublicKeyShare(seed)
	if err != nil {
		tb.Fatal(err)
	}
	dealt, err := members[0].DealShamir()
	if err != nil {
		tb.Fatal(err)
	}
	user := GenerateKeyPair(p)
	enc, _ := NewEncryptor(p, pk)
	cts, _ := enc.EncryptVector([]int64{1, 2, 3})
	ks, err := members[0].KeySwitchShare(cts[0], user.Public, []Point{1, 2}, []int64{5})
	if err != nil {
		tb.Fatal(err)
	}
	_, conv, err := members[0].EncToShare(cts[0], []Point{1, 2})
	if err != nil {
		tb.Fatal(err)
	}
	return map[string][]byte{
		c.ConversionShare.Name(): c.ConversionShare.Marshal(conv),
		c.PublicKey.Name():       c.PublicKey.Marshal(pk),
		c.PublicKeyShare.Name():  c.PublicKeyShare.Marshal(pks),
		c.KeySwitchShare.Name():  c.KeySwitchShare.Marshal(ks),
		c.ShamirShare.Name():     c.ShamirShare.Marshal(dealt[2]),
		c.SecretKey.Name():       c.SecretKey.Marshal(user.Secret),
	}
}

// FuzzKeys: the committee and user public keys, the ceremony's public-key
// and Shamir shares, key-switch and conversion shares and secret keys
// (files). Every
// decoder must refuse hostile bytes with ErrMalformed, and bytes it accepts
// must re-encode to themselves.
func FuzzKeys(f *testing.F) {
	p := params(f)
	c := p.Codecs()
	good := keyEncodings(f, p)
	type codec struct {
		name      string
		roundTrip func([]byte) ([]byte, error)
	}
	codecs := []codec{
		{c.PublicKey.Name(), roundTrip(c.PublicKey)},
		{c.PublicKeyShare.Name(), roundTrip(c.PublicKeyShare)},
		{c.KeySwitchShare.Name(), roundTrip(c.KeySwitchShare)},
		{c.ShamirShare.Name(), roundTrip(c.ShamirShare)},
		{c.SecretKey.Name(), roundTrip(c.SecretKey)},
		{c.ConversionShare.Name(), roundTrip(c.ConversionShare)},
	}
	for i, cd := range codecs {
		g := good[cd.name]
		f.Add(uint8(i), uint8(i), []byte{}, len(g), uint8(1)) // valid
		f.Add(uint8(i), uint8(i), []byte{}, len(g)-1, uint8(1))
		f.Add(uint8(i), uint8(i), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 300, uint8(0))
		f.Add(uint8(i), uint8(i+1), []byte{}, 1<<30, uint8(1)) // another object's bytes
		f.Add(uint8(i), uint8(i), g[:64], 0, uint8(2))
	}
	f.Fuzz(func(t *testing.T, which, from uint8, patch []byte, at int, mode uint8) {
		cd := codecs[int(which)%len(codecs)]
		b := hostile(good[codecs[int(from)%len(codecs)].name], patch, at, mode)
		back, err := cd.roundTrip(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: error is not ErrMalformed: %v", cd.name, err)
			}
			return
		}
		if !bytes.Equal(back, b) {
			t.Fatalf("%s: accepted bytes do not re-encode to themselves", cd.name)
		}
	})
}

// roundTrip decodes with a codec and encodes the result again.
func roundTrip[T any](c Codec[T]) func([]byte) ([]byte, error) {
	return func(b []byte) ([]byte, error) {
		x, err := c.Unmarshal(b)
		if err != nil {
			return nil, err
		}
		return c.Marshal(x), nil
	}
}

// FuzzRestoreMember: a CSP member's secret state read back from its file.
// Hostile states are refused with an error; an accepted one re-encodes to
// itself.
func FuzzRestoreMember(f *testing.F) {
	p := params(f)
	c := p.Codecs()
	members, _, err := LocalCeremony(p, Committee{N: 3, Threshold: 2}, []byte("fedpca fuzz ceremony seed 000001"))
	if err != nil {
		f.Fatal(err)
	}
	st := members[1].SecretState()
	goodSK, goodTS := st.SecretKey, st.ThresholdShare
	f.Add(uint64(2), 3, 2, []byte{}, len(goodSK), uint8(1), []byte{}, len(goodTS), uint8(1)) // valid
	f.Add(uint64(1), 1, 1, []byte{}, len(goodSK), uint8(1), []byte{}, 0, uint8(1))           // t = n, no share
	f.Add(uint64(4), 3, 2, []byte{}, len(goodSK), uint8(1), []byte{}, len(goodTS), uint8(1))
	f.Add(uint64(2), 3, 3, []byte{}, len(goodSK), uint8(1), []byte{}, len(goodTS), uint8(1))
	f.Add(uint64(2), 3, 2, []byte{1}, 10, uint8(0), []byte{}, len(goodTS)-8, uint8(1))
	f.Add(uint64(2), 3, 2, []byte{}, len(goodSK), uint8(1), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, 500, uint8(0))
	f.Fuzz(func(t *testing.T, point uint64, n, thr int, skPatch []byte, skAt int, skMode uint8, tsPatch []byte, tsAt int, tsMode uint8) {
		in := SecretState{Point: Point(point), N: n, Threshold: thr, SecretKey: hostile(goodSK, skPatch, skAt, skMode)}
		if ts := hostile(goodTS, tsPatch, tsAt, tsMode); len(ts) > 0 {
			in.ThresholdShare = ts
		}
		m, err := RestoreMember(p, in)
		if err != nil {
			if m != nil {
				t.Fatal("a member returned with an error")
			}
			return
		}
		out := m.SecretState()
		if out.Point != in.Point || out.N != in.N || out.Threshold != in.Threshold ||
			!bytes.Equal(out.SecretKey, in.SecretKey) || !bytes.Equal(out.ThresholdShare, in.ThresholdShare) {
			t.Fatal("restored member does not re-encode to its state")
		}
		if m.Committee().Thresholdized() && in.ThresholdShare != nil && !m.Ready() {
			t.Fatal("member with a threshold share is not ready")
		}
		if _, err := c.SecretKey.Unmarshal(out.SecretKey); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzPoly: an upload's c1 reaches every member in AppendPoly's encoding.
// DecodePoly accepts only the exact length with every residue reduced, and
// what it accepts re-encodes to the same bytes.
func FuzzPoly(f *testing.F) {
	p := params(f)
	kp := GenerateKeyPair(p)
	enc, _ := NewEncryptor(p, kp.Public)
	cts, _ := enc.EncryptVector([]int64{1, 2, 3})
	good := p.AppendPoly(nil, cts[0].Value[1])
	unreduced := bytes.Clone(good)
	for i := range 8 {
		unreduced[i] = 0xff
	}
	for _, b := range [][]byte{good, good[:100], unreduced, nil, append(bytes.Clone(good), 1)} {
		f.Add(b)
	}
	out := p.RingQ().AtLevel(p.Level()).NewPoly()
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := p.DecodePoly(b, out); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		if !bytes.Equal(p.AppendPoly(nil, out), b) {
			t.Fatal("an accepted polynomial does not re-encode to its bytes")
		}
	})
}
