package job

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/big"
	"runtime"
	"slices"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/fixedpoint"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
	"github.com/fedpca/fedpca/protocol/zk"
	"github.com/tuneinsight/lattigo/v5/core/rlwe"
	"github.com/tuneinsight/lattigo/v5/mhe"
)

// ReadReport is what reading an owner's rows for a job found. It is for the
// owner alone (its log and local status): nothing in it may leave the owner.
type ReadReport struct {
	// Rows are in the statistics; Clipped of them were scaled down to the
	// clip norm.
	Rows, Clipped int64
	// Clamped values were outside their feature's declared [min, max].
	Clamped int64
	// Skipped rows could not be read (a cell that is not a number, an
	// unknown label, a wrong number of fields): the row policy skips them.
	Skipped int64
	// Dropped rows came after the job's max_owner_rows readable rows.
	Dropped int64
	// Missing rows had a missing value that the schema's missing policy
	// drops; Filled rows had one it filled in (and are in Rows).
	Missing int64 `json:",omitempty"`
	Filled  int64 `json:",omitempty"`
	// Examples describe the first few skipped rows (line, column, what was
	// wrong), for the owner's operator.
	Examples []string
}

// ClippedFraction is the fraction of the rows used that were clipped: a
// clip norm that clips most rows makes the release the PCA of rescaled rows
// (see the schema's clip_norm and the profile job).
func (r ReadReport) ClippedFraction() float64 {
	if r.Rows == 0 {
		return 0
	}
	return float64(r.Clipped) / float64(r.Rows)
}

// maxExamples bounds ReadReport.Examples.
const maxExamples = 5

// ReadStatistics reads an owner's rows from a CSV file (any dialect
// schema.NewCSVRows reads); see ReadRows.
func ReadStatistics(s *Spec, sch *schema.Schema, csv io.Reader) (*stats.Accumulator, ReadReport, error) {
	rows, err := schema.NewCSVRows(csv, schema.CSVOptions{})
	if err != nil {
		return nil, ReadReport{}, err
	}
	return ReadRows(s, sch, rows)
}

// ReadRows streams an owner's rows through the schema's options and row map
// into an accumulator for the job's layout. The row policy never depends on
// what the rows hold, so that one row cannot change whether the owner takes
// part: a row that cannot be read is skipped, and the rows after the first
// max_owner_rows readable ones are dropped (the overflow check assumes at
// most that many per owner); both are counted in the report. An error means
// the source itself does not fit the schema (its columns) or cannot be
// read. Rows that the schema's missing policy drops are counted apart.
//
// The rows are mapped and accumulated on GOMAXPROCS goroutines (see
// pipeline.go); the result is the same integers as a single reader's.
func ReadRows(s *Spec, sch *schema.Schema, rows schema.Rows) (*stats.Accumulator, ReadReport, error) {
	return ReadRowsWorkers(s, sch, rows, runtime.GOMAXPROCS(0))
}

// NormBuckets returns the bucket map of a norms job: the number of edges
// at or below the norm of the (quantized, clipped) row, computed exactly in
// integers: ||q||^2 >= ceil((2^g e)^2) for each edge e. Not safe for
// concurrent use.
func NormBuckets(edges []fixedpoint.Decimal, bits uint) func(q []int64) int {
	thresholds := make([]*big.Int, len(edges))
	for i, e := range edges {
		x := new(big.Rat).Mul(e.Rat(), new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), bits)))
		x.Mul(x, x)
		q, m := new(big.Int).QuoRem(x.Num(), x.Denom(), new(big.Int))
		if m.Sign() > 0 {
			q.Add(q, big.NewInt(1))
		}
		thresholds[i] = q
	}
	var sum, t big.Int
	return func(q []int64) int {
		sum.SetInt64(0)
		for _, x := range q {
			t.SetInt64(x)
			sum.Add(&sum, t.Mul(&t, &t))
		}
		k, _ := slices.BinarySearchFunc(thresholds, &sum, func(th, target *big.Int) int {
			if th.Cmp(target) <= 0 {
				return -1
			}
			return 1
		})
		return k
	}
}

// MarginalBuckets returns the bucket map of a marginals job for d features:
// it replaces each value of a (quantized) row by its bucket, the number of
// the grid's inner edges at or below it, computed exactly in integers:
// q_i >= ceil(2^g (lo + (hi - lo) j / K)) for j = 1 .. K-1, with the
// feature's window [lo, hi] ([-1, 1] without windows) and K buckets.
func MarginalBuckets(s *Spec, d int, bits uint) func(q []int64) {
	thresholds := make([][]int64, d)
	one := new(big.Rat).SetInt(new(big.Int).Lsh(big.NewInt(1), bits))
	for i := range thresholds {
		lo, hi := big.NewRat(-1, 1), big.NewRat(1, 1)
		if len(s.Windows) > 0 {
			lo, hi = s.Windows[i].Lo.Rat(), s.Windows[i].Hi.Rat()
		}
		width := new(big.Rat).Sub(hi, lo)
		for j := 1; j < s.Buckets; j++ {
			e := new(big.Rat).Mul(width, big.NewRat(int64(j), int64(s.Buckets)))
			e.Add(e, lo).Mul(e, one)
			thresholds[i] = append(thresholds[i], ceilInt64(e))
		}
	}
	return func(q []int64) {
		for i, x := range q {
			k, _ := slices.BinarySearchFunc(thresholds[i], x, func(th, target int64) int {
				if th <= target {
					return -1
				}
				return 1
			})
			q[i] = int64(k)
		}
	}
}

