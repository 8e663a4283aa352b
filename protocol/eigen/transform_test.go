package eigen

import (
	"testing"

	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/he/hefloat"
	"github.com/tuneinsight/lattigo/v5/mhe"
	"github.com/tuneinsight/lattigo/v5/mhe/mhefloat"
	"github.com/tuneinsight/lattigo/v5/utils/bignum"
)

// BenchmarkRound compares one collective refresh with one masked linear
// transform (mhefloat MaskedLinearTransformationProtocol, decode, a slot
// permutation, encode: the "layout at a refresh" of the design notes) for
// 3 members at the solver's ring: the cost of moving a layout change into
// the refresh.
func BenchmarkRound(b *testing.B) {
	com, err := NewCommittee(3, nil, []byte("round"))
	if err != nil {
		b.Fatal(err)
	}
	params := com.Params
	v := make([]float64, params.MaxSlots())
	for i := range v {
		v[i] = float64(i%97) / 97
	}
	pt := hefloat.NewPlaintext(params, params.MaxLevel())
	if err := hefloat.NewEncoder(params).Encode(v, pt); err != nil {
		b.Fatal(err)
	}
	ct, err := rlwe.NewEncryptor(params, com.PK).EncryptNew(pt)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("refresh", func(b *testing.B) {
		for range b.N {
			c := ct.CopyNew()
			if err := com.Refresh(c); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("masked-transform", func(b *testing.B) {
		tf := &mhefloat.MaskedLinearTransformationFunc{Decode: true, Encode: true, Func: func(x []*bignum.Complex) {
			// A cyclic shift by one slot: any slot map costs the same
			// decode and encode.
			first := x[0]
			copy(x, x[1:])
			x[len(x)-1] = first
		}}
		var protos []mhefloat.MaskedLinearTransformationProtocol
		for range com.Members() {
			p, err := mhefloat.NewMaskedLinearTransformationProtocol(params, params, 128, params.Xe())
			if err != nil {
				b.Fatal(err)
			}
			protos = append(protos, p)
		}
		for range b.N {
			c := ct.CopyNew()
			c.Resize(1, com.MinRefreshLevel())
			crp := protos[0].SampleCRP(params.MaxLevel(), com.crs)
			var agg mhe.RefreshShare
			for i, sk := range com.shares {
				sh := protos[i].AllocateShare(com.MinRefreshLevel(), params.MaxLevel())
				if err := protos[i].GenShare(sk, sk, com.LogBound(), c, crp, tf, &sh); err != nil {
					b.Fatal(err)
				}
				if i == 0 {
					agg = sh
					continue
				}
				if err := protos[0].AggregateShares(&agg, &sh, &agg); err != nil {
					b.Fatal(err)
				}
			}
			out := hefloat.NewCiphertext(params, 1, params.MaxLevel())
			if err := protos[0].Transform(c, tf, crp, agg, out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rotation", func(b *testing.B) {
		com2, err := NewCommittee(3, []int{1}, []byte("round"))
		if err != nil {
			b.Fatal(err)
		}
		eval := hefloat.NewEvaluator(com2.Params, com2.Evk)
		c, err := rlwe.NewEncryptor(params, com2.PK).EncryptNew(pt)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for range b.N {
			if _, err := eval.RotateNew(c, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
}
