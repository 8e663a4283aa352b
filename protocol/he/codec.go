package he

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tuneinsight/lattigo/v5/ring"
)

// ErrMalformed reports bytes that are not a valid encoding of the expected
// object for these parameters.
var ErrMalformed = errors.New("malformed")

// layout is the exact byte layout of one lattigo object type for one
// parameter set: constant header bytes and runs of coefficients.
type layout struct {
	name     string
	template []byte // the object's encoding with every coefficient zero
	runs     []coeffRun
}

// coeffRun is a run of n little-endian uint64 coefficients at off that belong
// to row `row` of polynomial `poly` and must be below mod.
type coeffRun struct {
	off, poly, row, n int
	mod               uint64
}

// polysOf lists the polynomials of an object in a fixed order, with the
// modulus of each of their rows.
type polysOf func() ([]ring.Poly, [][]uint64)

const markTag = 0xA5 << 56

func marker(poly, row int) uint64 { return markTag | uint64(poly)<<24 | uint64(row+1) }

// deriveLayout learns the layout of obj from lattigo's own encoding: it
// encodes obj with zero coefficients and again with every coefficient set to
// a marker naming its polynomial and row. Bytes that differ are coefficients;
// the rest is header. obj's coefficients are zero afterwards.
func deriveLayout(name string, obj encoding.BinaryMarshaler, polys polysOf) (*layout, error) {
	ps, mods := polys()
	set := func(mark bool) {
		for pi, p := range ps {
			for r, row := range p.Coeffs {
				v := uint64(0)
				if mark {
					v = marker(pi, r)
				}
				for j := range row {
					row[j] = v
				}
			}
		}
	}
	set(false)
	zero, err := obj.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("%s: template: %w", name, err)
	}
	set(true)
	marked, err := obj.MarshalBinary()
	set(false)
	if err != nil {
		return nil, fmt.Errorf("%s: template: %w", name, err)
	}
	if len(zero) != len(marked) {
		return nil, fmt.Errorf("%s: template: encoding length depends on coefficients", name)
	}
	l := &layout{name: name, template: zero}
	total := 0
	for i := 0; i < len(zero); {
		if zero[i] == marked[i] {
			i++
			continue
		}
		if i+8 > len(marked) {
			return nil, fmt.Errorf("%s: template: truncated coefficient at %d", name, i)
		}
		w := binary.LittleEndian.Uint64(marked[i:])
		pi, r := int(w>>24&0xFFFF), int(w&0xFFFFFF)-1
		if w>>56 != markTag>>56 || pi >= len(ps) || r < 0 || r >= len(mods[pi]) {
			return nil, fmt.Errorf("%s: template: unexpected word %#x at %d", name, w, i)
		}
		n := 0
		for i+8*n+8 <= len(marked) && binary.LittleEndian.Uint64(marked[i+8*n:]) == w {
			n++
		}
		if n != len(ps[pi].Coeffs[r]) {
			return nil, fmt.Errorf("%s: template: row %d of polynomial %d is not contiguous", name, r, pi)
		}
		l.runs = append(l.runs, coeffRun{off: i, poly: pi, row: r, n: n, mod: mods[pi][r]})
		total += n
		i += 8 * n
	}
	want := 0
	for _, p := range ps {
		for _, row := range p.Coeffs {
			want += len(row)
		}
	}
	if total != want {
		return nil, fmt.Errorf("%s: template: found %d coefficients, object has %d", name, total, want)
	}
	return l, nil
}

