// Package profile chooses a schema's public parameters privately: each
// feature's center and scale and the clip norm C, from a first job through
// the same protocol instead of from the private rows.
//
// The user declares public bounds [min, max] per feature (what a domain
// expert knows: an age is in [0, 120]); owners clamp every value to them,
// counting locally what they clamp. The profile then runs two rounds, each
// an ordinary job with its own noise and ledger entry:
//
//  1. moments, under the bounds schema (center (min+max)/2, scale
//     (max-min)/2, so every value is in [-1, 1], and C = sqrt(d), so no
//     row is clipped): the noisy count, per-feature sums and sums of
//     squares, hence each feature's mean and standard deviation;
//  2. norms, under the schema with those centers and scales: a noisy
//     histogram of the rows' norms over public geometric buckets, hence C
//     at a chosen quantile of the norms.
//
// The rounds and the main job are Gaussian mechanisms, and Gaussian DP
// composes exactly: mu_total^2 = mu_moments^2 + mu_norms^2 + mu_main^2
// (rho = mu^2/2 adds in every owner's ledger). Budget gives each round its
// share of mu_total^2 for a total (epsilon, delta).
//
// When the centers and scales are public already (a registry, a public
// reference sample), only C is unknown: the profile is the norms round
// alone, under the declared schema, with the whole share (Split with a
// moments share of 0). That is the better choice wherever such scales
// exist: with a few hundred rows the moments round cannot see the
// features' spreads (docs/BENCHMARKS.md, profile section).
//
// Floats are fine here: this post-processes noisy releases into public
// parameters; nothing in it touches rows or draws noise.
package profile
