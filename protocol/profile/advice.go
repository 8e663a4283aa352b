package profile

import (
	"encoding/json"
	"math"
)

// Advice is what a profile tells the user about the main job it prepares:
// what the main job standardised by its release can be expected to
// capture, and whether public reference scales would do better. It rests
// on measurements, by the rows per unit of the main job's noise (Band).
type Advice struct {
	// RowsPerNoise is n mu / sqrt(d): the rows per unit of the main job's
	// noise on the scatter's spectral scale (n the profile's noisy count,
	// mu the main job's Gaussian-DP parameter).
	RowsPerNoise float64 `json:"rows_per_noise"`
	// Unresolved is how many spreads the profile could not tell from its
	// noise (their scales are upper estimates), out of Features.
	Unresolved int `json:"unresolved"`
	Features   int `json:"features"`
	// PublicScales says to use public reference centers and scales
	// (profile --keep-scales), when most spreads are unresolved: the main
	// job then runs on scales that are at the noise's level, which
	// measured worst (Band.BelowPublic).
	PublicScales bool `json:"public_scales"`
	// Band is the measurement at this many rows per unit of noise.
	Band Band `json:"measured"`
}

// Band is what the fully private pipeline (this profile, then the main PCA
// standardised) captured on the bundled datasets in a range of rows per
// unit of noise, at total epsilon 1 (docs/BENCHMARKS.md, "Profile job",
// 2026-11-27, 20 runs per dataset and declared bounds): Captured, the range
// of q/q0 of the top k components of the standardised rows, and
// BelowPublic, how much less that was than with the pooled means and
// standard deviations as public scales (the free peek; --keep-scales).
type Band struct {
	Below       float64    `json:"-"` // the band is RowsPerNoise < Below (+Inf: the top band)
	Captured    [2]float64 `json:"captured"`
	BelowPublic [2]float64 `json:"below_public"`
	Datasets    string     `json:"datasets"`
}

// MarshalJSON writes the band with its upper bound, rows_per_noise_below,
// when it has one (JSON has no infinity: the top band has none).
func (b Band) MarshalJSON() ([]byte, error) {
	type plain Band
	out := struct {
		Below *float64 `json:"rows_per_noise_below,omitempty"`
		plain
	}{plain: plain(b)}
	if !math.IsInf(b.Below, 0) {
		out.Below = &b.Below
	}
	return json.Marshal(out)
}

// Bands are the measured bands, by rows per unit of noise; the thresholds
// are AutoQuantile's. Below SmallThreshold (a few hundred rows) the
// pipeline lost 0.10 to 0.62 against public scales (wine, glass, wdbc,
// australian, german_numeric, digits; iris, k = d, and sonar, whose public
// scales captured less, left out); the pilot of issue 43 (442 rows, d =
// 10) lost 0.215 (0.687 against 0.902).
var Bands = []Band{
	{Below: SmallThreshold, Captured: [2]float64{0.24, 0.76}, BelowPublic: [2]float64{0.10, 0.62}, Datasets: "wine, glass, wdbc, australian, german_numeric, digits (11-50 rows per unit of noise)"},
	{Below: MiddleThreshold, Captured: [2]float64{0.91, 0.999}, BelowPublic: [2]float64{0, 0.08}, Datasets: "satellite, a clinical cohort (241, 494)"},
	{Below: math.Inf(1), Captured: [2]float64{0.98, 0.999}, BelowPublic: [2]float64{0, 0.01}, Datasets: "letter, shuttle (1123, 4341)"},
}

// Advise returns the profile's advice for a main job of Gaussian-DP
// parameter mu over its d features.
func (r *Result) Advise(mu float64, d int) Advice {
	a := Advice{RowsPerNoise: r.N * mu / math.Sqrt(float64(d)), Features: len(r.Features)}
	for _, f := range r.Features {
		if f.Unresolved {
			a.Unresolved++
		}
	}
	a.PublicScales = 2*a.Unresolved > a.Features
	for _, b := range Bands {
		if a.RowsPerNoise < b.Below {
			a.Band = b
			break
		}
	}
	return a
}
