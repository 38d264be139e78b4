#!/usr/bin/python3
"""DeepImportance's clustering step, nnlens vs scikit-learn, on the same values, measured interleaved.

The values: a seeded mixture of 3 Gaussians plus 20% exact zeros (one neuron's activations over a
training set), written to a temporary file.  Both sides do what DeepImportance's reference code
does for one neuron: drop the zeros, then for k in {2,3,4} cluster and score the silhouette, keep
the best k.
  scikit-learn: KMeans(n_clusters=k, n_init=10).fit + silhouette_score (the reference's calls;
                in 1-D the default Euclidean metric is the L1 distance)
  nnlens:       kmeans1d_dump (cluster_neuron: exact DP k-means + exact O(N log N) silhouette)

Protocol (docs/benchmarks.md, "Protocol for peer ratios"): --pairs interleaved pairs (at least 5);
pair i runs nnlens (a kmeans1d_dump process with one call of cluster_neuron, timed whole, then one
with --inner-repeat calls, whose median is cluster_neuron alone) and scikit-learn (the three KMeans fits at every thread
setting of --threads, applied with threadpoolctl, then, unless --no-silhouette, the three
silhouette_score calls), nnlens first in even pairs and scikit-learn first in odd ones.
scikit-learn's thread setting for the fits is the one with the lower median over the pairs; the
silhouettes run at the setting --silhouette-threads names, or else at the faster one of a short
calibration on a subsample (reported).  Four ratios per pair (scikit-learn time / nnlens time,
> 1 means nnlens is faster), each reported as the median over the pairs with its range:
  with silhouette:    (KMeans fits + silhouette_score)  /  nnlens
  without silhouette: KMeans fits alone                  /  nnlens (nnlens still includes its
                      silhouette: cluster_neuron is the whole step)
against nnlens' whole process (start, parse the values, cluster, print JSON) and against
cluster_neuron alone.  scikit-learn's silhouette_score is O(N^2) (48,000 non-zero values: ~2.3e9
distances per k), so the with-silhouette ratio grows with N; at N = 60,000 five pairs take tens
of minutes on a shared 2-core machine: use --n to choose.

Usage: /usr/bin/python3 benchmarks/compare_clustering.py [--dump PATH] [--n 60000] [--pairs 5]
           [--threads 1 2] [--silhouette-threads T] [--no-silhouette] [--json FILE]
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
from threadpoolctl import threadpool_limits

HERE = os.path.dirname(os.path.abspath(__file__))
KS = (2, 3, 4)


def make_values(n, seed=20261123):
    rng = np.random.default_rng(seed)
    comp = rng.choice(3, size=n, p=[0.375, 0.375, 0.25])
    mu, sd = np.array([0.5, 2.0, 4.5]), np.array([0.3, 0.5, 0.8])
    x = mu[comp] + sd[comp] * rng.standard_normal(n)
    x[rng.random(n) < 0.2] = 0.0
    return x


def sklearn_fits(X, threads):
    """The three KMeans fits at `threads`: (seconds, {k: labels})."""
    labels = {}
    with threadpool_limits(threads):
        t0 = time.perf_counter()
        for k in KS:
            labels[k] = KMeans(n_clusters=k, n_init=10).fit(X).labels_
        return time.perf_counter() - t0, labels


def sklearn_silhouettes(X, labels, threads):
    """The three silhouette_score calls at `threads`: (seconds, {k: silhouette})."""
    with threadpool_limits(threads):
        t0 = time.perf_counter()
        sil = {k: silhouette_score(X, labels[k]) for k in KS}
        return time.perf_counter() - t0, sil


def calibrate_silhouette_threads(X, labels, threads, n=6000, rounds=2):
    """The faster thread setting for silhouette_score on the first n values (alternated rounds)."""
    Xs = X[:n]
    ls = {k: v[:n] for k, v in labels.items()}
    times = {t: [] for t in threads}
    for _ in range(rounds):
        for t in threads:
            times[t].append(sklearn_silhouettes(Xs, ls, t)[0])
    return min(threads, key=lambda t: statistics.median(times[t])), times


def nnlens_once(dump, path, inner_repeat):
    """Two kmeans1d_dump processes: one call of cluster_neuron, timed as a whole process (start, parse,
    cluster, print), then --repeat inner_repeat calls, whose median is cluster_neuron alone."""
    t0 = time.perf_counter()
    subprocess.run([dump, path], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    out = subprocess.run([dump, "--repeat", str(inner_repeat), path], check=True, capture_output=True,
                         text=True).stdout
    res = json.loads(out)
    return wall, res["seconds"], res


def fmt(ratio):
    return f"{ratio:,.0f}" if ratio >= 100 else f"{ratio:.1f}" if ratio >= 10 else f"{ratio:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dump", default=os.path.join(HERE, "..", "build", "bin", "tests", "kmeans1d_dump"))
    ap.add_argument("--n", type=int, default=60000)
    ap.add_argument("--pairs", type=int, default=5, help="interleaved pairs (at least 5)")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="scikit-learn thread settings")
    ap.add_argument("--silhouette-threads", type=int, help="skip the calibration, run silhouettes at this")
    ap.add_argument("--inner-repeat", type=int, default=9, help="cluster_neuron calls per kmeans1d_dump")
    ap.add_argument("--no-silhouette", action="store_true", help="only the ratios without silhouette_score")
    ap.add_argument("--json", help="write every measurement to this file")
    a = ap.parse_args()
    if a.pairs < 5:
        sys.exit("compare_clustering: --pairs must be at least 5 (the protocol's minimum)")
    if not os.path.exists(a.dump):
        sys.exit(f"compare_clustering: {a.dump} not found; build the kmeans1d_dump target first")

    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = "{:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())
    x = make_values(a.n)
    X = x[x != 0].reshape(-1, 1)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(repr(float(v)) for v in x))
        path = f.name
    sil_threads, calib = a.silhouette_threads, None
    ours_wall, ours_inner = [], []
    fits = {t: [] for t in a.threads}
    sils, sk_sil, res, labels = [], {}, None, None
    try:
        for i in range(a.pairs):
            def ours():
                nonlocal res
                w, s, res = nnlens_once(a.dump, path, a.inner_repeat)
                ours_wall.append(w)
                ours_inner.append(s)

            def theirs():
                nonlocal labels, sil_threads, calib, sk_sil
                for t in a.threads:
                    dt, labels = sklearn_fits(X, t)
                    fits[t].append(dt)
                if a.no_silhouette:
                    return
                if sil_threads is None:
                    sil_threads, calib = calibrate_silhouette_threads(X, labels, a.threads)
                dt, sk_sil = sklearn_silhouettes(X, labels, sil_threads)
                sils.append(dt)

            for step in ((ours, theirs) if i % 2 == 0 else (theirs, ours)):
                step()
            print(f"# pair {i + 1}/{a.pairs}: nnlens {ours_wall[-1]:.4f} s / {ours_inner[-1] * 1e3:.3f} ms, fits "
                  + ", ".join(f"{t}t {v[-1]:.3f} s" for t, v in fits.items())
                  + (f", silhouettes {sils[-1]:.2f} s" if sils else "") + f"; load {os.getloadavg()[0]:.2f}",
                  file=sys.stderr, flush=True)
    finally:
        os.unlink(path)
    load_after = "{:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())

    best_t = min(a.threads, key=lambda t: statistics.median(fits[t]))
    sk_fit = fits[best_t]
    rows = []

    def row(name, peer, ours_times):
        ratios = [p / o for p, o in zip(peer, ours_times)]
        rows.append({"row": name, "peer_s": statistics.median(peer), "nnlens_s": statistics.median(ours_times),
                     "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
                     "ratios": ratios})

    if not a.no_silhouette:
        with_sil = [f + s for f, s in zip(sk_fit, sils)]
        row("with silhouette_score, vs kmeans1d_dump (whole process)", with_sil, ours_wall)
        row("with silhouette_score, vs cluster_neuron alone", with_sil, ours_inner)
    row("KMeans fits alone, vs kmeans1d_dump (whole process)", sk_fit, ours_wall)
    row("KMeans fits alone, vs cluster_neuron alone", sk_fit, ours_inner)

    print(f"# {started}; {a.n} values ({len(X)} non-zero), k in {{2,3,4}}, {a.pairs} interleaved pairs; "
          f"load average before {load_before}, after {load_after}")
    print(f"# scikit-learn's KMeans at {best_t} thread(s) (median fits s by setting: "
          + ", ".join(f"{t}: {statistics.median(v):.3f}" for t, v in fits.items()) + ")"
          + ("" if a.no_silhouette else
             f"; silhouette_score at {sil_threads} thread(s)"
             + ("" if calib is None else " (calibration on 6,000 values, s: "
                + ", ".join(f"{t}: {statistics.median(v):.3f}" for t, v in calib.items()) + ")")))
    print("# silhouettes  nnlens: " + ", ".join(f"k={e['k']}: {e['silhouette']:.6f}" for e in res["ks"])
          + f"  -> k={res['chosen_k']}")
    if sk_sil:
        print("# silhouettes sklearn: " + ", ".join(f"k={k}: {s:.6f}" for k, s in sk_sil.items())
              + f"  -> k={max(sk_sil, key=sk_sil.get)}")
    print(f"# nnlens: whole process {statistics.median(ours_wall):.4f} s "
          f"({min(ours_wall):.4f}-{max(ours_wall):.4f}), cluster_neuron {statistics.median(ours_inner) * 1e3:.2f} ms "
          f"({min(ours_inner) * 1e3:.2f}-{max(ours_inner) * 1e3:.2f})")
    print("| ratio (scikit-learn time / nnlens time) | scikit-learn s | nnlens s | median | range |")
    print("|---|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['row']} | {r['peer_s']:.4f} | {r['nnlens_s']:.6f} | {fmt(r['ratio'])}x | "
              f"{fmt(r['ratio_min'])}-{fmt(r['ratio_max'])}x |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"started": started, "n": a.n, "nonzero": len(X), "load_before": load_before,
                       "load_after": load_after, "kmeans_threads": best_t, "silhouette_threads": sil_threads,
                       "fits": {str(t): v for t, v in fits.items()}, "silhouettes": sils, "nnlens_wall": ours_wall,
                       "nnlens_inner": ours_inner, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
