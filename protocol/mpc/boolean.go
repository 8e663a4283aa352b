package mpc

import "math/bits"

// Sharings over Z_2 (the replicated backend's comparisons): a Shared whose
// components are combined by exclusive or, x = x_0 xor x_1 xor x_2, bit by
// bit, each word holding the 128 bits of one value, party i holding x_i
// and x_(i+1) as with words. Exclusive or, and with a public word and
// shifts are local; an AND is a resharing as a product is, one bit a bit.

// xor returns x xor y (local).
func (e *Engine) xor(x, y Shared) Shared {
	return e.each(x, func(i int, s Mat) Mat { return xorMat(s, y.S[i]) })
}

// bitwise returns f applied to every word of every component, with the
// public word c(k) xored into component 0's (f linear over Z_2: a shift,
// an and with a public word).
func (e *Engine) bitwise(x Shared, f func(k int, w Word) Word, c func(k int) Word) Shared {
	return e.each(x, func(i int, s Mat) Mat {
		out := NewMat(s.R, s.C)
		for k, w := range s.V {
			out.V[k] = f(k, w)
			if i == 0 && c != nil {
				out.V[k] = out.V[k].Xor(c(k))
			}
		}
		return out
	})
}

// ands returns every X AND Y (bitwise, entrywise), in one round: Beaver
// products on verified triples over Z_2.
func (rp *replicated) ands(e *Engine, ps ...Product) []Shared { return rp.beaver(e, true, ps) }

// openXor opens x over Z_2 (checked as open checks words).
func (rp *replicated) openXor(e *Engine, x Shared) Mat { return rp.openAs(e, true, []Shared{x})[0] }

// makeEdaBits makes n words r uniform over Z_2^128, each shared over
// Z_2^128 and bit by bit over Z_2 (edaBits: Escudero, Ghosh, Keller,
// Rachuri and Scholl, CRYPTO 2020): r = r_0 + r_1 + r_2 with r_j drawn
// from component j's stream, so that the sharing over Z_2^128 whose
// component j is r_j costs nothing and each party lacks one r_j. Over
// Z_2, B_j (component j r_j, the others zero) are added bit-sliced (a
// word holds one bit of 128 values: sliced) by a carry-save layer, s =
// B_0 xor B_1 xor B_2 and the carries maj(B_0, B_1, B_2) (one AND), then
// a ripple-carry adder of s and the carries shifted, one AND a bit: about
// two words of ANDs an edaBit in 127 rounds a batch (a batch is a
// conversion chunk or more: preprocessing, off the programs' path; a
// log-depth adder of whole words took 15 words in 9 rounds).
func (rp *replicated) makeEdaBits(e *Engine, n int) (arith, bin Shared) {
	groups := (n + 127) / 128
	rp.reserve(e, true, 254*groups) // the ANDs below, a word a group each
	part, arith := e.single(func(j int) Mat { return rp.prss.random(j, n, 1) })
	a, b, c := e.sliced(part[0]), e.sliced(part[1]), e.sliced(part[2])
	s := e.xor(e.xor(a, b), c)
	// maj(a, b, c) = (a xor c)(b xor c) xor c: bit j's carry goes into
	// bit j + 1 (v below).
	t := e.xor(rp.ands(e, Product{e.xor(a, c), e.xor(b, c)})[0], c)
	u := func(j int) Shared { return e.Rows(s, j, 1) }
	v := func(j int) Shared { return e.Rows(t, j-1, 1) }
	// The carry into bit j: none into bits 0 and 1 (v_0 = 0), then
	// k_(j+1) = maj(u_j, v_j, k_j) = k_j xor (u_j xor k_j)(v_j xor k_j).
	sum := make([]Shared, 128)
	sum[0], sum[1] = u(0), e.xor(u(1), v(1))
	k := rp.ands(e, Product{u(1), v(1)})[0]
	for j := 2; j < 128; j++ {
		sum[j] = e.xor(e.xor(u(j), v(j)), k)
		if j < 127 {
			k = e.xor(k, rp.ands(e, Product{e.xor(u(j), k), e.xor(v(j), k)})[0])
		}
	}
	return arith, e.unsliced(e.Reshape(e.Stack(sum...), 128, groups), n)
}

// sliced returns the column x (a value's bits in a word, n values) bit-
// sliced: a 128 x ceil(n/128) sharing whose row j, column g holds bit j
// of values 128 g to 128 g + 127 (value 128 g + l in bit l), the last
// column padded with zeros. Linear over Z_2, so local.
func (e *Engine) sliced(x Shared) Shared {
	return e.each(x, func(_ int, s Mat) Mat { return sliceWords(s.V) })
}

