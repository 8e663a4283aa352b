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
// f = floor(2^64 * B / ||q||) (an integer square root of an exact quotient)
// and each entry becomes round(|q_i| f / 2^64) with its sign. Two integer
// passes then place the row as close to the sphere as the grid allows:
//
//   - undo: while ||q||^2 > B^2, the round-ups with the smallest fractional
//     parts go back down (undoing all of them gives the floors, whose norm
//     is at most B, so this always ends inside the ball);
//   - fill: the entries now rounded down, largest fractional part first, go
//     up by one whenever that keeps ||q||^2 <= B^2.
//
// Every entry ends within 1 of its exact scaled value, and the result is
// re-checked in integers before it is returned. Without the fill, clipped
// rows would sit systematically inside the sphere (by about 1/(B sqrt d) in
// squared norm), which shows as a bias of about -5e-6 in the eigenvalues at
// g = 16; with it, noise-free results match a floating-point reference to
// about 2e-6 at g = 16 and 1e-7 at g = 22, without bias.
//
// Bounds: |q_i| must stay below 2^53 (about 1.4e11 standard units at g = 16);
// a larger value is reported as an error naming the feature, since it cannot
// be a sensible measurement and would otherwise make the squared norm
// overflow 128 bits for very wide rows.
//
// Fast paths. The exact computations above are the specification; the hot
// functions reach the same integers faster where the numbers fit machine
// words, and fall back to them otherwise:
//
//   - Quantize reads a plain decimal (sign, digits, one point, at most 19
//     significant and 19 fraction digits; no blanks, no exponent) as X/10^k
//     and computes round((X mulX - c) f / den), the same rational as
//     2^g (x - center)/scale with constants precomputed per k from the
//     exact center and scale (reduced to lowest terms), in 128- and
//     192-bit integers and one division by a precomputed reciprocal
//     (Möller-Granlund). Any other text, and any constant or intermediate
//     that does not fit its word, takes QuantizeExact (big integers), which
//     also produces every error. Same rational, same rounding rule: the
//     same integer.
//   - Clip computes f in 128-bit integers (Newton's integer square root
//     from above) when ||q||^2 < 2^64, and runs the undo and fill passes
//     without sorting the row: undo only touches round-ups, in ascending
//     order of fractional part; fill can only move entries whose cost fits
//     the slack, which only shrinks, so it repeatedly takes the largest
//     fitting entry and drops those that no longer fit. ClipExact (big
//     integers, the whole row sorted) is the reference.
//
// Neither uses floating point. TestQuantizeFastMatchesExact,
// TestClipMatchesExact and the fuzz targets FuzzQuantizeFast and FuzzClip
// compare the fast paths with the exact ones.
//
// All functions are pure; the types are immutable after construction and safe
// for concurrent use unless stated otherwise.
package fixedpoint
