// Package user is the data user's side of fedpca: its HE key pair, job
// creation (build the spec, sign its ID with the user's certificate key,
// register it with the proxy), waiting with progress, fetching the result
// under its own key, decrypting and analysing it, and writing the result
// document, the components as CSV and as NumPy arrays, and the noisy
// release. Re-analysing a saved result costs no privacy (Reanalyze).
package user