// ceilInt64 returns the ceiling of r, saturated to the int64 range (a
// threshold beyond every value a row can hold).
func ceilInt64(r *big.Rat) int64 {
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	switch {
	case q.Cmp(big.NewInt(math.MaxInt64)) > 0:
		return math.MaxInt64
	case q.Cmp(big.NewInt(math.MinInt64)) < 0:
		return math.MinInt64
	}
	return q.Int64()
}

// OwnerCiphertexts packs an owner's statistics, adds its DP noise share (in
// the owners and all plans; drawn from rnd, crypto/rand when nil) and
// encrypts them under the committee key, returning the witness of each
// ciphertext for its proof (ProveUpload).
func OwnerCiphertexts(s *Spec, sch *schema.Schema, p he.Params, committeeKey *rlwe.PublicKey, acc *stats.Accumulator, rnd io.Reader) ([]*rlwe.Ciphertext, []zk.Witness, error) {
	enc, err := he.NewEncryptor(p, committeeKey)
	if err != nil {
		return nil, nil, err
	}
	return EncryptShare(s, sch, enc, acc, rnd)
}

// EncryptShare is OwnerCiphertexts with an encryptor under the committee
// key, which may hold encryptions of zero prepared ahead
// (he.Encryptor.Prepare): EncryptValues of the packed statistics.
func EncryptShare(s *Spec, sch *schema.Schema, enc *he.Encryptor, acc *stats.Accumulator, rnd io.Reader) ([]*rlwe.Ciphertext, []zk.Witness, error) {
	return EncryptValues(s, sch, enc, 0, acc.Pack(), rnd)
}

func addChecked(dst, src []int64) error {
	for i, x := range src {
		s := dst[i] + x
		if (x > 0 && s < dst[i]) || (x < 0 && s > dst[i]) {
			return fmt.Errorf("int64 overflow at index %d", i)
		}
		dst[i] = s
	}
	return nil
}

// ServerNoise draws the noise share of the proxy (role dp.RoleProxy) or of
// one CSP member (dp.RoleCSP) for a seal at which `uploaded` owners are in
// the sum: its planned share plus any top-up for missing owners. It is all
// zeros when the party adds no noise. rnd nil means crypto/rand. A power
// job's rounds draw theirs with RoundNoise.
func ServerNoise(s *Spec, sch *schema.Schema, r dp.Role, uploaded int, rnd io.Reader) ([]int64, error) {
	return RoundNoise(s, sch, r, 0, uploaded, rnd)
}

// AddNoise adds the proxy's noise share to each ciphertext of the sum, in
// place (a components job's seal: its sum is not blinded, the conversion's
// own masks hide it).
func AddNoise(p he.Params, sum []*rlwe.Ciphertext, noise []int64) error {
	if want := p.Chunks(len(noise)); len(sum) != want {
		return fmt.Errorf("noise: %d ciphertexts for %d values, want %d", len(sum), len(noise), want)
	}
	plain := he.NewPlain(p)
	for i, ct := range sum {
		if err := plain.AddInt64(ct, p.Chunk(noise, i)); err != nil {
			return fmt.Errorf("noise of ciphertext %d: %w", i, err)
		}
	}
	return nil
}

// Blind adds the proxy's noise share and a fresh uniform mask (from rnd,
// crypto/rand when nil) to each ciphertext of the sum, in place, and returns
// the masks, which the proxy must keep durably until the job ends.
func Blind(p he.Params, sum []*rlwe.Ciphertext, noise []int64, rnd io.Reader) ([][]uint64, error) {
	if err := AddNoise(p, sum, noise); err != nil {
		return nil, fmt.Errorf("blind: %w", err)
	}
	plain := he.NewPlain(p)
	masks := make([][]uint64, len(sum))
	for i, ct := range sum {
		m, err := p.NewMask(rnd)
		if err != nil {
			return nil, err
		}
		if err := plain.AddMask(ct, m); err != nil {
			return nil, fmt.Errorf("blind ciphertext %d: %w", i, err)
		}
		masks[i] = m
	}
	return masks, nil
}

// Unblind removes the masks from the key-switched ciphertexts, in place.
func Unblind(p he.Params, switched []*rlwe.Ciphertext, masks [][]uint64) error {
	if len(switched) != len(masks) {
		return fmt.Errorf("unblind: %d ciphertexts, %d masks", len(switched), len(masks))
	}
	plain := he.NewPlain(p)
	for i, ct := range switched {
		if err := plain.Unmask(ct, masks[i]); err != nil {
			return fmt.Errorf("unblind ciphertext %d: %w", i, err)
		}
	}
	return nil
}

