// Package datasets bundles the real UCI datasets and the reference results
// that the tests, `fedpca demo` and `fedpca simulate` use, so that they work on
// a fresh clone with no other files and no network.
//
// The files under testdata/ are verbatim copies of ../shared/datasets: one CSV
// per dataset with numeric features and the class in the last column
// `label`, and reference.json with results computed by numpy/scipy/
// scikit-learn for every dataset but shuttle. shuttle_reference.json holds
// shuttle's PCA and DCA eigenvalues, computed with the same definitions and
// package versions by scripts/reference_extra.py (which reproduces
// reference.json's values to 1e-14 on the other datasets); it has no Analyze
// Gauss or cross-validation results. Their
// provenance and licenses are in testdata/README.md and their SHA-256 sums in
// testdata/SHA256SUMS; TestCopiesMatchShared checks them against
// ../shared/datasets when that directory exists. Golden numbers in tests come
// from reference.json, never from the code under test.
package datasets
