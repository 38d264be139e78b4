#!/usr/bin/python3
"""Cross-check of nnlens/coverage/kmeans1d.hpp against scikit-learn (ctest: coverage_sklearn).

Usage: sklearn_kmeans.py PATH/TO/kmeans1d_dump

On three seeded datasets (well separated, overlapping, well separated with many duplicates):
  * for k in {2,3,4} our silhouette equals sklearn.metrics.silhouette_score(X, OUR labels,
    metric='manhattan') to 1e-9;
  * our k-means SSE is <= sklearn KMeans(n_init=10, random_state=0).inertia_ (ours is the exact
    optimum), to a relative 1e-9;
  * our chosen k equals the k maximising sklearn's silhouette of sklearn's own KMeans labels on the
    well-separated sets (on the overlapping set both are printed, not required to agree).
Exits non-zero, saying what differed, on any mismatch.
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

KS = (2, 3, 4)


def datasets():
    rng = np.random.default_rng(20261123)
    # well separated: three tight Gaussians
    a = np.concatenate([rng.normal(0.0, 0.3, 1200), rng.normal(5.0, 0.4, 1000),
                        rng.normal(12.0, 0.5, 800)])
    # overlapping: two wide Gaussians plus a shoulder
    b = np.concatenate([rng.normal(0.0, 1.0, 2000), rng.normal(1.5, 1.0, 1500),
                        rng.normal(3.0, 1.5, 500)])
    # well separated, two clusters, rounded to 0.05 (many duplicates), negative values
    c = np.round(np.concatenate([rng.normal(-4.0, 0.3, 1500), rng.normal(2.0, 0.3, 1000)]) / 0.05) * 0.05
    return [("separated3", rng.permutation(a), True), ("overlapping", rng.permutation(b), False),
            ("separated2_dups", rng.permutation(c), True)]


def run_dump(dump, x):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(repr(float(v)) for v in x))
        path = f.name
    try:
        out = subprocess.run([dump, "--keep-zeros", "--min-samples", "0", "--round", "-1",
                              "--labels", path], check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    return json.loads(out)


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    dump = sys.argv[1]
    failures = []
    for name, x, separated in datasets():
        ours = run_dump(dump, x)
        X = x.reshape(-1, 1)
        sk_sil = {}
        print(f"{name}: n = {len(x)}")
        for entry in ours["ks"]:
            k = entry["k"]
            labels = np.asarray(entry["labels"])
            s_ref = silhouette_score(X, labels, metric="manhattan")
            km = KMeans(n_clusters=k, n_init=10, random_state=0).fit(X)
            sk_sil[k] = silhouette_score(X, km.labels_, metric="manhattan")
            sk_centroids = np.sort(km.cluster_centers_.ravel())
            print(f"  k={k}: silhouette ours {entry['silhouette']:.12f}  sklearn(our labels) "
                  f"{s_ref:.12f}  sklearn(KMeans labels) {sk_sil[k]:.12f}; SSE ours {entry['sse']:.9g}"
                  f"  sklearn {km.inertia_:.9g}; centroids ours {np.round(entry['centroids'], 4)}"
                  f"  sklearn {np.round(sk_centroids, 4)}")
            if not abs(entry["silhouette"] - s_ref) <= 1e-9:
                failures.append(f"{name} k={k}: silhouette {entry['silhouette']!r} != sklearn's "
                                f"{s_ref!r} on the same labels (diff {entry['silhouette'] - s_ref:.3g})")
            if entry["sse"] > km.inertia_ * (1 + 1e-9):
                failures.append(f"{name} k={k}: our SSE {entry['sse']!r} > sklearn KMeans inertia "
                                f"{km.inertia_!r} (the DP should be optimal)")
            if separated and k == 3 and name == "separated3":
                if not np.allclose(entry["centroids"], sk_centroids, rtol=0, atol=1e-6):
                    failures.append(f"{name} k=3: centroids {entry['centroids']} != sklearn's "
                                    f"{sk_centroids.tolist()}")
        sk_k = max(KS, key=lambda k: (sk_sil[k], -k))
        print(f"  chosen k: ours {ours['chosen_k']}  sklearn {sk_k}")
        if separated and ours["chosen_k"] != sk_k:
            failures.append(f"{name}: chosen k {ours['chosen_k']} != sklearn's {sk_k}")
    if failures:
        print("MISMATCH:\n  " + "\n  ".join(failures))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
