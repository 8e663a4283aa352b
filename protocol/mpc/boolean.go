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

// shl returns x << d (local).
func (e *Engine) shl(x Shared, d uint) Shared {
	return e.bitwise(x, func(_ int, w Word) Word { return w.Shl(d) }, nil)
}

// ands returns every X AND Y (bitwise, entrywise), in one resharing round:
// party i's term x_i (y_i xor y_(i+1)) xor x_(i+1) y_i.
func (rp *replicated) ands(e *Engine, ps ...Product) []Shared {
	zs := make([]Shared, len(ps))
	for n, p := range ps {
		z := Shared{R: p.X.R, C: p.X.C, S: make([]Mat, 3)}
		for i := range 3 {
			if !e.runs(i) {
				continue
			}
			j := (i + 1) % 3
			xi, xj, yi, yj := p.X.S[i].V, p.X.S[j].V, p.Y.S[i].V, p.Y.S[j].V
			t := NewMat(p.X.R, p.X.C)
			for k := range t.V {
				t.V[k] = xi[k].And(yi[k].Xor(yj[k])).Xor(xj[k].And(yi[k]))
			}
			z.S[i] = t
		}
		zs[n] = z
	}
	return rp.reshare(e, zs, true)
}

// openXor opens x over Z_2 (checked as open checks words).
func (rp *replicated) openXor(e *Engine, x Shared) Mat {
	out := NewMat(x.R, x.C)
	if e.Me < 0 {
		e.round(x.R*x.C + 2)
		for k := range out.V {
			out.V[k] = x.S[0].V[k].Xor(x.S[1].V[k]).Xor(x.S[2].V[k])
		}
		return out
	}
	me, next := e.Me, (e.Me+1)%3
	got := rp.openRound(e, x.S[me].V, x.S[next].V)
	for k := range out.V {
		out.V[k] = x.S[me].V[k].Xor(x.S[next].V[k]).Xor(got[k])
	}
	return out
}

// makeEdaBits makes n words r uniform over Z_2^128, each shared over
// Z_2^128 and bit by bit over Z_2 (edaBits: Escudero, Ghosh, Keller,
// Rachuri and Scholl, CRYPTO 2020), in 9 rounds of ANDs: r = r_0 + r_1 +
// r_2 with r_j drawn from component j's stream, so that the sharing over
// Z_2^128 whose component j is r_j costs nothing and each party lacks one
// r_j; over Z_2, B_j (component j r_j, the others zero) are added by a
// carry-save layer, s = B_0 xor B_1 xor B_2 and the carries maj(B_0, B_1,
// B_2) (one AND), then a Kogge-Stone adder of s and the carries shifted
// (Kogge and Stone 1973: the generate bits, one AND, and 7 levels of the
// prefix, two ANDs a level but the last).
func (rp *replicated) makeEdaBits(e *Engine, n int) (arith, bin Shared) {
	part, arith := e.single(func(j int) Mat { return rp.prss.random(j, n, 1) })
	a, b, c := part[0], part[1], part[2]
	s := e.xor(e.xor(a, b), c)
	// maj(a, b, c) = (a xor c)(b xor c) xor c; the carries move up a bit.
	t := e.shl(e.xor(rp.ands(e, Product{e.xor(a, c), e.xor(b, c)})[0], c), 1)
	g, p := rp.ands(e, Product{s, t})[0], e.xor(s, t)
	prop := p
	for d := uint(1); d < 128; d *= 2 {
		ps := []Product{{prop, e.shl(g, d)}}
		if 2*d < 128 {
			ps = append(ps, Product{prop, e.shl(prop, d)})
		}
		out := rp.ands(e, ps...)
		g = e.xor(g, out[0])
		if len(out) > 1 {
			prop = out[1]
		}
	}
	// Bit i of the sum is p_i xor the carry into i.
	return arith, e.xor(p, e.shl(g, 1))
}

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
// borrow. The comparison of the public c' = c mod 2^127 with r' = r mod
// 2^127, bits over Z_2 (Catrina and de Hoogh 2010): r' > c' where, at the
// highest bit where they differ, r' has the one, so [c' < r'] is the xor
// over bits j of (r_j and not c_j) and the and of the equalities above j,
// which a prefix of 7 rounds of ANDs gives (each word holding a value's
// 127 bits), then one round for the products (at most one is set, so
// their xor is their sum). The result comes back to Z_2^128 with a daBit
// (toArith). 1 + 7 + 1 + 1 rounds, and the pools' when they run dry.
func (rp *replicated) ltz(e *Engine, x Shared, _ uint) (Shared, error) {
	n := x.R
	r, rb := rp.edaBits(e, n)
	d, dx, err := rp.randomBits(e, n)
	if err != nil {
		return Shared{}, err
	}
	c := e.open(e.Add(x, r))[0].V
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
	// neg = parity(p) xor r_127 xor c_127, in bit 0: the parity is linear.
	neg := e.each(p, func(i int, s Mat) Mat {
		out := NewMat(n, 1)
		for k, w := range s.V {
			v := uint64(bits.OnesCount64(w.Hi)+bits.OnesCount64(w.Lo))&1 ^ rb.S[i].V[k].Hi>>63
			if i == 0 {
				v ^= c[k].Hi >> 63
			}
			out.V[k] = Word{0, v}
		}
		return out
	})
	return rp.toArith(e, neg, dx, d), nil
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
