#!/usr/bin/python3
"""nnlens' forward against PyTorch's on torchvision 0.14's CNNs, one thread each (docs/benchmarks.md,
"torchvision CNNs: forward against PyTorch").

    /usr/bin/python3 benchmarks/compare_zoo.py [MODEL ...] [--bench PATH] [--pairs 3] [--calls 5]
        [--batches 1,16] [--dir DIR] [--opset 17] [--json FILE] [--markdown FILE] [--export-only]

For each model (default: one per family, MODELS below): the model with seeded random weights in eval
mode (scripts/zoo/export.py's build(): torchvision's initialisers, BatchNorm statistics calibrated on
synthetic images and then moved), exported once to DIR/MODEL-S/model.onnx (default DIR
/tmp/nnlens-bench-zoo; torch.onnx.export in eval mode, which folds each BatchNorm that follows a Conv
into it) at input S x S: 64, inception_v3 96, vgg and alexnet 224.

Then, per batch (1 and 16), PAIRS interleaved rounds: nnlens (bench_zoo --serve, one process that
keeps the model loaded: CALLS timed calls of forward(execution::seq, net, x)), then PyTorch eager,
then PyTorch TorchScript (torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(m))), or
torch.jit.trace when script fails), each round a median of CALLS calls after one warm-up call.
PyTorch runs on one thread (torch.set_num_threads(1), OMP_NUM_THREADS=1 for its OpenMP and oneDNN);
its mode is the one with the smaller median over the rounds.  Reported per model and batch: nnlens
ms (median of the round medians, min-max), PyTorch ms (the same, and the mode), and speed =
PyTorch ms / nnlens ms (above 1: nnlens is faster).  Before timing, nnlens' outputs on two images
(bench_zoo --run) are checked against PyTorch's: max |diff| / max |y| is in the row.  A model nnlens
cannot load yet prints the loader's error and the run goes on.  Exit 0, or 2 on bad usage.
"""
import argparse
import warnings
import datetime
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time

for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[v] = "1"  # before torch is imported: its OpenMP pool and oneDNN read them
os.environ["NNLENS_NUM_THREADS"] = "1"

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORT = os.path.join(ROOT, "scripts", "zoo", "export.py")
MODELS = ["alexnet", "vgg11_bn", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "squeezenet1_1", "densenet121",
          "googlenet", "inception_v3", "mobilenet_v2", "mobilenet_v3_large", "mnasnet1_0", "shufflenet_v2_x1_0",
          "regnet_x_400mf", "regnet_y_400mf", "efficientnet_b0", "efficientnet_v2_s", "convnext_tiny"]
SIZES = {"alexnet": 224, "vgg11_bn": 224, "vgg11": 224, "inception_v3": 96}


def zoo_export():
    spec = importlib.util.spec_from_file_location("zoo_export", EXPORT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def export(zoo, name, size, opset, out_dir, seed=0):
    """The model (eval mode) and its ONNX file, exported unless DIR has it for these parameters."""
    import torch
    model = zoo.build(name, seed, size)
    d = os.path.join(out_dir, "%s-%d" % (name, size))
    path = os.path.join(d, "model.onnx")
    meta = os.path.join(d, "meta.json")
    want = {"model": name, "size": size, "opset": opset, "seed": seed, "recipe": zoo.RECIPE, "torch": torch.__version__}
    if os.path.exists(meta):
        with open(meta) as f:
            if json.load(f) == want and os.path.exists(path):
                return model, path
    os.makedirs(d, exist_ok=True)
    x = torch.zeros(1, 3, size, size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, x, path, opset_version=opset, input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, do_constant_folding=True)
    with open(meta, "w") as f:
        json.dump(want, f)
    return model, path


def torchscript(model, x):
    """optimize_for_inference(freeze(script or trace)), and which of the two it came from."""
    import torch
    try:
        s, how = torch.jit.script(model), "script"
    except Exception:
        s, how = torch.jit.trace(model, x), "trace"
    s = torch.jit.optimize_for_inference(torch.jit.freeze(s.eval()))
    return s, how


def median_of_calls(f, calls):
    f()  # one warm-up call per round
    t = []
    for _ in range(calls):
        t0 = time.perf_counter()
        f()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


class Nnlens:
    """bench_zoo --serve: one process with the model loaded."""

    def __init__(self, bench, path):
        self.p = subprocess.Popen([bench, path, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=dict(os.environ, NNLENS_NUM_THREADS="1"))
        line = self.p.stdout.readline()
        self.error = None
        try:
            first = json.loads(line)
        except ValueError:
            first = {"error": (line + self.p.stderr.read()).strip() or "no output"}
        if "error" in first:
            self.error = first["error"]
            self.close()
        self.load_ms = first.get("load_ms")

    def median(self, batch, calls):
        self.p.stdin.write("%d %d\n" % (batch, calls + 1))
        self.p.stdin.flush()
        r = json.loads(self.p.stdout.readline())
        return statistics.median(r["ms"][1:])  # the first call is the round's warm-up

    def close(self):
        try:
            self.p.stdin.close()
        except Exception:
            pass
        self.p.wait()


def summary(ms):
    return {"median": statistics.median(ms), "min": min(ms), "max": max(ms), "rounds": ms}


def compare(zoo, name, args):
    import torch
    size = SIZES.get(name, 64)
    row = {"model": name, "size": size}
    try:
        model, path = export(zoo, name, size, args.opset, args.dir)
    except Exception as e:
        row["error"] = "export: %s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
        return row
    # the same outputs first: nnlens on two images against PyTorch's float32 logits
    with torch.no_grad():
        xc = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(7))
        ref = model(xc).numpy()
    fin, fout = os.path.join(os.path.dirname(path), "check_in.f32"), os.path.join(os.path.dirname(path), "check_out.f32")
    xc.numpy().astype("float32").tofile(fin)
    r = subprocess.run([args.bench, path, "--run", fin, fout], capture_output=True, text=True)
    if r.returncode != 0:
        row["error"] = "nnlens: " + ((r.stderr or r.stdout).strip().splitlines() or ["exit %d" % r.returncode])[0]
        return row
    import numpy as np
    got = np.fromfile(fout, dtype=np.float32).reshape(ref.shape)
    row["max_rel_diff"] = float(np.abs(got - ref).max() / max(1e-30, float(np.abs(ref).max())))
    nn = Nnlens(args.bench, path)
    if nn.error:
        row["error"] = "nnlens: " + nn.error.strip().splitlines()[0]
        return row
    row["load_ms"] = nn.load_ms
    try:
        with torch.no_grad():
            x1 = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1))
            try:
                ts, how = torchscript(model, x1)
            except Exception as e:
                ts, how = None, "failed: %s" % type(e).__name__
            row["torchscript"] = how
            for batch in args.batches:
                x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(batch))
                modes = {"eager": lambda: model(x)}
                if ts is not None:
                    for _ in range(2):  # the profiling executor specialises on the first calls
                        ts(x)
                    modes["torchscript"] = lambda: ts(x)
                t = {"nnlens": []}
                t.update({m: [] for m in modes})
                for _ in range(args.pairs):
                    t["nnlens"].append(nn.median(batch, args.calls))
                    for m, f in modes.items():
                        t[m].append(median_of_calls(f, args.calls))
                best = min(modes, key=lambda m: statistics.median(t[m]))
                r = {"nnlens": summary(t["nnlens"]), "pytorch": summary(t[best]), "mode": best,
                     "modes": {m: summary(t[m]) for m in modes}}
                r["speed"] = r["pytorch"]["median"] / r["nnlens"]["median"]
                row["b%d" % batch] = r
    finally:
        nn.close()
    return row