// validate checks b without writing anything.
func (l *layout) validate(b []byte) error {
	if len(b) != len(l.template) {
		return fmt.Errorf("%s: %d bytes, want %d: %w", l.name, len(b), len(l.template), ErrMalformed)
	}
	prev := 0
	for _, r := range l.runs {
		if !bytes.Equal(b[prev:r.off], l.template[prev:r.off]) {
			return fmt.Errorf("%s: header bytes %d..%d differ from this parameter set's (wrong parameters, level, degree or count?): %w", l.name, prev, r.off, ErrMalformed)
		}
		src := b[r.off : r.off+8*r.n]
		for j := 0; j < r.n; j++ {
			if w := binary.LittleEndian.Uint64(src[8*j:]); w >= r.mod {
				return fmt.Errorf("%s: polynomial %d row %d coefficient %d is %d, not reduced modulo %d: %w", l.name, r.poly, r.row, j, w, r.mod, ErrMalformed)
			}
		}
		prev = r.off + 8*r.n
	}
	if !bytes.Equal(b[prev:], l.template[prev:]) {
		return fmt.Errorf("%s: trailing bytes differ from this parameter set's: %w", l.name, ErrMalformed)
	}
	return nil
}

// decode validates b and only then copies its coefficients into ps (which
// must have the template's shape), so ps is unchanged on error.
func (l *layout) decode(b []byte, ps []ring.Poly) error {
	if err := l.validate(b); err != nil {
		return err
	}
	for _, r := range l.runs {
		dst := ps[r.poly].Coeffs[r.row][:r.n]
		src := b[r.off : r.off+8*r.n]
		for j := range dst {
			dst[j] = binary.LittleEndian.Uint64(src[8*j:])
		}
	}
	return nil
}

// encode writes ps in the template's layout, appending to dst.
func (l *layout) encode(dst []byte, ps []ring.Poly) []byte {
	at := len(dst)
	dst = append(dst, l.template...)
	out := dst[at:]
	for _, r := range l.runs {
		src := ps[r.poly].Coeffs[r.row][:r.n]
		w := out[r.off : r.off+8*r.n]
		for j, c := range src {
			binary.LittleEndian.PutUint64(w[8*j:], c)
		}
	}
	return dst
}

// Codec encodes and decodes one object type of a parameter set. It is
// immutable and safe for concurrent use.
type Codec[T any] struct {
	l     *layout
	alloc func() T
	polys func(T) []ring.Poly
}

// Name names the object type in errors.
func (c Codec[T]) Name() string { return c.l.name }

// Size returns the length in bytes of every valid encoding.
func (c Codec[T]) Size() int { return len(c.l.template) }

// New allocates a zero object of the right shape.
func (c Codec[T]) New() T { return c.alloc() }

// Marshal returns the encoding of x: exactly lattigo's MarshalBinary bytes.
func (c Codec[T]) Marshal(x T) []byte { return c.l.encode(make([]byte, 0, c.Size()), c.polys(x)) }

// Append appends the encoding of x to dst.
func (c Codec[T]) Append(dst []byte, x T) []byte { return c.l.encode(dst, c.polys(x)) }

// Validate checks an encoding without decoding it.
func (c Codec[T]) Validate(b []byte) error { return c.l.validate(b) }

// UnmarshalInto decodes b into x, an object from New. On error x is
// unchanged and the error names what is wrong.
func (c Codec[T]) UnmarshalInto(b []byte, x T) error { return c.l.decode(b, c.polys(x)) }

// Unmarshal decodes b into a new object.
func (c Codec[T]) Unmarshal(b []byte) (T, error) {
	x := c.alloc()
	if err := c.UnmarshalInto(b, x); err != nil {
		var zero T
		return zero, err
	}
	return x, nil
}

func newCodec[T encoding.BinaryMarshaler](name string, alloc func() T, polys func(T) []ring.Poly, moduli func(i int) []uint64) (Codec[T], error) {
	x := alloc()
	l, err := deriveLayout(name, x, func() ([]ring.Poly, [][]uint64) {
		ps := polys(x)
		mods := make([][]uint64, len(ps))
		for i := range ps {
			mods[i] = moduli(i)
		}
		return ps, mods
	})
	if err != nil {
		return Codec[T]{}, err
	}
	return Codec[T]{l: l, alloc: alloc, polys: polys}, nil
}
