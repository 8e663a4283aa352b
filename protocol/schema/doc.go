// Package schema defines the public description of a dataset that data
// owners serve and the row map that turns its CSV rows into clipped integer
// vectors.
//
// A schema lists the features in order with the public affine map
// z = (x - center) / scale of each, the label column and its class list (for
// DCA and LDA), the row clip norm C (default 1) and the number of fractional
// bits g (default 16). Centers, scales and C are exact decimals: they are
// written and hashed as canonical decimal text and never pass through float64
// in the row map.
//
// The identity of a schema is the SHA-256 of its canonical JSON encoding
// (fixed field order, canonical decimals, no insignificant white space). Owners
// refuse a job whose schema hash differs from theirs.
//
// A feature may declare public bounds [min, max]: values outside are clamped
// to them before the map (in the integer domain: quantization is monotone,
// so clamping the quantized value is clamping the value).
//
// The schema also says how to read a source, every option public and in
// the hash (unset options are not written, so older schemas keep their
// hash): a feature's source column, categorical columns one-hot encoded from
// a public category list, missing-value policies (drop the row or fill a
// public value), decimal commas, trimming and case-insensitive labels.
//
// Rows come from any Rows stream (a CSV file of any common dialect through
// NewCSVRows; databases in package source). Reading streams: memory stays
// constant in the number of rows. A bad cell is reported with its line number
// and column name, and what to change when an option would read it.
//
// Schema values are immutable after Parse and safe for concurrent use; a
// Reader is not.
package schema