// sliceWords is sliced for one component's (or a public column's) words.
func sliceWords(v []Word) Mat {
	groups := (len(v) + 127) / 128
	out := NewMat(128, groups)
	var block [128]Word
	for g := range groups {
		clear(block[:])
		copy(block[:], v[128*g:min(128*g+128, len(v))])
		transpose128(&block)
		for j := range 128 {
			out.V[j*groups+g] = block[j]
		}
	}
	return out
}

// unsliced is sliced's inverse for n values: a column again (local).
func (e *Engine) unsliced(x Shared, n int) Shared {
	groups := x.C
	return e.each(x, func(_ int, s Mat) Mat {
		out := NewMat(n, 1)
		var block [128]Word
		for g := range groups {
			for j := range 128 {
				block[j] = s.V[j*groups+g]
			}
			transpose128(&block)
			copy(out.V[128*g:min(128*g+128, n)], block[:])
		}
		return out
	})
}

// transpose128 transposes the 128 x 128 bit matrix m in place (bit j of
// m[i] to bit i of m[j]): swaps of s x s blocks for s = 64 down to 1.
func transpose128(m *[128]Word) {
	for s := uint(64); s > 0; s /= 2 {
		mask := sliceMasks[bits.Len(s)]
		for i := 0; i < 128; i++ {
			if uint(i)&s != 0 {
				continue
			}
			t := m[i].Shr(s).Xor(m[i+int(s)]).And(mask)
			m[i+int(s)] = m[i+int(s)].Xor(t)
			m[i] = m[i].Xor(t.Shl(s))
		}
	}
}

// sliceMasks[k] has bit j set where bit k - 1 of j is clear (for s = 2^(k-1)).
var sliceMasks = func() (m [8]Word) {
	for k := 1; k < 8; k++ {
		s := uint(1) << (k - 1)
		for j := uint(0); j < 128; j++ {
			if j&s == 0 {
				m[k] = m[k].Xor(Pow2(j))
			}
		}
	}
	return m
}()

// edaBits returns n edaBits from the pool, which makeEdaBits refills with
// at least bitBatch; as randomBits, the pool is read in place.
func (rp *replicated) edaBits(e *Engine, n int) (arith, bin Shared) {
	if rp.eda.R < n {
		fresh, fb := rp.makeEdaBits(e, max(n-rp.eda.R, rp.batchSize()))
		if rp.eda.R > 0 {
			fresh, fb = e.Stack(rp.eda, fresh), e.Stack(rp.edaBin, fb)
		}
		rp.eda, rp.edaBin = fresh, fb
	}
	arith, rp.eda = e.split(rp.eda, n)
	bin, rp.edaBin = e.split(rp.edaBin, n)
	return arith, bin
}

// ltz: the parties open c = x + r for an edaBit r, uniform over Z_2^128
// (perfectly hiding, whatever x is), and x < 0 exactly when bit 127 of
// x = c - r is set: c_127 xor r_127 xor [c mod 2^127 < r mod 2^127], the
// borrow, which a comparison of the public c' = c mod 2^127 with r' = r
// mod 2^127 bit by bit over Z_2 gives (Catrina and de Hoogh 2010): r' >
// c' where, at the highest bit where they differ, r' has the one. For
// many values the comparison runs bit-sliced (borrowSliced: about two
// words of ANDs a value), for a few a value's bits in a word
// (borrowWords: eight words a value, no padding to 128 values). The
// result comes back to Z_2^128 with a daBit (toArith). 1 + 7 + 1 rounds
// (1 + 8 + 1 for a few values), and the pools' when they run dry.
func (rp *replicated) ltz(e *Engine, x Shared, _ uint) (Shared, error) {
	n := x.R
	r, rb := rp.edaBits(e, n)
	d, dx, err := rp.randomBits(e, n)
	if err != nil {
		return Shared{}, err
	}
	sliced := n >= slicedFrom
	if sliced {
		rp.reserve(e, true, 2*127*((n+127)/128))
	} else {
		rp.reserve(e, true, 8*n)
	}
	c := e.open(e.Add(x, r))[0].V
	var neg Shared
	if sliced {
		neg = rp.borrowSliced(e, c, rb)
	} else {
		neg = rp.borrowWords(e, c, rb)
	}
	return rp.toArith(e, neg, dx, d), nil
}

// slicedFrom is the fewest values compared bit-sliced: a group of 128
// costs about 250 words of ANDs, a value's bits in a word 8 a value.
const slicedFrom = 32

