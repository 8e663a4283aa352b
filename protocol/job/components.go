package job

import (
	"errors"
	"fmt"
	"math"

	"github.com/fedpca/fedpca/protocol/analysis"
	"github.com/fedpca/fedpca/protocol/eigen"
	"github.com/fedpca/fedpca/protocol/he"
	"github.com/fedpca/fedpca/protocol/mpc"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

// A components release's output, as the members' program leaves it in
// shares (protocol/eigen PCAJob.Run): one column of words, the k
// eigenvalues of cov / c^2 (fixed point, F fractional bits, descending),
// then the d x k eigenvectors (row-major, fixed point), then n (the
// classes' counts summed, an integer at scale 2^g). Each active member
// seals its share of the column to the spec's ResultKey (OutputAAD); the
// user opens the t boxes, adds the shares and decodes.

// OutputLen is the output column's length for d features and k components.
func OutputLen(d, k int) int { return k + d*k + 1 }

// OutputAAD binds a member's sealed output share to the job and the
// member's point.
func OutputAAD(jobID string, point uint32) []byte {
	return fmt.Appendf(nil, "fedpca/components-output\x00%s\x00%d", jobID, point)
}

// EncodeShare lays words out as bytes (16 per word, big endian): an output
// share, a frame of an opening or of a correction.
func EncodeShare(words []mpc.Word) []byte {
	out := make([]byte, 0, 16*len(words))
	for _, w := range words {
		out = w.AppendBytes(out)
	}
	return out
}

// SumShares adds the members' output shares (EncodeShare's bytes).
func SumShares(d, k int, shares ...[]byte) ([]mpc.Word, error) {
	if len(shares) == 0 {
		return nil, errors.New("components output: no share")
	}
	n := OutputLen(d, k)
	sum := make([]mpc.Word, n)
	for i, b := range shares {
		if len(b) != 16*n {
			return nil, fmt.Errorf("components output: share %d has %d bytes, want %d", i, len(b), 16*n)
		}
		for j := range sum {
			sum[j] = sum[j].Add(mpc.WordFromBytes(b[16*j:]))
		}
	}
	return sum, nil
}

// CombineShares is the user's step of a components release: the
// computing members' output shares (EncodeShare's bytes, in party order:
// their points ascending) added, with a dealer; with the members' own
// randomness, each of the three parties' two components of the output
// checked against the other copy and added (mpc.CombineReplicated: a party
// that changed its components is caught).
func (s *Spec) CombineShares(d int, shares [][]byte) ([]mpc.Word, error) {
	if s.Dealt() {
		return SumShares(d, s.K, shares...)
	}
	if len(shares) != ReplicatedParties {
		return nil, fmt.Errorf("components output: %d shares, want one from each of the %d computing members", len(shares), ReplicatedParties)
	}
	n := OutputLen(d, s.K)
	var parts [ReplicatedParties][]mpc.Word
	for i, b := range shares {
		if len(b) != 32*n {
			return nil, fmt.Errorf("components output: share %d has %d bytes, want %d (two components of %d words)", i, len(b), 32*n, n)
		}
		parts[i] = make([]mpc.Word, 2*n)
		for j := range parts[i] {
			parts[i][j] = mpc.WordFromBytes(b[16*j:])
		}
	}
	return mpc.CombineReplicated(parts)
}

// CheckOutputPoints checks the points of the members whose output shares
// make a components release: with a dealer the job's threshold of its
// committee's members, with the members' own randomness three, in point
// order.
func (s *Spec) CheckOutputPoints(points []uint32) error {
	c := s.Committee()
	if s.Dealt() {
		active := make([]he.Point, len(points))
		for i, p := range points {
			active[i] = he.Point(p)
		}
		return c.CheckActive(active)
	}
	if len(points) != ReplicatedParties {
		return fmt.Errorf("%d members' outputs, want the %d that computed", len(points), ReplicatedParties)
	}
	for i, p := range points {
		if p < 1 || int(p) > c.N || (i > 0 && p <= points[i-1]) {
			return fmt.Errorf("points %v: want %d distinct members of the committee of %d, in order", points, ReplicatedParties, c.N)
		}
	}
	return nil
}

// Output is a decoded components release.
type Output struct {
	// Values are the top k eigenvalues of the covariance (in the schema's
	// units squared), descending; Vectors the unit eigenvectors (k rows of
	// d); N the number of rows (noisy under DP).
	Values  []float64
	Vectors [][]float64
	N       float64
}

// DecodeOutput reads the summed output column: the eigenvalues of
// cov / c^2 scaled back by c^2 = (bound / 2^g)^2, the vectors, n / 2^g.
func DecodeOutput(sum []mpc.Word, d, k int, f uint, bits uint, bound int64) (*Output, error) {
	if len(sum) != OutputLen(d, k) {
		return nil, fmt.Errorf("components output: %d words, want %d", len(sum), OutputLen(d, k))
	}
	c := math.Ldexp(float64(bound), -int(bits))
	out := &Output{Values: make([]float64, k), Vectors: make([][]float64, k)}
	for i := range k {
		out.Values[i] = sum[i].Signed(f) * c * c
		out.Vectors[i] = make([]float64, d)
		for r := range d {
			out.Vectors[i][r] = sum[k+r*k+i].Signed(f)
		}
	}
	out.N = math.Ldexp(sum[k+d*k].Signed(0), -int(bits))
	return out, nil
}

// SolveKeyContext is the signature context of a member's X25519 key for a
// job's openings (seal.Sign).
const SolveKeyContext = "solve-exchange-key-v1"

// SolveKeyMessage is what a member signs of its key for the job's
// openings: the job, its point and the key.
func SolveKeyMessage(jobID string, point uint32, key []byte) []byte {
	return fmt.Appendf(nil, "%s\x00%d\x00%x", jobID, point, key)
}

// OpeningAAD binds a sealed frame of an opening to the job, the round,
// the frame's index and both parties.
func OpeningAAD(jobID string, round uint64, frame int, from, to uint32) []byte {
	return fmt.Appendf(nil, "fedpca/opening\x00%s\x00%d\x00%d\x00%d\x00%d", jobID, round, frame, from, to)
}

// FrameWords is the most 16-byte words one message of the computation
// carries (a frame of an opening or of a correction): 1 MiB, so that every
// message stays well below the transport's 16 MiB limit whatever d (a
// conversion's comparison opens 2 million words in one round at d >= 180).
const FrameWords = 1 << 16

// Frames returns the [lo, hi) bounds of the frames of n words: at least
// one (an empty one for n = 0), each of at most FrameWords.
func Frames(n int) [][2]int {
	out := [][2]int{}
	for lo := 0; lo < n || len(out) == 0; lo += FrameWords {
		out = append(out, [2]int{lo, min(lo+FrameWords, n)})
	}
	return out
}

// DCAResolution is the generalised eigenvalue below which the DCA
// program's block iteration resolves no direction (a zero vector).
const DCAResolution = 1e-3

// Program is a components job's members' program (protocol/eigen).
type Program interface {
	Run(e *mpc.Engine, x mpc.ModT) (mpc.Shared, error)
}

// Program returns the members' program of a components job whose sum
// holds `uploaded` owners' uploads (with DP noise, the noise's size
// depends on it: the regulariser's is the statistics release's of the same
// sum, Privacy.SigmaTotal.R).
func (s *Spec) Program(sch *schema.Schema, uploaded int) (Program, error) {
	l, err := s.Layout(sch)
	if err != nil {
		return nil, err
	}
	clip := math.Ldexp(float64(sch.Bound()), -int(sch.Bits))
	switch s.Analysis {
	case PCA:
		j := eigen.PCAJob{Layout: l, Bits: sch.Bits, Clip: clip, K: s.K, Solver: eigen.DefaultShared}
		return j, j.Validate()
	case DCA, LDA:
		// LDA's generalised eigenvectors are DCA's: with the same rho,
		// S_B w = mu (S_W + rho I) w exactly when S_B w = lambda (S_T + rho I) w,
		// mu = lambda / (1 - lambda) (S_T = S_W + S_B); Decode maps the values.
		j := eigen.DCAJob{Layout: l, Bits: sch.Bits, Clip: clip, K: s.K, Solver: eigen.DefaultShared}
		if !s.NoNoise {
			// With noise, rho is the statistics release's: the trace term
			// plus the noise margin of the same sum's noise on R, doubled
			// until S_T + rho I (LDA: S_W + rho I) is positive definite.
			cal, err := s.Calibration(sch)
			if err != nil {
				return nil, err
			}
			sigma, err := s.sigmaTotal(cal, uploaded)
			if err != nil {
				return nil, err
			}
			j.NoiseStd, j.Doublings, j.Within = sigma[stats.BlockR], analysis.MaxRetryDoublings, s.Analysis == LDA
		}
		return j, j.Validate()
	}
	return nil, fmt.Errorf("no components program for %s", s.Analysis)
}

// Decode decodes a components job's summed output: PCA eigenvalues are of
// the covariance (the program's are of cov / c^2), DCA's generalised
// eigenvalues lambda are dimensionless, in [0, 1), and LDA's are
// mu = lambda / (1 - lambda), a public map of the output.
func (s *Spec) Decode(sum []mpc.Word, sch *schema.Schema) (*Output, error) {
	out, err := DecodeOutput(sum, sch.D(), s.K, mpc.DefaultParams.F, sch.Bits, sch.Bound())
	if err != nil || s.Analysis == PCA {
		return out, err
	}
	c := math.Ldexp(float64(sch.Bound()), -int(sch.Bits))
	for i := range out.Values {
		out.Values[i] /= c * c
		if s.Analysis == LDA {
			if out.Values[i] >= 1 {
				return nil, fmt.Errorf("components output: DCA eigenvalue %d is %g, want below 1 for LDA's lambda / (1 - lambda)", i+1, out.Values[i])
			}
			out.Values[i] /= 1 - out.Values[i]
		}
	}
	return out, nil
}
