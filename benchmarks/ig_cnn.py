#!/usr/bin/python3
"""Exact integrated gradients on CNNs against the approximations users run (docs/exactline-ig.md).

    /usr/bin/python3 benchmarks/ig_cnn.py [MODEL ...] [--tool PATH] [--size 64] [--threads 1]
        [--steps 2,4,...,4096] [--cifar-model resnet_2b.onnx] [--dir DIR] [--json FILE] [--svg-dir DIR]

MODEL: a torchvision name (default resnet18 and mobilenet_v2, exported as compare_zoo.py exports
them: seeded random weights, eval mode) or `cifar_resnet`: the trained CIFAR-10 residual network of
VNN-COMP 2021 (resnet_2b.onnx, given by --cifar-model; 32x32), evaluated in PyTorch by a few lines
that run its ONNX graph (Conv, Relu, Add, Flatten, Gemm).  Input x: a seeded random image (uniform [0, 1], normalised with the dataset's mean
and std); baseline x': the black image, normalised alike (Captum's usual choice); target: the class
PyTorch predicts at x.

Exact IG: `nnlens ig MODEL --input x --baseline x' --output-index k --json --threads T` in f64 and
in f32, timed as processes (model load and CSV parsing included): its pieces, its completeness
(|sum - delta| / |delta|) and wall time.

The approximations, in PyTorch float32 with autograd as Captum computes them (Captum is not
packaged here; these are its documented formulas, gradients in batches of 64 like its
internal_batch_size; the nodes are computed outside the timing): riemann_left (alphas i/n, i < n), riemann_right (i/n, i = 1..n),
riemann_trapezoid (n points linspace(0, 1, n), end weights halved) and gausslegendre (numpy's
leggauss(n) mapped to [0, 1]; Captum's default method), at each n of --steps.  The error against the
exact attribution e (f64): sum |a - e| / sum |e| over the input elements.  Reported per method: the
error at each n, the smallest n of --steps below 5 % and below 1 %, and the wall time there;
PyTorch on T threads.  --svg-dir: a log-log chart of error against steps per model.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METHODS = ["riemann_left", "riemann_right", "riemann_trapezoid", "gausslegendre"]
COLOURS = {"riemann_left": "#1f77b4", "riemann_right": "#ff7f0e", "riemann_trapezoid": "#2ca02c",
           "gausslegendre": "#d62728"}


def compare_zoo():
    spec = importlib.util.spec_from_file_location("compare_zoo", os.path.join(ROOT, "benchmarks", "compare_zoo.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


class OnnxTorch:
    """A torch callable for an ONNX graph of Conv, Relu, Add, Flatten and Gemm nodes."""

    def __init__(self, path):
        import onnx
        from onnx import numpy_helper
        import torch
        self.g = onnx.load(path).graph
        self.w = {t.name: torch.tensor(numpy_helper.to_array(t).copy()) for t in self.g.initializer}
        self.input = [i.name for i in self.g.input if i.name not in self.w][0]

    def __call__(self, x):
        import torch.nn.functional as F
        env = dict(self.w)
        env[self.input] = x
        for n in self.g.node:
            a = {t.name: t for t in n.attribute}
            ins = [env[i] for i in n.input if i]
            if n.op_type == "Conv":
                pads = list(a["pads"].ints) if "pads" in a else [0, 0, 0, 0]
                strides = list(a["strides"].ints) if "strides" in a else [1, 1]
                if pads[0] != pads[2] or pads[1] != pads[3]:
                    raise ValueError("asymmetric padding")
                y = F.conv2d(ins[0], ins[1], ins[2] if len(ins) > 2 else None, stride=strides, padding=pads[:2],
                             groups=a["group"].i if "group" in a else 1)
            elif n.op_type == "Relu":
                y = F.relu(ins[0])
            elif n.op_type == "Add":
                y = ins[0] + ins[1]
            elif n.op_type == "Flatten":
                y = ins[0].flatten(1)
            elif n.op_type == "Gemm":
                wt = ins[1].t() if ("transB" in a and a["transB"].i) else ins[1]
                y = ins[0] @ wt + (ins[2] if len(ins) > 2 else 0)
            else:
                raise ValueError("OnnxTorch: no %s" % n.op_type)
            env[n.output[0]] = y
        return env[self.g.output[0].name]


def alphas_weights(method, n):
    import numpy as np
    if method == "riemann_left":
        return np.arange(n) / n, np.full(n, 1.0 / n)
    if method == "riemann_right":
        return np.arange(1, n + 1) / n, np.full(n, 1.0 / n)
    if method == "riemann_trapezoid":
        a = np.linspace(0, 1, n)
        w = np.full(n, 1.0 / (n - 1))
        w[0] = w[-1] = 0.5 / (n - 1)
        return a, w
    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1) / 2, w / 2


def approx_ig(f, x, b, k, alphas, weights, batch=64):
    """Captum's formula: (x - b) * sum_i w_i dF_k/dx (b + alpha_i (x - b)), gradients in batches."""
    import torch
    n = len(alphas)
    total = torch.zeros_like(x)
    for s in range(0, n, batch):
        a = torch.tensor(alphas[s:s + batch], dtype=x.dtype).view(-1, 1, 1, 1)
        w = torch.tensor(weights[s:s + batch], dtype=x.dtype).view(-1, 1, 1, 1)
        pts = (b + a * (x - b)).requires_grad_(True)
        out = f(pts)[:, k].sum()
        g, = torch.autograd.grad(out, pts)
        total += (w * g).sum(0, keepdim=True)
    return ((x - b) * total)[0]


