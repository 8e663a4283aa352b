package mpc

// bshared is a replicated sharing over Z_2 of a rows x cols matrix of
// bits, x = S[0] xor S[1] xor S[2], party i holding S[i] and S[i+1] as
// with words. Bits are packed by column: column j is the words
// [j nw, (j+1) nw) of a component, nw = ceil(rows / 64), row r its bit
// r mod 64 of word r / 64. The bits past the last row are padding: every
// operation is bitwise, so they never reach a row's bit.
type bshared struct {
	rows, cols int
	S          [3][]uint64
}

// packedWords is the number of 64-bit words of a packed column of rows bits.
func packedWords(rows int) int { return (rows + 63) / 64 }

// pack returns the packed form of x, whose entries are bits (words 0 or 1:
// the exclusive-or components of random bits, makeBits).
func (e *Engine) pack(x Shared) bshared {
	nw := packedWords(x.R)
	out := bshared{rows: x.R, cols: x.C}
	for i, s := range x.S {
		if !e.holds(i) {
			continue
		}
		p := make([]uint64, x.C*nw)
		for r := range x.R {
			for c := range x.C {
				p[c*nw+r/64] |= (s.V[r*x.C+c].Lo & 1) << (r % 64)
			}
		}
		out.S[i] = p
	}
	return out
}

// packPublic packs column j of public words' bits (bit j of c[r] in row r)
// for j < m, complemented if not is set.
func packPublic(c []Word, m int, not bool) []uint64 {
	nw := packedWords(len(c))
	p := make([]uint64, m*nw)
	for r, w := range c {
		for j := range m {
			p[j*nw+r/64] |= w.Bit(uint(j)) << (r % 64)
		}
	}
	if not {
		for k := range p {
			p[k] = ^p[k]
		}
	}
	return p
}

// bcols returns columns [from, to) of x (sharing x's words).
func (x bshared) bcols(from, to int) bshared {
	nw := packedWords(x.rows)
	out := bshared{rows: x.rows, cols: to - from}
	for i, s := range x.S {
		if s != nil {
			out.S[i] = s[from*nw : to*nw : to*nw]
		}
	}
	return out
}

// toWords packs 64-bit words two to a ring word, for the wire.
func toWords(v []uint64) []Word {
	out := make([]Word, (len(v)+1)/2)
	for k, x := range v {
		if k%2 == 0 {
			out[k/2].Lo = x
		} else {
			out[k/2].Hi = x
		}
	}
	return out
}

// fromWords undoes toWords for n 64-bit words.
func fromWords(w []Word, n int) []uint64 {
	out := make([]uint64, n)
	for k := range out {
		if k%2 == 0 {
			out[k] = w[k/2].Lo
		} else {
			out[k] = w[k/2].Hi
		}
	}
	return out
}

// xorZero returns party i's term of a fresh sharing of zero over Z_2 (n
// words of bits), for every party i run here: F_(i+1) xor F_i, as
// prss.zero does over Z_2^128.
func (p prss) xorZero(e *Engine, n int) [3][]uint64 {
	var f [3][]uint64
	for j := range f {
		if p[j] != nil {
			f[j] = make([]uint64, n)
			for k := range f[j] {
				f[j][k] = p[j].Uint64()
			}
		}
	}
	var out [3][]uint64
	for i := range out {
		if e.runs(i) {
			out[i] = make([]uint64, n)
			next := f[(i+1)%3]
			for k := range out[i] {
				out[i][k] = next[k] ^ f[i][k]
			}
		}
	}
	return out
}

// and returns x AND y entrywise, in one resharing round: party i's term
// x_i y_i xor x_i y_(i+1) xor x_(i+1) y_i xor its zero term, sent to party
// i - 1 as the new component i (products over Z_2, as over Z_2^128, one
// bit a bit).
func (rp *replicated) and(e *Engine, x, y bshared) bshared {
	n := x.cols * packedWords(x.rows)
	// The terms fill whole ring words, the last 64 bits (if n is odd)
	// the zero sharing's alone: every bit sent is masked.
	alpha := rp.prss.xorZero(e, n+n%2)
	z := bshared{rows: x.rows, cols: x.cols}
	for i := range 3 {
		if !e.runs(i) {
			continue
		}
		j := (i + 1) % 3
		xi, xj, yi, yj := x.S[i], x.S[j], y.S[i], y.S[j]
		t := alpha[i]
		for k := range n {
			t[k] ^= xi[k]&(yi[k]^yj[k]) ^ xj[k]&yi[k]
		}
		z.S[i] = t
	}
	if e.Me < 0 {
		e.round(len(alpha[0]) / 2)
	} else {
		me, next := e.Me, (e.Me+1)%3
		z.S[next] = fromWords(rp.toPrev(e, toWords(z.S[me])), n+n%2)
	}
	for i, s := range z.S {
		if s != nil {
			z.S[i] = s[:n:n]
		}
	}
	return z
}