// SwitchShares computes a CSP member's key-switch shares of job jobID's
// blinded sum, re-randomised under the committee key (Rerandomise), to the
// user's key, with its noise share folded in (noise has the packed length;
// nil or all zeros for no noise).
func SwitchShares(p he.Params, m *he.Member, committeeKey *rlwe.PublicKey, jobID string, blinded []*rlwe.Ciphertext, userKey *rlwe.PublicKey, active []he.Point, noise []int64) ([]*mhe.PublicKeySwitchShare, error) {
	if want := p.Chunks(len(noise)); noise != nil && len(blinded) != want {
		return nil, fmt.Errorf("key switch: %d ciphertexts for %d noise values, want %d", len(blinded), len(noise), want)
	}
	blinded, err := Rerandomise(p, committeeKey, jobID, blinded)
	if err != nil {
		return nil, fmt.Errorf("key switch: %w", err)
	}
	out := make([]*mhe.PublicKeySwitchShare, len(blinded))
	for i, ct := range blinded {
		var chunk []int64
		if noise != nil {
			chunk = p.Chunk(noise, i)
		}
		s, err := m.KeySwitchShare(ct, userKey, active, chunk)
		if err != nil {
			return nil, fmt.Errorf("key switch ciphertext %d: %w", i, err)
		}
		out[i] = s
	}
	return out, nil
}

// CombineShares combines, for each ciphertext of job jobID's blinded sum
// re-randomised as the members did (Rerandomise), the shares of the active
// members (shares[member][ciphertext]).
func CombineShares(p he.Params, committeeKey *rlwe.PublicKey, jobID string, blinded []*rlwe.Ciphertext, shares [][]*mhe.PublicKeySwitchShare) ([]*rlwe.Ciphertext, error) {
	blinded, err := Rerandomise(p, committeeKey, jobID, blinded)
	if err != nil {
		return nil, fmt.Errorf("combine: %w", err)
	}
	out := make([]*rlwe.Ciphertext, len(blinded))
	for i, ct := range blinded {
		var s []*mhe.PublicKeySwitchShare
		for j, member := range shares {
			if len(member) != len(blinded) {
				return nil, fmt.Errorf("combine: member %d sent %d shares for %d ciphertexts", j, len(member), len(blinded))
			}
			s = append(s, member[i])
		}
		if out[i], err = he.CombineKeySwitch(p, ct, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// DecryptRelease decrypts the unblinded, key-switched ciphertexts with the
// user's secret key (which encrypt twice the release: he.SwitchFactor) and
// unpacks the release.
func DecryptRelease(s *Spec, sch *schema.Schema, p he.Params, sk *rlwe.SecretKey, cts []*rlwe.Ciphertext) (*stats.Release, error) {
	l, err := s.Layout(sch)
	if err != nil {
		return nil, err
	}
	vec, err := he.NewDecryptor(p, sk).DecryptSwitched(cts, l.Len())
	if err != nil {
		return nil, err
	}
	return stats.Unpack(l, sch.Bits, vec)
}

// Rerandomise returns each ciphertext of a verified sum plus the encryption
// of zero under the committee key that he.Rerandomise derives from it: the
// seed is the SHA-256 of the job ID, the ciphertext's index and count and
// its coefficients, so that every member and the proxy compute the same
// ciphertexts from the sum they hold, and no one picks the randomness
// (docs/PROTOCOL.md section 5.2). Members switch and convert, and the proxy
// combines, only re-randomised sums.
func Rerandomise(p he.Params, committeeKey *rlwe.PublicKey, jobID string, cts []*rlwe.Ciphertext) ([]*rlwe.Ciphertext, error) {
	out := make([]*rlwe.Ciphertext, len(cts))
	for i, ct := range cts {
		if ct == nil || ct.Degree() != 1 {
			return nil, fmt.Errorf("re-randomise ciphertext %d: not a ciphertext of degree 1", i)
		}
		h := sha256.New()
		for _, f := range [][]byte{[]byte("fedpca re-randomisation seed v1"), []byte(jobID), []byte(fmt.Sprintf("%d/%d", i, len(cts)))} {
			h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(f))))
			h.Write(f)
		}
		var buf []byte
		for _, poly := range ct.Value {
			for _, limb := range poly.Coeffs {
				buf = buf[:0]
				for _, c := range limb {
					buf = binary.LittleEndian.AppendUint64(buf, c)
				}
				h.Write(buf)
			}
		}
		var err error
		if out[i], err = he.Rerandomise(p, committeeKey, h.Sum(nil), ct); err != nil {
			return nil, fmt.Errorf("re-randomise ciphertext %d: %w", i, err)
		}
	}
	return out, nil
}
