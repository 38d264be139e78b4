"""NNSlicer: profiles against numpy's means of the activations and the tool's profile file; slices
against the tool's CONTRIB; the sliced network."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import nnlens
from conftest import onnx_bytes, run_tool, write_csv


def test_profile_means_are_numpys(cnn, rng, tmp_path: Path) -> None:
    m, net = cnn
    X = rng.random((300, 1, 14, 14), dtype=np.float32)
    p = nnlens.profile(net, X)
    assert p.samples == 300 and p.granularity == "channel" and p.names[0] == "input"
    np.testing.assert_allclose(p.mean(0), X.mean(axis=(0, 2, 3)), rtol=1e-6)
    with torch.no_grad():
        conv = m[0](torch.from_numpy(X)).numpy()  # the first layer's output, per channel
    np.testing.assert_allclose(p.mean(1), conv.mean(axis=(0, 2, 3)), rtol=1e-4, atol=1e-6)
    e = nnlens.profile(net, X, granularity="element")
    np.testing.assert_allclose(e.mean(0), X.mean(axis=0).ravel(), rtol=1e-6)
    # save / load round-trips; two halves merged give the whole
    p.save(tmp_path / "p.txt")
    q = nnlens.load_profile(str(tmp_path / "p.txt"))
    for a in range(len(p.names)):
        np.testing.assert_array_equal(q.mean(a), p.mean(a))
    h = nnlens.profile(net, X[:100]).merge(nnlens.profile(net, X[100:]))
    for a in range(len(p.names)):
        np.testing.assert_allclose(h.mean(a), p.mean(a), rtol=1e-9)


def test_profile_and_slice_match_the_tool(tool: str, tmp_path: Path, cnn, rng) -> None:
    m, _ = cnn
    path = tmp_path / "cnn.onnx"
    path.write_bytes(onnx_bytes(m, torch.zeros(1, 1, 14, 14)))
    net = nnlens.load(path)
    X = rng.random((64, 1, 14, 14), dtype=np.float32)
    csv = write_csv(tmp_path / "x.csv", X)
    subprocess_profile = tmp_path / "tool.profile"
    import subprocess

    subprocess.run([tool, "profile", str(path), "--data", str(csv), "-o", str(subprocess_profile), "--no-progress"],
                   check=True, capture_output=True)
    theirs = nnlens.load_profile(str(subprocess_profile))
    ours = nnlens.profile(net, X)
    for a in range(len(ours.names)):
        np.testing.assert_allclose(ours.mean(a), theirs.mean(a), rtol=1e-12)
    j = run_tool(tool, "slice", path, "--profile", subprocess_profile, "--samples", csv, "--json", "--theta", "0.3")
    s = nnlens.slice(net, theirs, X, theta=0.3)
    assert set(j["contrib"]) == set(s.contrib)
    for name, v in j["contrib"].items():
        np.testing.assert_array_equal(np.asarray(v), s.contrib[name].ravel())
        assert s.masks[name].dtype == np.bool_
        np.testing.assert_array_equal(s.masks[name], s.contrib[name] != 0)
    assert [(l["name"], l["synapses_in_slice"]) for l in j["layers"]] == [(l["name"], l["synapses_in_slice"]) for l in s.sizes]


def test_sliced_network(cnn, rng) -> None:
    _, net = cnn
    X = rng.random((40, 1, 14, 14), dtype=np.float32)
    p = nnlens.profile(net, X)
    s = nnlens.slice(net, p, X[:5], theta=0.3, target=1)
    sliced = s.network()
    assert sliced.input_shape == net.input_shape and sliced(X[:3]).shape == (3, 5)
    kept = sum(l["synapses_in_slice"] for l in s.sizes)
    assert 0 < kept < sum(l["synapses"] for l in s.sizes)
    with pytest.raises(nnlens.InvalidValueError, match="target 7"):
        nnlens.slice(net, p, X[:5], target=7)
    other = nnlens.from_torch(torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(196, 5)), torch.zeros(1, 1, 14, 14))
    with pytest.raises(nnlens.DataError):
        nnlens.slice(other, p, X[:5])
    with pytest.raises(nnlens.DataError):
        nnlens.profile(net, X[:0])
