package sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"math/big"

	"github.com/fedpca/fedpca/protocol/dp"
	"github.com/fedpca/fedpca/protocol/job"
	"github.com/fedpca/fedpca/protocol/profile"
	"github.com/fedpca/fedpca/protocol/schema"
	"github.com/fedpca/fedpca/protocol/stats"
)

// The central emulation: a job's release computed in one place, as the
// exact statistics every owner's rows give together plus central noise of
// the job's calibration (the discrete Gaussian of the central plan, drawn
// from a reproducible stream), analysed as the user analyses it. Its
// distribution is the protocol's with every party honest (the plans'
// shares add to the central variance); it runs in milliseconds, for
// measurements over many runs (bench -suite profile). Production noise
// comes from crypto/rand.

// NoiseStream returns a reproducible stream of bytes (SHA-256 in counter
// mode over the seed), for noise in measurements only.
func NoiseStream(seed string) io.Reader {
	return &counterStream{seed: sha256.Sum256([]byte(seed))}
}

type counterStream struct {
	seed [32]byte
	ctr  uint64
	buf  []byte
}

func (c *counterStream) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if len(c.buf) == 0 {
			var b [40]byte
			copy(b[:], c.seed[:])
			binary.LittleEndian.PutUint64(b[32:], c.ctr)
			c.ctr++
			h := sha256.Sum256(b[:])
			c.buf = h[:]
		}
		k := copy(p[n:], c.buf)
		c.buf = c.buf[k:]
		n += k
	}
	return n, nil
}

// centralSpec is a one-owner job of the central plan: what the emulation
// calibrates.
func centralSpec(sch *schema.Schema, analysis string, epsilon, delta float64) *job.Spec {
	s := &job.Spec{Version: job.Version, Dataset: sch.ID, SchemaHash: sch.HashHex(), Analysis: analysis, K: 5,
		Epsilon: epsilon, Delta: delta, NoisePlan: dp.PlanCentral, Split: dp.DefaultSplitFor(analysis), MinOwners: 1,
		CommitteeN: 1, CommitteeThreshold: 1}
	if err := s.SetOwners([]job.Owner{{ID: "central"}}); err != nil {
		panic(err)
	}
	if err := s.SetOwnerRows(1 << 40); err != nil {
		panic(err)
	}
	return s
}

// CentralJob runs a job centrally on data (a CSV with a header) with noise
// from rnd.
func CentralJob(data []byte, s *job.Spec, sch *schema.Schema, rnd io.Reader) (*job.Result, error) {
	acc, _, err := job.ReadStatistics(s, sch, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	l := acc.Layout()
	vec := acc.Pack()
	cal, err := s.Calibration(sch)
	if err != nil {
		return nil, err
	}
	noise, err := cal.NoiseVector(l, big.NewRat(1, 1), rnd, 1)
	if err != nil {
		return nil, err
	}
	for i := range vec {
		vec[i] += noise[i]
	}
	rel, err := stats.Unpack(l, sch.Bits, vec)
	if err != nil {
		return nil, err
	}
	pr, err := job.PrivacyReport(s, sch, []string{"central"}, []string{"central"})
	if err != nil {
		return nil, err
	}
	return job.Analyze(s, sch, rel, []string{"central"}, pr, job.CentralHEParams)
}

// CentralAuto is RunAuto emulated centrally: the profile's rounds and the
// main job on data, owners serving the declared schema, noise from the
// stream of seed.
func CentralAuto(data []byte, declared *schema.Schema, o AutoOptions, seed string) (*AutoReport, error) {
	delta := o.Delta
	if delta == 0 {
		delta = job.DefaultDelta
	}
	rnd := NoiseStream(seed)
	run := func(r profile.Round) (*job.Result, error) {
		s := centralSpec(r.Schema, r.Analysis, r.Epsilon, delta)
		s.NormEdges, s.Buckets, s.Windows, s.ClampBox = r.NormEdges, r.Buckets, r.Windows, r.ClampBox
		return CentralJob(data, s, r.Schema, rnd)
	}
	mainCost := func(sch *schema.Schema, eps float64) (dp.Cost, error) {
		cal, err := centralSpec(sch, job.PCA, eps, delta).Calibration(sch)
		return cal.Cost, err
	}
	prof, err := profile.Run(declared, o.profileOptions(delta), run, mainCost)
	if err != nil {
		return nil, err
	}
	s := centralSpec(prof.Schema, job.PCA, prof.Budget.Main, delta)
	s.K, s.Standardize = o.K, !o.KeepScales && !o.NoStandardize
	res, err := CentralJob(data, s, prof.Schema, rnd)
	if err != nil {
		return nil, err
	}
	return autoReport(data, prof, &Report{Result: res}, delta)
}