// borrowWords returns, in bit 0 of each value's word, c_127 xor r_127
// xor the borrow, with r's bits rb a value's in a word: [c' < r'] is the
// xor over bits j of (r_j and not c_j) and the and of the equalities above
// j, which a prefix of 7 rounds of ANDs gives, then one round for the
// products (at most one is set, so their xor is their sum). The xor of a
// word's bits is linear.
func (rp *replicated) borrowWords(e *Engine, c []Word, rb Shared) Shared {
	low := Pow2(127).Sub(one)
	top := Pow2(127)
	// eq: bit j is [r_j = c_j] for j < 127, bit 127 set (nothing above
	// the comparison); gt: bit j is r_j and not c_j.
	eq := e.bitwise(rb, func(_ int, w Word) Word { return w.And(low) }, func(k int) Word { return c[k].Not().And(low).Xor(top) })
	gt := e.bitwise(rb, func(k int, w Word) Word { return w.And(c[k].Not()).And(low) }, nil)
	// After the prefix, bit j of eq is the and of bits j to 127 (ones
	// shifted in from above).
	for s := uint(1); s < 128; s *= 2 {
		fill := Word{}.Not().Shl(128 - s)
		sh := e.bitwise(eq, func(_ int, w Word) Word { return w.Shr(s) }, func(int) Word { return fill })
		eq = rp.ands(e, Product{eq, sh})[0]
	}
	above := e.bitwise(eq, func(_ int, w Word) Word { return w.Shr(1) }, func(int) Word { return top })
	p := rp.ands(e, Product{gt, above})[0]
	return e.each(p, func(i int, s Mat) Mat {
		out := NewMat(len(c), 1)
		for k, w := range s.V {
			v := uint64(bits.OnesCount64(w.Hi)+bits.OnesCount64(w.Lo))&1 ^ rb.S[i].V[k].Hi>>63
			if i == 0 {
				v ^= c[k].Hi >> 63
			}
			out.V[k] = Word{0, v}
		}
		return out
	})
}

// borrowSliced is borrowWords bit-sliced (a word holds one bit of 128
// values): with e_j = [r_j = c_j] and g_j = r_j and not c_j (local, c
// public), the borrow of bits 0 to 126 is a tree of 7 levels over the
// (g, e) of bit ranges, the range above u and below l combining to (g_u
// xor e_u g_l, e_u e_l) (two ANDs, one at the root, whose e nothing
// needs): 251 words of ANDs a group of 128 values.
func (rp *replicated) borrowSliced(e *Engine, c []Word, rb Shared) Shared {
	n := len(c)
	rs, cs := e.sliced(rb), sliceWords(c) // cs public
	groups := rs.C
	row := func(j int) []Word { return cs.V[j*groups : (j+1)*groups] }
	type node struct{ g, e Shared }
	nodes := make([]node, 127)
	for j := range nodes {
		cj := row(j)
		r := e.Rows(rs, j, 1)
		nodes[j].e = e.bitwise(r, func(_ int, w Word) Word { return w }, func(k int) Word { return cj[k].Not() })
		nodes[j].g = e.bitwise(r, func(k int, w Word) Word { return w.And(cj[k].Not()) }, nil)
	}
	for len(nodes) > 1 {
		var ps []Product
		for k := 0; k+1 < len(nodes); k += 2 {
			lo, hi := nodes[k], nodes[k+1]
			ps = append(ps, Product{hi.e, lo.g})
			if len(nodes) > 2 {
				ps = append(ps, Product{hi.e, lo.e})
			}
		}
		out := rp.ands(e, ps...)
		next := make([]node, 0, (len(nodes)+1)/2)
		for k := 0; k+1 < len(nodes); k += 2 {
			nd := node{g: e.xor(nodes[k+1].g, out[0])}
			if len(nodes) > 2 {
				nd.e, out = out[1], out[2:]
			} else {
				out = out[1:]
			}
			next = append(next, nd)
		}
		if len(nodes)%2 == 1 {
			next = append(next, nodes[len(nodes)-1])
		}
		nodes = next
	}
	top := row(127)
	neg := e.bitwise(e.xor(nodes[0].g, e.Rows(rs, 127, 1)), func(_ int, w Word) Word { return w }, func(k int) Word { return top[k] })
	// Back to a value a word, in bit 0.
	return e.each(neg, func(_ int, s Mat) Mat {
		out := NewMat(n, 1)
		for k := range out.V {
			out.V[k] = Word{0, s.V[k/128].Bit(uint(k % 128))}
		}
		return out
	})
}

// toArith turns bits b over Z_2 (in bit 0 of each word) into shares over
// Z_2^128 with daBits (Rotaru and Wood, INDOCRYPT 2019), random bits held
// both ways: d over Z_2^128 and dx over Z_2, the same bits. It opens o = b
// xor d, uniform, and b = o + d - 2 o d, locally. One round.
func (rp *replicated) toArith(e *Engine, b, dx, d Shared) Shared {
	o := rp.openXor(e, e.xor(b, dx))
	bit := func(r int) uint64 { return o.V[r].Lo & 1 }
	return e.affine(d, func(r, _ int) Word {
		if bit(r) == 1 {
			return one.Neg()
		}
		return one
	}, func(r, _ int) Word { return Word{0, bit(r)} })
}
