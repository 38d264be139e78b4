"""Coverage: every criterion against the tool's results on the same data; one preparation, many
test sets; the 1-D k-means and silhouette against scikit-learn's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnlens
from conftest import onnx_bytes, run_tool, write_csv


def test_coverage_matches_the_tool(tool: str, tmp_path: Path, cnn, rng) -> None:
    m, _ = cnn
    path = tmp_path / "cnn.onnx"
    path.write_bytes(onnx_bytes(m, torch.zeros(1, 1, 14, 14)))
    net = nnlens.load(path)
    X = rng.random((200, 1, 14, 14), dtype=np.float32)
    y = net(X).argmax(1)
    T = rng.random((50, 1, 14, 14), dtype=np.float32)
    (tmp_path / "y.txt").write_text("\n".join(map(str, y)) + "\n")
    j = run_tool(tool, "coverage", path, "--train", write_csv(tmp_path / "x.csv", X), "--train-labels", tmp_path / "y.txt",
                 "--test", write_csv(tmp_path / "t.csv", T), "--json", "--no-progress")
    ours = nnlens.coverage(net, X, y, T)
    for c, want in j["criteria"].items():
        got = ours[c]
        if "error" in want:
            assert "error" in got
            continue
        assert (got["covered"], got["total"]) == (want["covered"], want["total"]), c
        assert got["coverage"] == pytest.approx(want["coverage"])
    assert ours["idc"]["clusters"] == j["criteria"]["idc"]["clusters"]


def test_prepare_once_measure_many(cnn, rng) -> None:
    _, net = cnn
    X = rng.random((150, 1, 14, 14), dtype=np.float32)
    y = net(X).argmax(1)
    cov = nnlens.prepare_coverage(net, X, y, ["idc", "nc", "kmnc"])
    a, b = cov.measure(X[:10]), cov.measure(X[:40])
    assert a == cov.measure(X[:10])  # each measure starts uncovered
    for c in ("idc", "nc", "kmnc"):
        assert b[c]["covered"] >= a[c]["covered"] and b[c]["total"] == a[c]["total"]
    assert cov.idc["layer"] == cov.layer and len(cov.idc["neurons"]) == 6
    with pytest.raises(nnlens.InvalidValueError, match="unknown criterion"):
        nnlens.prepare_coverage(net, X, y, ["xyz"])
    with pytest.raises(nnlens.InvalidValueError, match="train_y"):
        nnlens.prepare_coverage(net, X, None, ["idc"])
    with pytest.raises(nnlens.InvalidValueError, match="label"):
        nnlens.prepare_coverage(net, X, np.full(150, 9), ["idc"])
    with pytest.raises(nnlens.ShapeError):
        cov.measure(np.zeros((3, 5), np.float32))


def test_kmeans_and_silhouette_against_sklearn(rng) -> None:
    sk = pytest.importorskip("sklearn")
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    assert sk
    v = np.concatenate([rng.normal(0, 1, 120), rng.normal(6, 0.5, 80), rng.normal(-5, 2, 60)])
    for k in (2, 3, 4):
        cent, labels, sse = nnlens.kmeans_1d(v.tolist(), k)
        km = KMeans(n_clusters=k, n_init=20, random_state=0).fit(v[:, None])
        assert sse <= km.inertia_ * (1 + 1e-9)  # optimal: never worse than sklearn's local search
        assert np.all(np.diff(cent) > 0)
        ours = nnlens.silhouette_1d(v.tolist(), labels.tolist(), k)
        assert ours == pytest.approx(silhouette_score(v[:, None], labels, metric="manhattan"), rel=1e-12, abs=1e-12)
