package user

import (
	"context"
	"crypto/ecdh"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"

	fedpcav1 "github.com/fedpca/fedpca/proto/fedpca/v1"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/seal"
	"github.com/fedpca/fedpca/transport"
)

// A components job's result (job.ReleaseComponents): the proxy sends the
// header, with no ciphertext and the Shamir points of the t members that
// computed the output, then each member's share of the output column
// sealed to the spec's result key, in the points' order. The user opens
// every box (bound to the job and the member's point: job.OutputAAD), adds
// the shares and decodes the top components, their eigenvalues and n. No
// statistic reaches the user.

// badResult is a result the proxy sent that breaks the protocol: not
// retried.
type badResult struct{ error }

// downloadSealed reads a components job's result stream: the header and
// one sealed output share per point.
func (c *Client) downloadSealed(ctx context.Context, s *job.Spec) (*fedpcav1.ResultHeader, [][]byte, error) {
	stream, hd, err := c.openResult(ctx, s.ID())
	if err != nil {
		return nil, nil, err
	}
	if n := hd.GetCiphertexts(); n != 0 {
		return nil, nil, badResult{fmt.Errorf("bad header from the proxy: %d ciphertexts for a components job, which releases none (tell the proxy's operator: it may be sending the statistics)", n)}
	}
	if err := checkPoints(s, hd.GetPoints()); err != nil {
		return nil, nil, badResult{fmt.Errorf("bad header from the proxy: %w", err)}
	}
	boxes := make([][]byte, len(hd.GetPoints()))
	for i, pt := range hd.GetPoints() {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, nil, badResult{fmt.Errorf("the proxy's result ended after %d of the %d members' sealed outputs", i, len(boxes))}
		}
		if err != nil {
			return nil, nil, fmt.Errorf("sealed output of the member at point %d: %w", pt, err)
		}
		if boxes[i] = m.GetSealedOutput(); len(boxes[i]) == 0 {
			return nil, nil, badResult{fmt.Errorf("the proxy sent no sealed output for the member at point %d (message %d of the result)", pt, i+1)}
		}
	}
	if err := transport.Finish(stream); err != nil {
		return nil, nil, fmt.Errorf("after %d sealed outputs: %w", len(boxes), err)
	}
	return hd, boxes, nil
}

// checkPoints checks a components result's points: the members that
// computed it (job.Spec.CheckOutputPoints).
func checkPoints(s *job.Spec, points []uint32) error {
	if err := s.CheckOutputPoints(points); err != nil {
		return fmt.Errorf("the members' points %v: %w", points, err)
	}
	return nil
}

// openComponents opens the sealed output shares of a components job,
// adds and decodes them, and assembles the result document.
func (c *Client) openComponents(r *Sealed) (*job.Result, error) {
	s, sch, hd := r.spec, r.sch, r.header
	out, err := OpenOutput(c.cfg.ResultKey, s, sch, hd.GetPoints(), r.boxes)
	if err != nil {
		return nil, err
	}
	pr, err := job.PrivacyReport(s, sch, hd.GetOwners(), hd.GetCspMembers())
	if err != nil {
		return nil, err
	}
	return job.ComponentsResult(s, sch, out, hd.GetOwners(), pr, c.params.ID())
}

// unitTolerance bounds how far from unit length a decoded component may
// be: the members' fixed point leaves errors many orders below it, and
// shares that do not belong together (a wrong, stale or missing share)
// decode to vectors of any length.
const unitTolerance = 1e-2