// bopen opens x (checked as open checks words) and returns its packed bits.
func (rp *replicated) bopen(e *Engine, x bshared) []uint64 {
	n := len(x.S[max(e.Me, 0)])
	out := make([]uint64, n)
	if e.Me < 0 {
		e.round((n+1)/2 + 2)
		for k := range out {
			out[k] = x.S[0][k] ^ x.S[1][k] ^ x.S[2][k]
		}
		return out
	}
	me, next := e.Me, (e.Me+1)%3
	got := fromWords(rp.openRound(e, toWords(x.S[me]), toWords(x.S[next])), n)
	for k := range out {
		out[k] = x.S[me][k] ^ x.S[next][k] ^ got[k]
	}
	return out
}

// lessThan returns the shared bit [c_r < r_r] over Z_2 per row r, for
// public m-bit c_r and r_r given by its bits low (column j: bit j), with
// lessThanBits' circuit (Catrina and de Hoogh 2010) over Z_2: the same
// ceil(log2 m) + 1 rounds of products, each a bit instead of a word, and
// the sum of the last products an exclusive or (at most one is set).
func (rp *replicated) lessThan(e *Engine, c []Word, low bshared) bshared {
	m, nw := low.cols, packedWords(low.rows)
	notc := packPublic(c, m, true)
	// eq column k: [bit m-1-k of r equals that of c] = r xor not c (the
	// constant on component 0); gt column j: r_j and not c_j.
	eq := bshared{rows: low.rows, cols: m}
	gt := bshared{rows: low.rows, cols: m}
	for i, s := range low.S {
		if s == nil {
			continue
		}
		eq.S[i], gt.S[i] = make([]uint64, m*nw), make([]uint64, m*nw)
		for k := range m {
			j := m - 1 - k
			for w := range nw {
				v := s[j*nw+w]
				if i == 0 {
					v ^= notc[j*nw+w]
				}
				eq.S[i][k*nw+w] = v
				gt.S[i][j*nw+w] = s[j*nw+w] & notc[j*nw+w]
			}
		}
	}
	// Prefix products: eq column k becomes the AND of columns 0..k.
	for off := 1; off < m; off *= 2 {
		p := rp.and(e, eq.bcols(off, m), eq.bcols(0, m-off))
		for i, s := range p.S {
			if s != nil {
				copy(eq.S[i][off*nw:], s)
			}
		}
	}
	// suffix column j = the AND over the bits above j = eq column m-2-j.
	suffix := bshared{rows: low.rows, cols: m - 1}
	for i, s := range eq.S {
		if s == nil {
			continue
		}
		suffix.S[i] = make([]uint64, (m-1)*nw)
		for j := range m - 1 {
			copy(suffix.S[i][j*nw:(j+1)*nw], s[(m-2-j)*nw:(m-1-j)*nw])
		}
	}
	p := rp.and(e, gt.bcols(0, m-1), suffix)
	lt := bshared{rows: low.rows, cols: 1}
	for i, g := range gt.S {
		if g == nil {
			continue
		}
		v := append([]uint64(nil), g[(m-1)*nw:m*nw]...)
		for j := range m - 1 {
			for w := range nw {
				v[w] ^= p.S[i][j*nw+w]
			}
		}
		lt.S[i] = v
	}
	return lt
}

// toArith turns bits b over Z_2 into shares over Z_2^128 with random bits
// d held both ways (dBool over Z_2, d over Z_2^128, the same bits): it
// opens o = b xor d, uniform, and b = o + d - 2 o d, locally. One round.
func (rp *replicated) toArith(e *Engine, b, dBool bshared, d Shared) Shared {
	masked := bshared{rows: b.rows, cols: 1}
	for i, s := range b.S {
		if s != nil {
			masked.S[i] = make([]uint64, len(s))
			for k := range s {
				masked.S[i][k] = s[k] ^ dBool.S[i][k]
			}
		}
	}
	o := rp.bopen(e, masked)
	bit := func(r int) uint64 { return o[r/64] >> (r % 64) & 1 }
	return e.affine(d, func(r, _ int) Word {
		if bit(r) == 1 {
			return one.Neg()
		}
		return one
	}, func(r, _ int) Word { return Word{0, bit(r)} })
}