def fmt_ms(s):
    return "%.2f (%.2f-%.2f)" % (s["median"], s["min"], s["max"])


def text_table(rows, batches):
    lines = []
    for r in rows:
        if "error" in r:
            lines.append("%-20s %s" % (r["model"], r["error"]))
            continue
        for b in batches:
            c = r["b%d" % b]
            lines.append("%-20s %3d  b%-3d nnlens %-26s pytorch %-26s %-12s speed %.2f  |diff| %.1e" % (
                r["model"], r["size"], b, fmt_ms(c["nnlens"]), fmt_ms(c["pytorch"]), c["mode"], c["speed"],
                r["max_rel_diff"]))
    return "\n".join(lines)


def markdown(rows, batches):
    head = "| model | input | out Δ |" + "".join(" nnlens ms, batch %d | PyTorch ms, batch %d | speed |" % (b, b) for b in batches)
    sep = "|---|---|---|" + "---|---|---|" * len(batches)
    out = [head, sep]
    for r in rows:
        if "error" in r:
            out.append("| %s | %d | %s |" % (r["model"], r["size"], r["error"].replace("|", "\\|")[:160]) +
                       " |" * (3 * len(batches)))
            continue
        cells = ""
        for b in batches:
            c = r["b%d" % b]
            mode = "e" if c["mode"] == "eager" else "ts"
            cells += " %s | %s %s | %.2f |" % (fmt_ms(c["nnlens"]), fmt_ms(c["pytorch"]), mode, c["speed"])
        out.append("| %s | %d | %.0e |%s" % (r["model"], r["size"], r["max_rel_diff"], cells))
    return "\n".join(out)


def machine():
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for l in f:
                if l.startswith("model name"):
                    cpu = l.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    return {"cpu": cpu, "nproc": os.cpu_count(), "load": load, "commit": rev,
            "date": datetime.date.today().isoformat()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*", help="torchvision model names (default: one per family)")
    ap.add_argument("--bench", default=os.path.join(ROOT, "build-bench", "bin", "benchmarks", "bench_zoo"))
    ap.add_argument("--pairs", type=int, default=3, help="interleaved rounds per batch (at least 3)")
    ap.add_argument("--calls", type=int, default=5, help="timed calls per round (its median)")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--dir", default=os.environ.get("ZOO_BENCH_DIR", "/tmp/nnlens-bench-zoo"))
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--export-only", action="store_true", help="export the models to DIR, print their paths, time nothing")
    args = ap.parse_args()
    args.batches = [int(b) for b in args.batches.split(",") if b]
    if args.pairs < 1 or args.calls < 1 or not args.batches:
        ap.error("--pairs, --calls and --batches must be positive")
    if not os.path.exists(args.bench):
        ap.error("no %s: cmake --build build-bench --target bench_zoo" % args.bench)
    warnings.filterwarnings("ignore")  # TorchScript's resize notices, the exporter's advice
    import torch
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    zoo = zoo_export()
    if args.export_only:
        for name in args.models or MODELS:
            try:
                print(export(zoo, name, SIZES.get(name, 64), args.opset, args.dir)[1], flush=True)
            except Exception as e:
                print("%s: export: %s: %s" % (name, type(e).__name__, str(e).strip()[:200]), flush=True)
        return 0
    info = machine()
    print("# %s, %d cores, load %s, commit %s, torch %s, %d rounds x %d calls" % (
        info["cpu"], info["nproc"], " ".join(info["load"]), info["commit"], torch.__version__, args.pairs, args.calls),
        flush=True)
    rows = []
    for name in args.models or MODELS:
        r = compare(zoo, name, args)
        rows.append(r)
        print(text_table([r], args.batches), flush=True)
    info["load_after"] = machine()["load"]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "rows": rows}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, args.batches) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
