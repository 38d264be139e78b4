#!/usr/bin/python3
# examples/deepimportance_kmeans_sklearn.py -- which k does scikit-learn's KMeans + silhouette pick
# on the activations nnlens' IDC clusters?  (docs/deepimportance-study.md, "Why k = 2")
#
#   deepimportance_study --dump-clusters DIR      (writes DIR/<model>-neuron<j>.f64, <model>-nnlens.csv)
#   OMP_NUM_THREADS=1 /usr/bin/python3 examples/deepimportance_kmeans_sklearn.py DIR [MODEL]
#   (MODEL, e.g. lenet5: only that model's dump)
#
# For every important neuron dumped (its activations over T', the correctly classified training
# images), the reference code's Algorithm 2 is rerun with scikit-learn: drop exact zeros, then for
# k in {2, 3, 4} sklearn.cluster.KMeans(k, n_init=10, random_state=0) and the silhouette; the k
# with the largest silhouette wins.  Two silhouettes:
#   full  the exact silhouette on all non-zero values (1-D, |a - b|: the same definition as
#         sklearn.metrics.silhouette_score, computed by sorting + prefix sums; checked against
#         silhouette_score on the subsample below);
#   sub   sklearn.metrics.silhouette_score on the deterministic subsample every ceil(n/5000)-th
#         non-zero value (KMeans refitted on it), the same subsample nnlens' columns sub_* use.
# Also per neuron: the share of zeros, skewness and Sarle's bimodality coefficient of the non-zero
# values (> 5/9 suggests bimodality), and a control: the k picked on samples of unimodal
# distributions (uniform, normal, half-normal, exponential, log-normal).
# Prints markdown tables; needs numpy and scikit-learn (python3-sklearn).
import csv
import glob
import math
import os
import sys

import numpy as np
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

KS = (2, 3, 4)


def silhouette_1d(x, labels):
    """Exact mean silhouette of 1-D points with L1 distance (sklearn's definition; singletons -> 0)."""
    x = np.asarray(x, dtype=np.float64)
    labels = np.asarray(labels)
    ids = np.unique(labels)
    members = {c: np.sort(x[labels == c]) for c in ids}
    prefix = {c: np.concatenate(([0.0], np.cumsum(v))) for c, v in members.items()}

    def sum_dist(c, pts):  # sum over members m of cluster c of |p - m|, for each p
        v, ps = members[c], prefix[c]
        p = np.searchsorted(v, pts, side="left")
        below = pts * p - ps[p]
        above = (ps[-1] - ps[p]) - pts * (len(v) - p)
        return below + above

    s = np.zeros(len(x))
    for c in ids:
        idx = np.where(labels == c)[0]
        n_c = len(idx)
        if n_c == 1:
            continue
        pts = x[idx]
        a = sum_dist(c, pts) / (n_c - 1)
        b = np.full(n_c, np.inf)
        for o in ids:
            if o != c:
                b = np.minimum(b, sum_dist(o, pts) / len(members[o]))
        m = np.maximum(a, b)
        s[idx] = np.where(m > 0, (b - a) / np.where(m > 0, m, 1), 0.0)
    return float(s.mean())


def pick(x, exact):
    """(k, {k: silhouette}) by sklearn KMeans + silhouette (exact 1-D or sklearn's silhouette_score)."""
    sil = {}
    distinct = len(np.unique(x))
    for k in KS:
        if k >= distinct:
            continue
        lab = KMeans(n_clusters=k, n_init=10, random_state=0).fit_predict(x.reshape(-1, 1))
        sil[k] = silhouette_1d(x, lab) if exact else float(silhouette_score(x.reshape(-1, 1), lab))
    k = max(sil, key=lambda kk: (sil[kk], -kk)) if sil else 1
    return k, sil


def shape(x):
    n = len(x)
    m, sd = x.mean(), x.std()
    if sd == 0 or n < 4:
        return 0.0, 0.0
    g = ((x - m) ** 3).mean() / sd**3
    kex = ((x - m) ** 4).mean() / sd**4 - 3
    bc = (g * g + 1) / (kex + 3 * (n - 1) ** 2 / ((n - 2) * (n - 3)))
    return g, bc


def main(d, only=""):
    rows = []
    for f in sorted(glob.glob(os.path.join(d, (only or "*") + "-nnlens.csv"))):
        with open(f) as fh:
            rows += list(csv.DictReader(fh))
    if not rows:
        sys.exit(f"{d}: no *-nnlens.csv (run deepimportance_study --dump-clusters {d} first)")
    print("| model | neuron | T' | zeros | skew | BC | nnlens k (s2/s3/s4) | sklearn k, exact silhouette (s2/s3/s4) "
          "| nnlens k, subsample | sklearn k, silhouette_score on the subsample |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    agree = total = k2_nn = k2_sk = 0
    max_check = 0.0
    for r in rows:
        name = r["model"].replace("-", "").lower()
        col = np.fromfile(os.path.join(d, f"{name}-neuron{r['neuron']}.f64"), dtype="<f8")
        nz = col[col != 0.0]
        step = max(1, math.ceil(len(nz) / 5000))
        sub = nz[::step]
        k_full, s_full = pick(nz, exact=True)
        k_sub, s_sub = pick(sub, exact=False)
        # the exact 1-D silhouette equals sklearn's silhouette_score (checked on the subsample)
        for k in s_sub:
            lab = KMeans(n_clusters=k, n_init=10, random_state=0).fit_predict(sub.reshape(-1, 1))
            max_check = max(max_check, abs(silhouette_1d(sub, lab) - s_sub[k]))
        g, bc = shape(nz)
        fmt = lambda s: "/".join(f"{s[k]:.3f}" if k in s else "-" for k in KS)
        nn = {2: float(r["s2"]), 3: float(r["s3"]), 4: float(r["s4"])}
        nn_sub = {2: float(r["sub_s2"]), 3: float(r["sub_s3"]), 4: float(r["sub_s4"])}
        print(f"| {r['model']} | {r['neuron']} | {r['n']} | {100 * (1 - len(nz) / len(col)):.0f}% | {g:.2f} | {bc:.2f} "
              f"| {r['k']} ({fmt(nn)}) | {k_full} ({fmt(s_full)}) | {r['sub_k']} ({fmt(nn_sub)}) | {k_sub} ({fmt(s_sub)}) |")
        total += 1
        agree += int(r["k"]) == k_full
        k2_nn += int(r["k"]) == 2
        k2_sk += k_full == 2
    print(f"\n{total} neurons: nnlens picks k = 2 for {k2_nn}, sklearn for {k2_sk}; same k on {agree}. "
          f"Exact 1-D silhouette vs sklearn silhouette_score: max |difference| {max_check:.2e}")

    rng = np.random.default_rng(0)
    print("\nControl, unimodal samples (n = 5000, seed 0): sklearn KMeans + silhouette_score")
    print("| distribution | k | s2 / s3 / s4 |\n|---|---|---|")
    for name, x in [("uniform(0,1)", rng.uniform(0, 1, 5000)), ("normal(0,1)", rng.normal(0, 1, 5000)),
                    ("half-normal", np.abs(rng.normal(0, 1, 5000))), ("exponential(1)", rng.exponential(1, 5000)),
                    ("log-normal(0,1)", rng.lognormal(0, 1, 5000))]:
        k, s = pick(x, exact=False)
        print(f"| {name} | {k} | {' / '.join(f'{s[kk]:.3f}' for kk in KS)} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cluster-dump", sys.argv[2] if len(sys.argv) > 2 else "")
