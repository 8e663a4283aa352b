package mpc

// Mat is a matrix of ring words, row-major: one party's share of a
// shared matrix, or a public (opened) matrix.
type Mat struct {
	R, C int
	V    []Word
}

// NewMat returns the r x c zero matrix.
func NewMat(r, c int) Mat { return Mat{r, c, make([]Word, r*c)} }

// At returns entry (i, j).
func (m Mat) At(i, j int) Word { return m.V[i*m.C+j] }

// Set sets entry (i, j).
func (m Mat) Set(i, j int, w Word) { m.V[i*m.C+j] = w }

// EncodeMat encodes a float matrix with f fractional bits (public
// constants and test inputs).
func EncodeMat(x [][]float64, f uint) Mat {
	m := NewMat(len(x), len(x[0]))
	for i, row := range x {
		for j, v := range row {
			m.Set(i, j, Encode(v, f))
		}
	}
	return m
}

// Decode reads the matrix as signed fixed point with f fractional bits
// (outputs only).
func (m Mat) Decode(f uint) [][]float64 {
	out := make([][]float64, m.R)
	for i := range out {
		out[i] = make([]float64, m.C)
		for j := range out[i] {
			out[i][j] = m.At(i, j).Signed(f)
		}
	}
	return out
}

// Identity returns the n x n identity scaled by w.
func Identity(n int, w Word) Mat {
	m := NewMat(n, n)
	for i := range n {
		m.Set(i, i, w)
	}
	return m
}

func add(a, b Mat) Mat {
	out := NewMat(a.R, a.C)
	for i := range a.V {
		out.V[i] = a.V[i].Add(b.V[i])
	}
	return out
}

func xorMat(a, b Mat) Mat {
	out := NewMat(a.R, a.C)
	for i := range a.V {
		out.V[i] = a.V[i].Xor(b.V[i])
	}
	return out
}

func sub(a, b Mat) Mat {
	out := NewMat(a.R, a.C)
	for i := range a.V {
		out.V[i] = a.V[i].Sub(b.V[i])
	}
	return out
}

func scale(a Mat, k Word) Mat {
	out := NewMat(a.R, a.C)
	for i := range a.V {
		out.V[i] = a.V[i].Mul(k)
	}
	return out
}

// Transpose returns the transpose.
func (m Mat) Transpose() Mat {
	out := NewMat(m.C, m.R)
	for i := range m.R {
		for j := range m.C {
			out.Set(j, i, m.At(i, j))
		}
	}
	return out
}

// mul returns a b mod 2^128.
func mul(a, b Mat) Mat {
	out := NewMat(a.R, b.C)
	for i := range a.R {
		row := out.V[i*b.C : (i+1)*b.C]
		for k := range a.C {
			x := a.V[i*a.C+k]
			if x == (Word{}) {
				continue
			}
			brow := b.V[k*b.C : (k+1)*b.C]
			for j, y := range brow {
				row[j] = row[j].Add(x.Mul(y))
			}
		}
	}
	return out
}

// hadamard returns a * b entrywise mod 2^128.
func hadamard(a, b Mat) Mat {
	out := NewMat(a.R, a.C)
	for i := range a.V {
		out.V[i] = a.V[i].Mul(b.V[i])
	}
	return out
}

// andMat returns a and b bit by bit.
func andMat(a, b Mat) Mat {
	out := NewMat(a.R, a.C)
	for i := range a.V {
		out.V[i] = a.V[i].And(b.V[i])
	}
	return out
}
