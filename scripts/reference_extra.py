#!/usr/bin/python3
"""Reference results for the shared datasets that reference.json leaves out (shuttle).

Follows reference.json["meta"]["definitions"] exactly, with the same packages
(Debian bookworm: python3-numpy 1.24.2, python3-scipy 1.10.1):

  standardise  z = (x - mean) / std, population std (ddof=0); a feature whose
               std <= 1e-12*(|mean|+1) is divided by 1 instead.
  clip         rows with ||z||_2 > 1 are scaled to z/||z||_2.
  scatter      S = sum_i (z_i - m)(z_i - m)^T, m = mean of the clipped rows.
  DCA          generalised eigenvalues of S_B w = lambda (S + rho I) w,
               S_B = sum_c n_c (m_c - m)(m_c - m)^T, rho = 1e-3 trace(S) / d,
               top K-1, descending.

Usage: scripts/reference_extra.py datasets/testdata/shuttle.csv > datasets/testdata/shuttle_reference.json
"""
import csv
import json
import sys

import numpy as np
import scipy
import scipy.linalg


def main(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    x = np.array([[float(v) for v in r[:-1]] for r in body])
    labels = [r[-1] for r in body]
    n, d = x.shape
    mean = x.mean(axis=0)
    std = x.std(axis=0, ddof=0)
    constant = std <= 1e-12 * (np.abs(mean) + 1)
    std = np.where(constant, 1.0, std)
    z = (x - mean) / std
    norms = np.linalg.norm(z, axis=1)
    clipped = norms > 1
    z[clipped] = z[clipped] / norms[clipped][:, None]
    m = z.mean(axis=0)
    zc = z - m
    s = zc.T @ zc
    pca = np.linalg.eigh(s)[0][::-1]
    classes = sorted(set(labels))
    sb = np.zeros((d, d))
    lab = np.array(labels)
    for c in classes:
        zk = z[lab == c]
        diff = zk.mean(axis=0) - m
        sb += len(zk) * np.outer(diff, diff)
    rho = 1e-3 * np.trace(s) / d
    gen = scipy.linalg.eigh(sb, s + rho * np.eye(d), eigvals_only=True)[::-1][: len(classes) - 1]
    out = {
        "meta": {
            "script": "scripts/reference_extra.py",
            "definitions": "as reference.json meta.definitions (standardise, clip, scatter, DCA)",
            "numpy": np.__version__,
            "scipy": scipy.__version__,
        },
        "datasets": {
            path.rsplit("/", 1)[-1].removesuffix(".csv"): {
                "n": n, "d": d, "K": len(classes),
                "class_counts": {c: int((lab == c).sum()) for c in classes},
                "constant_features": int(constant.sum()),
                "fraction_rows_clipped": float(clipped.mean()),
                "pca": {"clipped": {"eigenvalues": pca.tolist()}},
                "dca_full": {"clipped": {"rho": float(rho), "gen_eigenvalues": gen.tolist()}},
            }
        },
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
