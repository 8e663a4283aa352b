// Package plots draws the figures of a fedpca result with gonum/plot, as SVG
// and PNG: a scree plot of the eigenvalues (with the cumulative explained
// variance for PCA) and a scatter of rows projected on the first two
// components, coloured by class. The CLI commands only call Write.
//
// The figures say what they show: the dataset, the analysis, the number of
// components kept and the privacy of the release (epsilon, delta, noise
// plan). Plotting is post-processing of the release: it costs no privacy.
package plots
