#!/usr/bin/env python3
"""Exact integrated gradients (nnlens, from Python) beside Captum's approximations on the same
PyTorch model, with the same call shape: attributions and completeness delta for a batch of inputs.

Captum is not packaged for Debian, so its two methods are written here in PyTorch autograd from
Captum's own formulas (captum/attr/_utils/approximation_methods.py): "gausslegendre" (Captum's
default: numpy's leggauss nodes mapped to [0, 1]) and "riemann_trapezoid" (n_steps points
linspace(0, 1), weights 1 / n_steps with the two ends halved), each one batched forward + backward
over the n_steps points of every input, as IntegratedGradients.attribute does.

The model: a LeNet-5 (Conv 6x5x5 p2, ReLU, MaxPool 2, Conv 16x5x5, ReLU, MaxPool 2, Dense 120, 84,
10) with PyTorch's default initialisation from torch.manual_seed(0), on 28 x 28 images of uniform
noise (seeded); baseline black.  The error of an approximation is ||a - exact||_1 / ||exact||_1
over all inputs' attributions; |delta| is the mean absolute completeness gap sum(a) - (F(x) - F(x')).

  PYTHONPATH=build/python /usr/bin/python3 benchmarks/python_ig_captum.py [--inputs 8] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

import nnlens


def lenet5() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 6, 5, padding=2), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(6, 16, 5), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
        torch.nn.Linear(400, 120), torch.nn.ReLU(), torch.nn.Linear(120, 84), torch.nn.ReLU(),
        torch.nn.Linear(84, 10)).eval()


def captum_ig(model: torch.nn.Module, x: torch.Tensor, b: torch.Tensor, target: torch.Tensor, n_steps: int,
              method: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Captum's IntegratedGradients.attribute(x, b, target, n_steps, method,
    return_convergence_delta=True), in autograd."""
    if method == "gausslegendre":
        nodes, weights = np.polynomial.legendre.leggauss(n_steps)
        alphas, w = (nodes + 1) / 2, weights / 2
    else:  # riemann_trapezoid
        alphas = np.linspace(0, 1, n_steps)
        w = np.full(n_steps, 1.0 / n_steps)
        w[0] = w[-1] = 0.5 / n_steps
    a = torch.as_tensor(alphas, dtype=x.dtype).view(-1, 1, 1, 1, 1)
    pts = (b[None] + a * (x - b)[None]).reshape(-1, *x.shape[1:]).requires_grad_(True)  # [n_steps * N, ...]
    out = model(pts)
    sel = out.gather(1, target.repeat(n_steps).view(-1, 1)).sum()
    (g,) = torch.autograd.grad(sel, pts)
    g = g.view(n_steps, *x.shape) * torch.as_tensor(w, dtype=x.dtype).view(-1, 1, 1, 1, 1)
    attr = (x - b) * g.sum(0)
    with torch.no_grad():
        fx = model(x).gather(1, target.view(-1, 1))[:, 0]
        fb = model(b).gather(1, target.view(-1, 1))[:, 0]
    return attr, attr.flatten(1).sum(1) - (fx - fb)


def timed(f, repeat: int = 3):  # noqa: ANN001, ANN201
    """The best of `repeat` runs after one warm-up run."""
    best, r = float("inf"), f()
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = f()
        best = min(best, time.perf_counter() - t0)
    return best, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2, help="torch threads and nnlens' pool")
    ap.add_argument("--steps", default="16,50,128,512")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    nnlens.set_threads(args.threads)
    model = lenet5()
    rng = np.random.default_rng(0)
    X = rng.random((args.inputs, 1, 28, 28), dtype=np.float32)
    B = np.zeros_like(X)
    with torch.no_grad():
        target = model(torch.from_numpy(X)).argmax(1)
    rows = []
    for prec, dtype in (("f32", torch.float32), ("f64", torch.float64)):
        net = nnlens.from_torch(model, torch.zeros(1, 1, 28, 28), precision=prec)
        xs, bs = X.astype(np.float64 if prec == "f64" else np.float32), B.astype(np.float64 if prec == "f64" else np.float32)
        t, (exact, delta) = timed(lambda: nnlens.integrated_gradients(net, xs, bs, target=target.numpy()))
        pieces = [nnlens.exact_ig(net, xs[i], bs[i], int(target[i])).pieces for i in range(len(xs))]
        rows.append((prec, "nnlens exact", "-", t, 0.0, float(np.abs(delta).mean()), f"{np.mean(pieces):.0f} pieces/input"))
        norm = np.abs(exact).sum()
        m = model.to(dtype)
        xt, bt = torch.from_numpy(xs).to(dtype), torch.from_numpy(bs).to(dtype)
        for method in ("gausslegendre", "riemann_trapezoid"):
            for n in (int(s) for s in args.steps.split(",")):
                t, (a, d) = timed(lambda: captum_ig(m, xt, bt, target, n, method))
                err = float(np.abs(a.detach().numpy() - exact).sum() / norm)
                rows.append((prec, f"Captum {method}", n, t, err, float(d.abs().mean()), ""))
            t, (a, d) = timed(lambda: nnlens.integrated_gradients(net, xs, bs, target=target.numpy(), method=method, n_steps=50))
            rows.append((prec, f"nnlens {method}", 50, t, float(np.abs(a - exact).sum() / norm), float(np.abs(d).mean()), ""))
        model.float()
    print(f"{args.inputs} inputs, LeNet-5 (torch.manual_seed(0)), baseline black, {args.threads} threads")
    print("| precision | method | n_steps | seconds | L1 error vs exact | mean abs delta | |")
    print("|---|---|---|---|---|---|---|")
    for p, name, n, t, e, d, note in rows:
        print(f"| {p} | {name} | {n} | {t:.4f} | {e:.2e} | {d:.2e} | {note} |")


if __name__ == "__main__":
    main()