def exact_ig(tool, model, xcsv, bcsv, k, prec, threads):
    cmd = [tool, "ig", model, "--input", xcsv, "--baseline", bcsv, "--output-index", str(k), "--json", "--no-progress",
           "--precision", prec, "--threads", str(threads), "--m", "16", "--no-samples-to-reach"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError("nnlens ig (%s): %s" % (prec, r.stderr.strip()))
    j = json.loads(r.stdout)
    return j, wall


def svg_chart(path, title, rows, steps):
    """Error against steps, log-log, a polyline per method, the 1 % and 5 % lines."""
    import math
    W, H, L, T, B = 560, 340, 60, 30, 40
    xs = [math.log10(s) for s in steps]
    errs = [e for m in METHODS for e in rows[m]["errors"] if e > 0]
    lo, hi = math.floor(math.log10(min(errs + [0.001]))), math.ceil(math.log10(max(errs + [1.0])))
    px = lambda s: L + (math.log10(s) - xs[0]) / (xs[-1] - xs[0]) * (W - L - 20)
    py = lambda e: T + (hi - math.log10(max(e, 10 ** lo))) / (hi - lo) * (H - T - B)
    o = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (W, H),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="18" font-size="13">%s</text>' % (L, title)]
    for d in range(lo, hi + 1):
        o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#dddddd"/><text x="%d" y="%.1f" text-anchor="end">1e%d</text>'
                 % (L, W - 20, py(10 ** d), py(10 ** d), L - 4, py(10 ** d) + 4, d))
    for s in steps:
        o.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (px(s), H - B + 14, s))
    for e, lab in ((0.05, "5 %"), (0.01, "1 %")):
        o.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#888888" stroke-dasharray="4,3"/>'
                 '<text x="%d" y="%.1f" fill="#555555">%s</text>' % (L, W - 20, py(e), py(e), W - 50, py(e) - 3, lab))
    for i, m in enumerate(METHODS):
        pts = " ".join("%.1f,%.1f" % (px(s), py(e)) for s, e in zip(steps, rows[m]["errors"]))
        o.append('<polyline fill="none" stroke="%s" stroke-width="1.6" points="%s"/>' % (COLOURS[m], pts))
        o.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>'
                 % (L + 10 + 125 * i, H - 16, COLOURS[m], L + 24 + 125 * i, H - 7, m))
    o.append('<text x="%d" y="%d" text-anchor="middle">gradient evaluations (n_steps)</text>' % ((W + L) // 2, H - B + 27))
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--tool", default=os.path.join(ROOT, "build-bench", "bin", "nnlens"))
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", default=",".join(str(2 ** i) for i in range(1, 13)))
    ap.add_argument("--dir", default=os.environ.get("ZOO_BENCH_DIR", "/tmp/nnlens-bench-zoo"))
    ap.add_argument("--cifar-model", default="", help="resnet_2b.onnx (VNN-COMP 2021 cifar10_resnet), for cifar_resnet")
    ap.add_argument("--json", default="")
    ap.add_argument("--svg-dir", default="")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    import numpy as np
    import torch
    torch.set_num_threads(args.threads)
    steps = [int(s) for s in args.steps.split(",") if s]
    cz = compare_zoo()
    zoo = cz.zoo_export()
    info = cz.machine()
    print("# %s, %d cores, commit %s, %d threads, torch %s" % (info["cpu"], info["nproc"], info["commit"], args.threads,
                                                                torch.__version__), flush=True)
    out = []
    for name in args.models or ["resnet18", "mobilenet_v2"]:
        if name == "cifar_resnet":
            if not os.path.exists(args.cifar_model):
                print("ig_cnn.py: cifar_resnet needs --cifar-model PATH (resnet_2b.onnx)", file=sys.stderr)
                return 2
            path, size = args.cifar_model, 32
            f = OnnxTorch(path)
            mean, std = [0.4914, 0.4822, 0.4465], [0.2470, 0.2435, 0.2616]
            d = os.path.join(args.dir, "cifar_resnet")
        else:
            model, path = cz.export(zoo, name, args.size, 17, args.dir)
            size, f = args.size, model
            mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
            d = os.path.dirname(path)
        os.makedirs(d, exist_ok=True)
        m_t = torch.tensor(mean).view(1, 3, 1, 1)
        s_t = torch.tensor(std).view(1, 3, 1, 1)
        g = torch.Generator().manual_seed(7)
        x = (torch.rand(1, 3, size, size, generator=g) - m_t) / s_t
        b = (torch.zeros(1, 3, size, size) - m_t) / s_t
        xcsv, bcsv = os.path.join(d, "ig_x.csv"), os.path.join(d, "ig_baseline.csv")
        for p, v in ((xcsv, x), (bcsv, b)):
            with open(p, "w") as fh:
                fh.write(",".join("%.9g" % e for e in v.flatten().tolist()) + "\n")
        # the CSVs' decimals read back as the same float32 values: PyTorch runs on those
        x = torch.tensor(np.loadtxt(xcsv, delimiter=",", dtype=np.float32)).view(1, 3, size, size)
        b = torch.tensor(np.loadtxt(bcsv, delimiter=",", dtype=np.float32)).view(1, 3, size, size)
        with torch.no_grad():
            k = int(f(x).argmax())
        row = {"model": name, "size": size, "target": k, "exact": {}, "methods": {}}
        ref = None
        for prec in ("f64", "f32"):
            j, wall = exact_ig(args.tool, path, xcsv, bcsv, k, prec, args.threads)
            e = np.array(j["exact"], dtype=np.float64)
            if ref is None:
                ref = e
            row["exact"][prec] = {"pieces": j["pieces"], "wall_s": wall, "delta": j["delta"],
                                  "completeness": abs(e.sum() - j["delta"]) / max(abs(j["delta"]), 1e-300),
                                  "error_vs_f64": float(np.abs(e - ref).sum() / np.abs(ref).sum())}
            print("%-14s exact IG %s: %d pieces, %.1f s, completeness %.2g, error against f64 %.2g" % (
                name, prec, j["pieces"], wall, row["exact"][prec]["completeness"], row["exact"][prec]["error_vs_f64"]),
                flush=True)
        norm = np.abs(ref).sum()
        for method in METHODS:
            errs, times = [], []
            for n in steps:
                if method == "riemann_trapezoid" and n < 2:
                    errs.append(float("nan")), times.append(0.0)
                    continue
                alphas, weights = alphas_weights(method, n)  # not timed (numpy's leggauss is O(n^2))
                t0 = time.perf_counter()
                a = approx_ig(f, x, b, k, alphas, weights).detach().double().numpy().ravel()
                times.append(time.perf_counter() - t0)
                errs.append(float(np.abs(a - ref).sum() / norm))
            need = {}
            for tol in (0.05, 0.01):
                hit = [i for i, e in enumerate(errs) if e < tol]
                need[str(tol)] = {"steps": steps[hit[0]], "wall_s": times[hit[0]]} if hit else None
            row["methods"][method] = {"steps": steps, "errors": errs, "wall_s": times, "need": need}
            fmt = lambda v: ("%d steps, %.2f s" % (v["steps"], v["wall_s"])) if v else "> %d steps" % steps[-1]
            print("%-14s %-18s 5%%: %-22s 1%%: %-22s errors %s" % (name, method, fmt(need["0.05"]), fmt(need["0.01"]),
                                                                  " ".join("%.3g" % e for e in errs)), flush=True)
        if args.svg_dir:
            os.makedirs(args.svg_dir, exist_ok=True)
            svg_chart(os.path.join(args.svg_dir, "exactline-ig-%s.svg" % name),
                      "%s (%dx%d): error of approximate IG against exact IG" % (name, size, size), row["methods"], steps)
        out.append(row)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": info, "rows": out}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
