"""ExactLine: lines, planes, exact integrated gradients, against the tool's results, PyTorch's
forward and autograd (Captum's formulas), and Riemann sums converging to the exact IG."""

from __future__ import annotations

import _thread
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import nnlens
from conftest import onnx_bytes, run_tool, small_mlp, write_csv


def torch_forward(m: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return m(torch.from_numpy(np.ascontiguousarray(x, np.float32))).numpy()


def test_line_is_exact_against_torch(mlp, rng) -> None:
    m, net = mlp
    a, b = rng.normal(size=6).astype(np.float32), rng.normal(size=6).astype(np.float32)
    line = nnlens.exact_line(net, a, b, validate=True)
    assert line.pieces >= 1 and line.t[0] == 0 and line.t[-1] == 1 and np.all(np.diff(line.t) > 0)
    assert line.stats["violations"] == 0
    assert line.outputs.shape == (line.pieces + 1, 4)
    ts = rng.random(50)
    pts = a[None] + ts[:, None].astype(np.float32) * (b - a)[None]
    np.testing.assert_allclose(line.eval(ts), torch_forward(m, pts), rtol=1e-4, atol=1e-4)
    # the class intervals tile [0, 1] and each label wins at its midpoint
    assert line.classes[0].start == 0 and line.classes[-1].end == 1
    for c in line.classes:
        mid = 0.5 * (c.start + c.end)
        assert torch_forward(m, (a + np.float32(mid) * (b - a))[None]).argmax() == c.label


def test_line_matches_the_tool(tool: str, tmp_path: Path, mlp, rng) -> None:
    m, _ = mlp
    p = tmp_path / "mlp.onnx"
    p.write_bytes(onnx_bytes(m, torch.zeros(1, 6)))
    A, B = rng.normal(size=(3, 6)).astype(np.float32), rng.normal(size=(3, 6)).astype(np.float32)
    j = run_tool(tool, "exact-line", p, "--from", write_csv(tmp_path / "a.csv", A), "--to", write_csv(tmp_path / "b.csv", B),
                 "--json", "--precision", "f64")
    lines = nnlens.exact_lines(nnlens.load(p, precision="f64"), A, B)
    for want, got in zip(j["lines"], lines):
        assert want["pieces"] == got.pieces
        np.testing.assert_array_equal(np.array(want["t"]), got.t)
        np.testing.assert_array_equal(np.array(want["outputs"]), got.outputs)
        assert [(c["from"], c["to"], c["label"]) for c in want["classes"]] == [tuple(c) for c in got.classes]


def test_lines_errors_kept_or_raised(mlp, rng) -> None:
    _, net = mlp
    A = rng.normal(size=(3, 6)).astype(np.float32)
    B = A.copy()
    B[0] += 1
    B[2] -= 1  # segment 1 is degenerate (a == b)
    with pytest.raises(nnlens.InvalidValueError, match="segment 1"):
        nnlens.exact_lines(net, A, B)
    ls = nnlens.exact_lines(net, A, B, errors="keep")
    assert ls[0].error is None and ls[2].error is None and ls[1].error and ls[1].pieces == 0


def test_line_bad_input(mlp) -> None:
    _, net = mlp
    with pytest.raises(nnlens.ShapeError, match="exact_line: a"):
        nnlens.exact_line(net, np.zeros(5), np.ones(6))
    with pytest.raises(nnlens.InvalidValueError):
        nnlens.exact_line(net, np.zeros(6), np.zeros(6))
    with pytest.raises(nnlens.InvalidValueError):
        nnlens.exact_line(net, np.full(6, np.nan), np.zeros(6))
    with pytest.raises(nnlens.LimitError, match="max_pieces"):
        nnlens.exact_line(net, np.full(6, -9.0), np.full(6, 9.0), max_pieces=1)
    with pytest.raises(nnlens.InvalidValueError, match="classes"):
        nnlens.exact_line(net, np.zeros(6), np.ones(6), classes="max")


def test_plane_tiles_and_is_affine(mlp, rng) -> None:
    m, net = mlp
    o, u, v = (rng.normal(size=6).astype(np.float32) for _ in range(3))
    pl = nnlens.exact_plane(net, o, u, v)
    assert abs(pl.area - 1.0) < 1e-9 and len(pl.polygons) >= 1 and len(pl.regions) >= 1
    for poly in pl.polygons[:20]:
        c = poly.vertices.mean(0)
        x = o + np.float32(c[0]) * u + np.float32(c[1]) * v
        np.testing.assert_allclose(poly.outputs.mean(0), torch_forward(m, x[None])[0], rtol=1e-3, atol=1e-3)


def captum_ig(m: torch.nn.Module, x: np.ndarray, b: np.ndarray, target: int, n_steps: int, method: str) -> np.ndarray:
    """Captum's IntegratedGradients in a few lines of autograd (captum.attr._utils.
    approximation_methods): riemann_* samples alpha at the left / right / middle points of n_steps
    parts, or n_steps points linspace(0, 1) for the trapezoid, each weighted 1 / n_steps (the
    trapezoid's two ends halved); gausslegendre at numpy's leggauss nodes mapped to [0, 1]."""
    if method == "gausslegendre":
        nodes, weights = np.polynomial.legendre.leggauss(n_steps)
        alphas, w = (nodes + 1) / 2, weights / 2
    else:
        k = np.arange(n_steps)
        alphas = {"riemann_left": k / n_steps, "riemann_right": (k + 1) / n_steps,
                  "riemann_middle": (k + 0.5) / n_steps, "riemann_trapezoid": np.linspace(0, 1, n_steps)}[method]
        w = np.full(n_steps, 1.0 / n_steps)
        if method == "riemann_trapezoid":
            w[0] = w[-1] = 0.5 / n_steps
    xt, bt = torch.from_numpy(x).double(), torch.from_numpy(b).double()
    pts = (bt[None] + torch.from_numpy(alphas)[:, None] * (xt - bt)[None]).requires_grad_(True)
    m.double()
    try:
        m(pts)[:, target].sum().backward()
    finally:
        m.float()
    g = (pts.grad * torch.from_numpy(w)[:, None]).sum(0)
    return ((xt - bt) * g).numpy()


def test_exact_ig_completeness_and_the_tool(tool: str, tmp_path: Path, mlp, rng) -> None:
    m, net = mlp
    X = rng.normal(size=(4, 6)).astype(np.float32)
    attr, delta = nnlens.integrated_gradients(net, X, 0.0, target=2)
    assert attr.shape == X.shape and delta.shape == (4,)
    assert np.abs(delta).max() < 1e-4  # sum(attributions) = F(x) - F(baseline)
    y, y0 = torch_forward(m, X)[:, 2], torch_forward(m, np.zeros((1, 6), np.float32))[0, 2]
    np.testing.assert_allclose(attr.sum(1), y - y0, rtol=1e-4, atol=1e-4)
    # the tool's exact IG on the same inputs (f64 there: compare with the f64 network's)
    p = tmp_path / "mlp.onnx"
    p.write_bytes(onnx_bytes(m, torch.zeros(1, 6)))
    write_csv(tmp_path / "b.csv", np.zeros((1, 6), np.float32))
    j = run_tool(tool, "ig", p, "--input", write_csv(tmp_path / "x.csv", X), "--baseline", tmp_path / "b.csv",
                 "--output-index", 2, "--json", "--precision", "f64", "--no-samples-to-reach")
    a64, d64 = nnlens.integrated_gradients(nnlens.load(p, precision="f64"), X, 0.0, target=2)
    inputs = j["inputs"] if isinstance(j, dict) else j
    for i, r in enumerate(inputs):
        np.testing.assert_array_equal(np.array(r["exact"]), a64[i])
        assert r["pieces"] == nnlens.exact_ig(nnlens.load(p, precision="f64"), X[i], 0.0, 2).pieces
    assert np.abs(d64).max() < 1e-12


def test_riemann_matches_captum_formulas_and_converges(mlp, rng) -> None:
    m, net64 = mlp[0], None
    net64 = nnlens.from_torch(m, torch.zeros(1, 6), precision="f64")
    x, b = rng.normal(size=(1, 6)), np.zeros((1, 6))
    exact, _ = nnlens.integrated_gradients(net64, x, b, target=1)
    for method in ("riemann_left", "riemann_right", "riemann_middle", "riemann_trapezoid", "gausslegendre"):
        errs = []
        for n in (4, 32, 256):
            a, delta = nnlens.integrated_gradients(net64, x, b, target=1, method=method, n_steps=n)
            # nnlens' trapezoid is the rule's own (weights summing to 1); Captum's sum to (n - 1) / n
            scale = (n - 1) / n if method == "riemann_trapezoid" else 1.0
            np.testing.assert_allclose(a[0] * scale, captum_ig(m, x[0], b[0], 1, n, method), rtol=1e-9, atol=1e-12)
            errs.append(np.abs(a - exact).max())
        assert errs[-1] < errs[0] and errs[-1] < 0.05 * np.abs(exact).max() + 1e-9, (method, errs)
    # the sums from the exact pieces' gradients (exact_ig_stream) beside the exact IG
    r = nnlens.exact_ig(net64, x[0], b[0], 1, sums=[("middle", 256), ("gausslegendre", 64)])
    np.testing.assert_allclose(r.attributions, exact[0], rtol=1e-12, atol=1e-12)
    a, _ = nnlens.integrated_gradients(net64, x, b, target=1, method="riemann_middle", n_steps=256)
    np.testing.assert_allclose(r.riemann[("middle", 256)], a[0], rtol=1e-9, atol=1e-9)


def test_ig_targets_and_baselines(cnn, rng) -> None:
    m, net = cnn
    X = rng.random((3, 1, 14, 14), dtype=np.float32)
    pred = torch_forward(m, X).argmax(1)
    a_none, _ = nnlens.integrated_gradients(net, X)
    a_pred, _ = nnlens.integrated_gradients(net, X, 0.0, target=pred)
    np.testing.assert_array_equal(a_none, a_pred)
    a_b, d_b = nnlens.integrated_gradients(net, X, np.full((1, 14, 14), 0.5, np.float32), target=[0, 1, 2])
    assert np.abs(d_b).max() < 1e-3
    with pytest.raises(nnlens.ShapeError):
        nnlens.integrated_gradients(net, X, np.zeros((2, 2)))
    with pytest.raises(nnlens.InvalidValueError, match="target"):
        nnlens.integrated_gradients(net, X, 0.0, target=9)
    with pytest.raises(nnlens.InvalidValueError, match="method"):
        nnlens.integrated_gradients(net, X, 0.0, method="riemann")


def test_ctrl_c_stops_a_long_call(lenet5, rng) -> None:
    X = rng.random((400, 1, 28, 28), dtype=np.float32)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        nnlens.integrated_gradients(lenet5, X, 0.0)
    timer.cancel()
    assert time.monotonic() - t0 < 3.0