// OpenOutput opens the sealed output shares of a components job (boxes[i]
// from the member at points[i]) with the result key, adds them and decodes
// the output (job.DecodeOutput). Errors name the member's point and what is
// wrong: a box that does not open (not sealed to this key for this job and
// point), a share of the wrong length, an output that is not unit
// components.
func OpenOutput(key *ecdh.PrivateKey, s *job.Spec, sch *schema.Schema, points []uint32, boxes [][]byte) (*job.Output, error) {
	if key == nil {
		return nil, ErrNoResultKey
	}
	if !s.Components() {
		return nil, fmt.Errorf("job %s releases the statistics, not components", short(s.ID()))
	}
	if pub := hex.EncodeToString(key.PublicKey().Bytes()); pub != s.ResultKey {
		return nil, fmt.Errorf("job %s's output is sealed to the result key %s…, not this key directory's %s…: use the --keys it was created with", short(s.ID()), s.ResultKey[:min(12, len(s.ResultKey))], pub[:12])
	}
	if len(points) != len(boxes) {
		return nil, fmt.Errorf("components output: %d sealed shares for %d members", len(boxes), len(points))
	}
	if err := checkPoints(s, points); err != nil {
		return nil, fmt.Errorf("components output: %w", err)
	}
	d, k := sch.D(), s.K
	want := 16 * job.OutputLen(d, k)
	if !s.Dealt() {
		want *= 2 // each party's two components
	}
	shares := make([][]byte, len(boxes))
	for i, box := range boxes {
		pt, err := seal.Open(key, job.OutputAAD(s.ID(), points[i]), box)
		if err != nil {
			return nil, fmt.Errorf("components output: the share of the member at point %d: %w (not sealed to this job's result key for this job and member: the proxy or that member sent a wrong box; tell the proxy's operator)", points[i], err)
		}
		if len(pt) != want {
			return nil, fmt.Errorf("components output: the share of the member at point %d has %d bytes, want %d (%d words for d = %d, k = %d): tell the proxy's operator", points[i], len(pt), want, job.OutputLen(d, k), d, k)
		}
		shares[i] = pt
	}
	sum, err := s.CombineShares(d, shares)
	if err != nil {
		return nil, fmt.Errorf("%w (the members' outputs do not belong together: tell the proxy's operator)", err)
	}
	out, err := s.Decode(sum, sch)
	if err != nil {
		return nil, err
	}
	wrong := func(what string, args ...any) error {
		return fmt.Errorf("components output: %s: the members' shares (points %v) do not add up to the job's output (a wrong or stale share); tell the proxy's operator", fmt.Sprintf(what, args...), points)
	}
	for j, v := range out.Vectors {
		norm := 0.0
		for _, x := range v {
			norm += x * x
		}
		if s.Analysis != job.PCA && norm == 0 && math.Abs(out.Values[j]) < job.DCAResolution {
			continue // a generalised eigenvalue below the block iteration's resolution: no direction
		}
		if norm = math.Sqrt(norm); !(math.Abs(norm-1) <= unitTolerance) {
			return nil, wrong("component %d has length %.6g, not 1", j+1, norm)
		}
	}
	// Without noise the covariance of rows clipped to norm c has its
	// eigenvalues in [0, c^2], and n counts rows.
	c2 := math.Pow(math.Ldexp(float64(sch.Bound()), -int(sch.Bits)), 2)
	what := fmt.Sprintf("rows clipped to norm %.6g", math.Sqrt(c2))
	switch s.Analysis {
	case job.DCA:
		c2, what = 1, "generalised eigenvalues of S_B against S_T + rho I"
	case job.LDA:
		c2, what = math.Inf(1), "LDA's lambda / (1 - lambda)"
	}
	for j, v := range out.Values {
		if math.IsNaN(v) || math.IsInf(v, 0) || s.NoNoise && (v < -unitTolerance*min(c2, 1) || v > (1+unitTolerance)*c2) {
			return nil, wrong("eigenvalue %d is %.6g, outside [0, %.6g] (%s)", j+1, v, c2, what)
		}
	}
	if s.NoNoise && (out.N < 1 || out.N != math.Round(out.N) || out.N > float64(s.MaxRows)) {
		return nil, wrong("n = %.6g is not a count of at most max_rows = %d rows", out.N, s.MaxRows)
	}
	return out, nil
}
