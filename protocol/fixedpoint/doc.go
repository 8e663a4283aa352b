// Package fixedpoint turns raw feature values into the integers that the
// protocol accumulates, without floating point.
//
// A raw value x arrives as decimal text (a CSV cell). The schema gives every
// feature a public affine map z = (x - center) / scale, with center and scale
// also written as decimals, and a number of fractional bits g. The package
// computes
//
//	q = round(2^g * (x - center) / scale)
//
// exactly: x, center and scale are parsed as exact rationals and the quotient
// is rounded half away from zero with big-integer arithmetic. No float64 is
// involved, so two owners given the same text always produce the same q, and
// the clipping bound below is a theorem rather than a floating-point hope.
//
// Clipping keeps every row inside the L2 ball of radius B = floor(2^g * C)
// (C is the schema's clip norm). A row with ||q||_2 > B is scaled by B/||q||:
// the scale factor is computed once per row as the exact integer
// f = floor(2^64 * B / ||q||) (an integer square root of an exact quotient),
// each entry becomes round(|q_i| f / 2^64) with its sign, and if rounding up
// pushed the squared norm past B^2, the round-ups with the smallest fractional
// parts are undone one by one (largest-remainder rounding) until it does not.
// Undoing every round-up gives floor(|q_i| f / 2^64), whose norm is at most
// B, so the loop always ends inside the ball; the result is re-checked in
// integers before it is returned. Rounding to nearest (instead of truncating)
// keeps the clipped rows unbiased, which is what lets noise-free results match
// a floating-point reference to about 2^-g relative precision.
//
// Bounds: |q_i| must stay below 2^53 (about 1.4e11 standard units at g = 16);
// a larger value is reported as an error naming the feature, since it cannot
// be a sensible measurement and would otherwise make the squared norm
// overflow 128 bits for very wide rows.
//
// All functions are pure; the types are immutable after construction and safe
// for concurrent use unless stated otherwise.
package fixedpoint
