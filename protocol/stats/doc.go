// Package stats accumulates the local sufficient statistics of a data owner,
// exactly and in integers, and lays them out as the flat vector that is
// encrypted.
//
// For clipped integer rows q (||q||_2 <= B, q = round(2^g z)) an owner keeps
//
//	R   = sum q q^T        upper triangle with the diagonal, row-major, scale 2^(2g)
//	v_k = sum of the rows of class k                                 scale 2^g
//	n_k = 2^g * (number of rows of class k)                          scale 2^g
//
// and packs them as [R | v_1 .. v_K | n_1 .. n_K]: d(d+1)/2 + K d + K int64
// values. The layout is a pure function of (kind, d, K).
//
// Two more kinds serve the profile job, which chooses a schema privately:
//
//   - Moments keeps only the diagonal of R (the per-feature sums of squares)
//     with v and n for one class: 2d + 1 values. Its rows must also lie in
//     the box |q_i| <= 2^g (every feature clamped to declared bounds mapped
//     to [-1, 1]), which bounds the diagonal's sensitivity by 2^g B instead
//     of B^2.
//   - Histogram keeps only K counts, one per bucket of the rows' norms
//     (the caller says which bucket a row falls in): K values, and one row
//     changes one count.
//   - Marginals keeps K counts per feature, one per bucket of that
//     feature's values (the caller maps each value to its bucket): D K
//     values in the n block, and one row changes one count of each feature.
//
// Overflow: the accumulator checks that every row it is given is inside the
// ball (||q||^2 <= B^2, in 128-bit integers), so each row changes an entry of
// R by at most B^2, of v by at most B and of n by 2^g. It accepts at most
// MaxRows = floor((2^63 - 1) / max(B^2, 2^g)) rows, which makes int64
// overflow impossible without a per-entry check in the inner loop; the
// (d(d+1)/2 per row) loop then runs at full speed. A row beyond that count is
// refused with ErrTooManyRows, never wrapped.
//
// Order does not matter: every partial sum of an entry, in any order and
// in any grouping, is a sum of a subset of at most MaxRows terms each at
// most max(B^2, 2^g) in absolute value, so it is below 2^63 and no
// intermediate wraps. Rows added in batches (AddBatch, whose R update is
// blocked for the cache) or spread over several accumulators and merged
// (Merge, for rows mapped on several cores) therefore give exactly the
// integers of one accumulator given the rows one by one.
//
// AddBatch sums a block of m rows' products in float64 when m B^2 <= 2^53
// (B <= 2^26.5; every product and partial sum is then an integer of
// magnitude at most 2^53, which float64 represents exactly, so no
// operation rounds) and converts the block's exact integer sums to int64:
// float64 multiplication runs about twice as fast as int64's here.
//
// Accumulator is not safe for concurrent use. Layout and Release are plain
// values.
package stats
