// Package profile chooses a schema's public parameters privately: each
// feature's center and scale and the clip norm C, from small jobs through
// the same protocol instead of from the private rows.
//
// The user declares public bounds [min, max] per feature (what a domain
// expert knows: a fasting glucose is in [40, 400]); owners clamp every
// value to them, counting locally what they clamp. Run then runs three
// rounds, each an ordinary job with its own noise and ledger entry:
//
//  1. locate (marginals), under the bounds schema (center (min+max)/2,
//     scale (max-min)/2, so every value is in [-1, 1]): a noisy histogram
//     of each feature over a coarse grid; the buckets above the noise
//     (seeded where noise alone would hardly reach in any bucket of the
//     round, grown through neighbours above twice it), one more on each
//     side, are the feature's window (the whole bounds when none is, or
//     with few rows per unit of noise: LocateThreshold);
//  2. moments, under the schema that maps each window onto [-1, 1], the
//     values clamped into it (spec clamp_box): the noisy count,
//     per-feature sums and sums of squares, hence each feature's mean and
//     standard deviation with noise of the window's width squared, not
//     the declared bounds';
//  3. norms, under the schema with those centers and scales: a noisy
//     histogram of the rows' norms over public geometric buckets, hence C
//     at a chosen quantile of the norms.
//
// Every center and scale comes with its standard error and a flag when the
// noise hid its spread. The rounds and the main job are Gaussian
// mechanisms, and Gaussian DP composes exactly: mu_total^2 is the sum of
// the jobs' mu^2 (rho = mu^2/2 adds in every owner's ledger). Split gives
// each round its share of mu_total^2 for a total (epsilon, delta);
// MainEpsilon gives the main job what the rounds' costs leave.
//
// When the centers and scales are public already (a registry, a public
// reference sample), only C is unknown: the profile is the norms round
// alone, under the declared schema, with the whole share. Method Moments
// is the earlier profile (the moments over the whole bounds, no locating),
// kept for comparison.
//
// Floats are fine here: this post-processes noisy releases into public
// parameters; nothing in it touches rows or draws noise.
package profile
