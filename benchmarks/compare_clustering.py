#!/usr/bin/python3
"""DeepImportance's clustering step, nnlens vs scikit-learn, on the same 60,000 values.

The values: a seeded mixture of 3 Gaussians plus 20% exact zeros (one neuron's activations over a
training set), written to a temporary file.  Both sides do what DeepImportance's reference code
does for one neuron: drop the zeros, then for k in {2,3,4} cluster and score the silhouette, keep
the best k.
  scikit-learn: KMeans(n_clusters=k, n_init=10).fit + silhouette_score (the reference's calls;
                in 1-D the default Euclidean metric is the L1 distance)
  nnlens:       kmeans1d_dump (cluster_neuron: exact DP k-means + exact O(N) silhouette)
Prints the median of --repeats wall times for each and the ratio.  For nnlens two times are
given: the whole process (start, parse 60,000 numbers, cluster, print) and cluster_neuron alone.

Usage: /usr/bin/python3 benchmarks/compare_clustering.py [--dump PATH] [--n 60000] [--repeats 3]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

HERE = os.path.dirname(os.path.abspath(__file__))


def make_values(n, seed=20261123):
    rng = np.random.default_rng(seed)
    comp = rng.choice(3, size=n, p=[0.375, 0.375, 0.25])
    mu, sd = np.array([0.5, 2.0, 4.5]), np.array([0.3, 0.5, 0.8])
    x = mu[comp] + sd[comp] * rng.standard_normal(n)
    x[rng.random(n) < 0.2] = 0.0
    return x


def sklearn_cluster(x):
    X = x[x != 0].reshape(-1, 1)
    sil, t_kmeans = {}, 0.0
    for k in (2, 3, 4):
        t0 = time.perf_counter()
        km = KMeans(n_clusters=k, n_init=10).fit(X)
        t_kmeans += time.perf_counter() - t0
        sil[k] = silhouette_score(X, km.labels_)
    return max(sil, key=sil.get), sil, t_kmeans


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", default=os.path.join(HERE, "..", "build", "bin", "tests", "kmeans1d_dump"))
    ap.add_argument("--n", type=int, default=60000)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()

    x = make_values(a.n)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(repr(float(v)) for v in x))
        path = f.name
    try:
        ours_wall, ours_inner = [], []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            out = subprocess.run([a.dump, path], check=True, capture_output=True, text=True).stdout
            ours_wall.append(time.perf_counter() - t0)
            res = json.loads(out)
            ours_inner.append(res["seconds"])
    finally:
        os.unlink(path)

    sk_times, sk_kmeans = [], []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        sk_k, sk_sil, t_km = sklearn_cluster(x)
        sk_times.append(time.perf_counter() - t0)
        sk_kmeans.append(t_km)

    ow, oi, sk = statistics.median(ours_wall), statistics.median(ours_inner), statistics.median(sk_times)
    print(f"values: {a.n} ({int((x != 0).sum())} non-zero), k in {{2,3,4}}, median of {a.repeats}")
    print("silhouettes  nnlens: " + ", ".join(f"k={e['k']}: {e['silhouette']:.6f}" for e in res["ks"])
          + f"  -> k={res['chosen_k']}, centroids {res['centroids']}")
    print("silhouettes sklearn: " + ", ".join(f"k={k}: {s:.6f}" for k, s in sk_sil.items())
          + f"  -> k={sk_k}")
    print(f"scikit-learn (KMeans n_init=10 + silhouette_score): {sk:10.4f} s   runs {['%.3f' % t for t in sk_times]}")
    km = statistics.median(sk_kmeans)
    print(f"  of which KMeans fits alone:                       {km:10.4f} s   (ratio to cluster_neuron {km / oi:.1f}x)")
    print(f"nnlens kmeans1d_dump, whole process:                {ow:10.4f} s   ratio {sk / ow:10.1f}x")
    print(f"nnlens cluster_neuron alone:                        {oi:10.6f} s   ratio {sk / oi:10.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
