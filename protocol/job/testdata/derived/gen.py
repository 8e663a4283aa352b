"""Golden numbers for the derived analyses (covariance, correlation,
per-class means and counts, ridge regression) of a noise-free release.

Run with Debian bookworm's interpreter and packages (python3-numpy 1.24.2,
python3-sklearn 1.2.1), from the repository root:

    /usr/bin/python3 protocol/job/testdata/derived/gen.py

It writes wine.schema.json (the public map: centers and scales rounded to 6
decimals, clip norm 10 so that no row is clipped, 24 fractional bits) and
wine.golden.json (numpy.cov, numpy.corrcoef, the class means and counts,
sklearn.linear_model.Ridge on the mapped rows).
"""
import csv, json, os

import numpy as np
import sklearn
from sklearn.linear_model import Ridge

here = os.path.dirname(os.path.abspath(__file__))
rows = list(csv.reader(open(os.path.join(here, "../../../../datasets/testdata/wine.csv"))))
header, rows = rows[0], rows[1:]
label = header.index("label")
feats = [h for i, h in enumerate(header) if i != label]
X = np.array([[float(r[i]) for i in range(len(header)) if i != label] for r in rows])
y = [r[label] for r in rows]
classes = sorted(set(y))

centers = ["%.6f" % c for c in X.mean(axis=0)]
scales = ["%.6f" % s for s in X.std(axis=0)]
schema = {"id": "wine", "features": [{"name": f, "center": c, "scale": s} for f, c, s in zip(feats, centers, scales)],
          "label": "label", "classes": classes, "clip_norm": "10", "quant_bits": 24}
json.dump(schema, open(os.path.join(here, "wine.schema.json"), "w"), indent=1)

Z = (X - np.array([float(c) for c in centers])) / np.array([float(s) for s in scales])
assert np.linalg.norm(Z, axis=1).max() < 10  # no clipping
target, alpha = 0, 2.5
others = [j for j in range(Z.shape[1]) if j != target]
ridge = Ridge(alpha=alpha, fit_intercept=True).fit(Z[:, others], Z[:, target])
golden = {
    "source": "protocol/job/testdata/derived/gen.py with numpy %s and scikit-learn %s (Debian bookworm)" % (np.__version__, sklearn.__version__),
    "n": len(rows),
    "covariance": np.cov(Z, rowvar=False).tolist(),
    "correlation": np.corrcoef(Z, rowvar=False).tolist(),
    "classes": classes,
    "class_counts": [y.count(c) for c in classes],
    "class_means": [Z[[i for i, l in enumerate(y) if l == c]].mean(axis=0).tolist() for c in classes],
    "ridge": {"target": target, "alpha": alpha, "coef": ridge.coef_.tolist(), "intercept": float(ridge.intercept_)},
}
json.dump(golden, open(os.path.join(here, "wine.golden.json"), "w"), indent=1)
