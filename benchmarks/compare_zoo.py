#!/usr/bin/python3
"""nnlens' forward against PyTorch's on torchvision 0.14's CNNs, interleaved (docs/benchmarks.md,
"torchvision CNNs: forward against PyTorch").

    /usr/bin/python3 benchmarks/compare_zoo.py [MODEL ...] [--cnn] [--bench PATH] [--peak PATH]
        [--pairs 3] [--calls 5] [--batches 1,16] [--sizes S,...] [--threads 1[,2]] [--dir DIR]
        [--opset 17] [--json FILE] [--markdown FILE] [--export-only] [--render JSON]

--cnn: the ten CNNs of the headline table (CNN_TABLE below) at batches 1, 16, 64, inputs 64 and 224,
one and two threads (models, --batches, --sizes and --threads given beside it still apply).

For each model (default: one per family, MODELS below) and input size S (default: 64, inception_v3
96, vgg and alexnet 224): the model with seeded random weights in eval mode (scripts/zoo/export.py's
build(): torchvision's initialisers, BatchNorm statistics calibrated on synthetic images and then
moved), exported once to DIR/MODEL-S/model.onnx (default DIR /tmp/nnlens-bench-zoo; torch.onnx.export
in eval mode, which folds each BatchNorm that follows a Conv into it).  Its GFLOP per image are the
multiply-adds of its Conv, Gemm and MatMul nodes (ONNX shape inference), two flops each.

Then, per batch and thread count T, PAIRS interleaved rounds in ABBA order (nnlens first in even
rounds, PyTorch first in odd ones): nnlens (bench_zoo --serve, one process per T that keeps the
model loaded: CALLS timed calls of forward(execution::seq, net, x), or with T > 1 forward(
execution::par) on NNLENS_NUM_THREADS = T threads), and PyTorch on T threads (torch.set_num_threads)
eager and TorchScript (torch.jit.optimize_for_inference(torch.jit.freeze(torch.jit.script(m))), or
torch.jit.trace when script fails).  Each round is a median of CALLS calls after one warm-up call
(3 calls where a call is over 10 GFLOP; there a mode 1.25x slower than the other in the first
round is not timed again).  PyTorch's OpenMP and oneDNN start on one thread
(OMP_NUM_THREADS=1); its mode is the one with the smaller median over the rounds.

Reported per model, size, batch and T: nnlens ms (median of the round medians, min-max), its
GFLOP/s and their fraction of bench_peak's float FMA peak on T threads (run before and after the
table: the mean of the two), PyTorch's best ms and its mode, and speed = PyTorch ms / nnlens ms
(above 1: nnlens is faster).  With T = 2, "PyTorch's best" is the faster of its one- and two-thread
runs of the same batch.  Before timing, nnlens' outputs on two images (bench_zoo --run) are checked
against PyTorch's: max |diff| / max |y| is in the row.  A model nnlens cannot load yet prints the
loader's error and the run goes on.  --markdown: a row per model, input and batch, the thread
counts side by side (mode: e eager, ts TorchScript, and PyTorch's threads); --render FILE prints that
table again from a --json FILE.  Exit 0, or 2 on bad usage.
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
CNN_TABLE = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "squeezenet1_1", "googlenet",
             "regnet_x_400mf", "resnext50_32x4d", "efficientnet_b0", "convnext_tiny"]
HEAVY_GFLOP = 10.0  # a call above this many GFLOP gets 3 timed calls per round


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

    def __init__(self, bench, path, threads=1):
        cmd = [bench, path, "--serve"] + (["--par"] if threads > 1 else [])
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                  env=dict(os.environ, NNLENS_NUM_THREADS=str(threads)))
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


def gflop_per_image(path):
    """Two flops per multiply-add of the model's Conv, Gemm and MatMul nodes, for one image."""
    import onnx
    from onnx import shape_inference
    m = shape_inference.infer_shapes(onnx.load(path))
    g = m.graph
    dims = {}
    for vi in list(g.value_info) + list(g.input) + list(g.output):
        dims[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    inits = {i.name: list(i.dims) for i in g.initializer}
    macs = 0
    for n in g.node:
        out = dims.get(n.output[0])
        if not out or len(n.input) < 2:
            continue
        per_image = 1
        for d in out[1:]:  # the batch axis is dynamic
            per_image *= max(d, 1)
        w = inits.get(n.input[1]) or dims.get(n.input[1])
        if n.op_type == "Conv" and w and len(w) >= 3:
            k = 1
            for d in w[1:]:
                k *= d  # C/groups * kh * kw
            macs += per_image * k
        elif n.op_type in ("Gemm", "MatMul") and w:
            trans_b = any(a.name == "transB" and a.i for a in n.attribute)
            macs += per_image * (w[-1] if trans_b else w[-2] if len(w) >= 2 else w[0])
    return 2.0 * macs / 1e9


def peak_gflops(path):
    """bench_peak's float FMA peak in GFLOP/s per thread count, {} when it cannot run."""
    if not path or not os.path.exists(path):
        return {}
    r = subprocess.run([path, "--benchmark_filter=peak/fma/float", "--benchmark_format=json"], capture_output=True, text=True)
    try:
        out = {}
        for b in json.loads(r.stdout)["benchmarks"]:
            out[int(b["name"].rsplit("threads:", 1)[1].split("/")[0])] = b["GFLOP/s"]
        return out
    except (ValueError, KeyError, IndexError):
        return {}


def summary(ms):
    return {"median": statistics.median(ms), "min": min(ms), "max": max(ms), "rounds": ms}


def compare(zoo, name, size, args):
    import torch
    row = {"model": name, "size": size}
    try:
        model, path = export(zoo, name, size, args.opset, args.dir)
    except Exception as e:
        row["error"] = "export: %s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")
        return row
    try:
        row["gflop"] = gflop_per_image(path)
    except Exception:
        row["gflop"] = None
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
    servers = {}
    try:
        for t in args.threads:
            servers[t] = Nnlens(args.bench, path, t)
            if servers[t].error:
                row["error"] = "nnlens: " + servers[t].error.strip().splitlines()[0]
                return row
        row["load_ms"] = servers[args.threads[0]].load_ms
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
                heavy = row["gflop"] is not None and row["gflop"] * batch > HEAVY_GFLOP
                calls = min(args.calls, 3) if heavy else args.calls
                pytorch_by_threads = {}
                for t in args.threads:
                    torch.set_num_threads(t)
                    tm = {"nnlens": []}
                    tm.update({m: [] for m in modes})

                    live = dict(modes)

                    def run_pytorch():
                        for m, f in live.items():
                            tm[m].append(median_of_calls(f, calls))
                        if heavy and len(tm[m]) == 1:  # heavy rows: after the first round, a mode
                            fast = min(tm[u][0] for u in live)  # 1.25x slower than the other drops out
                            for u in [u for u in live if tm[u][0] > 1.25 * fast]:
                                del live[u]

                    for k in range(args.pairs):  # ABBA: nnlens first in even rounds, PyTorch first in odd ones
                        if k % 2 == 0:
                            tm["nnlens"].append(servers[t].median(batch, calls))
                            run_pytorch()
                        else:
                            run_pytorch()
                            tm["nnlens"].append(servers[t].median(batch, calls))
                    best = min(live, key=lambda m: statistics.median(tm[m]))
                    pytorch_by_threads[t] = (best, tm[best])
                    # with T threads, PyTorch's best over its runs on at most T threads
                    pt_t, (pt_mode, pt_ms) = min(((u, v) for u, v in pytorch_by_threads.items() if u <= t),
                                                 key=lambda kv: statistics.median(kv[1][1]))
                    r = {"threads": t, "calls": calls, "nnlens": summary(tm["nnlens"]), "pytorch": summary(pt_ms),
                         "mode": pt_mode, "pytorch_threads": pt_t, "modes": {m: summary(tm[m]) for m in modes if tm[m]}}
                    r["speed"] = r["pytorch"]["median"] / r["nnlens"]["median"]
                    if row["gflop"]:
                        r["gflops"] = row["gflop"] * batch / (r["nnlens"]["median"] / 1e3)
                        r["pytorch_gflops"] = row["gflop"] * batch / (r["pytorch"]["median"] / 1e3)
                        if args.peak_by_threads.get(t):
                            r["peak_fraction"] = r["gflops"] / args.peak_by_threads[t]
                    row["b%d_t%d" % (batch, t)] = r
        torch.set_num_threads(1)
    finally:
        for sv in servers.values():
            sv.close()
    return row


def cells(r):
    """The (batch, threads) keys a row holds, in order."""
    out = []
    for k in r:
        if k.startswith("b") and "_t" in k:
            b, t = k[1:].split("_t")
            out.append((int(b), int(t)))
    return sorted(out)


def fmt_ms(s):
    return "%.2f (%.2f-%.2f)" % (s["median"], s["min"], s["max"])


def text_table(rows):
    lines = []
    for r in rows:
        if "error" in r:
            lines.append("%-20s %3d  %s" % (r["model"], r["size"], r["error"]))
            continue
        for b, t in cells(r):
            c = r["b%d_t%d" % (b, t)]
            perf = ("%6.1f GFLOP/s" % c["gflops"]) if "gflops" in c else ""
            if "peak_fraction" in c:
                perf += " %3.0f%% of peak" % (100 * c["peak_fraction"])
            lines.append("%-20s %3d  b%-3d t%d nnlens %-26s %s  pytorch %-26s %-11s t%d  speed %.2f  |diff| %.1e" % (
                r["model"], r["size"], b, t, fmt_ms(c["nnlens"]), perf, fmt_ms(c["pytorch"]), c["mode"],
                c["pytorch_threads"], c["speed"], r["max_rel_diff"]))
    return "\n".join(lines)


def markdown(rows):
    """One row per model, input and batch: one thread against one, then two against PyTorch's best
    on at most two."""
    threads = sorted({t for r in rows if "error" not in r for _, t in cells(r)})
    head = "| model | input | GFLOP/img | batch |"
    sep = "|---|---:|---:|---:|"
    for t in threads:
        head += " nnlens ms, %d thr | GFLOP/s (of peak) | PyTorch ms | speed |" % t
        sep += "---|---|---|---:|"
    out = [head, sep]
    for r in rows:
        if "error" in r:
            out.append("| %s | %d | | | %s |" % (r["model"], r["size"], r["error"].replace("|", "\\|")[:160]) + " |" * (4 * len(threads) - 1))
            continue
        for b in sorted({b for b, _ in cells(r)}):
            line = "| %s | %d | %s | %d |" % (r["model"], r["size"], "%.2f" % r["gflop"] if r.get("gflop") else "", b)
            for t in threads:
                c = r.get("b%d_t%d" % (b, t))
                if not c:
                    line += " | | | |"
                    continue
                perf = "%.0f" % c["gflops"] if "gflops" in c else ""
                if "peak_fraction" in c:
                    perf += " (%.0f%%)" % (100 * c["peak_fraction"])
                mode = ("e" if c["mode"] == "eager" else "ts") + str(c["pytorch_threads"])
                line += " %s | %s | %s %s | %.2f |" % (fmt_ms(c["nnlens"]), perf, fmt_ms(c["pytorch"]), mode, c["speed"])
            out.append(line)
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
    ap.add_argument("--cnn", action="store_true", help="the headline table: ten CNNs, batches 1,16,64, inputs 64,224, 1 and 2 threads")
    ap.add_argument("--bench", default=os.path.join(ROOT, "build-bench", "bin", "benchmarks", "bench_zoo"))
    ap.add_argument("--peak", default="", help="bench_peak (default: beside bench_zoo)")
    ap.add_argument("--pairs", type=int, default=3, help="interleaved rounds per batch (at least 3)")
    ap.add_argument("--calls", type=int, default=5, help="timed calls per round (its median)")
    ap.add_argument("--batches", default="")
    ap.add_argument("--sizes", default="", help="input sizes (default: the model's own, 64 for most)")
    ap.add_argument("--threads", default="", help="thread counts, e.g. 1,2 (default 1)")
    ap.add_argument("--opset", type=int, default=17)
    ap.add_argument("--dir", default=os.environ.get("ZOO_BENCH_DIR", "/tmp/nnlens-bench-zoo"))
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", default="")
    ap.add_argument("--export-only", action="store_true", help="export the models to DIR, print their paths, time nothing")
    ap.add_argument("--render", default="", help="print the markdown table of a --json FILE written before; time nothing")
    args = ap.parse_args()
    if args.render:
        with open(args.render) as f:
            print(markdown(json.load(f)["rows"]))
        return 0
    ints = lambda v: [int(b) for b in v.split(",") if b]
    args.batches = ints(args.batches or ("1,16,64" if args.cnn else "1,16"))
    args.sizes = ints(args.sizes or ("64,224" if args.cnn else ""))
    args.threads = ints(args.threads or ("1,2" if args.cnn else "1"))
    models = args.models or (CNN_TABLE if args.cnn else MODELS)
    if args.pairs < 1 or args.calls < 1 or not args.batches or min(args.batches + args.threads + args.sizes + [1]) < 1:
        ap.error("--pairs, --calls, --batches, --sizes and --threads must be positive")
    if not os.path.exists(args.bench):
        ap.error("no %s: cmake --build build-bench --target bench_zoo" % args.bench)
    args.peak = args.peak or os.path.join(os.path.dirname(args.bench), "bench_peak")
    warnings.filterwarnings("ignore")  # TorchScript's resize notices, the exporter's advice
    import torch
    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    zoo = zoo_export()
    work = [(name, size) for name in models for size in (args.sizes or [SIZES.get(name, 64)])]
    if args.export_only:
        for name, size in work:
            try:
                print(export(zoo, name, size, args.opset, args.dir)[1], flush=True)
            except Exception as e:
                print("%s: export: %s: %s" % (name, type(e).__name__, str(e).strip()[:200]), flush=True)
        return 0
    info = machine()
    peak_before = peak_gflops(args.peak)
    args.peak_by_threads = peak_before
    info["peak_gflops_before"] = peak_before
    print("# %s, %d cores, load %s, commit %s, torch %s, %d rounds x %d calls, bench_peak %s GFLOP/s" % (
        info["cpu"], info["nproc"], " ".join(info["load"]), info["commit"], torch.__version__, args.pairs, args.calls,
        ", ".join("%.0f on %d" % (v, k) for k, v in sorted(peak_before.items())) or "not run"), flush=True)
    rows = []
    for name, size in work:
        r = compare(zoo, name, size, args)
        rows.append(r)
        print(text_table([r]), flush=True)
    peak_after = peak_gflops(args.peak)
    info["peak_gflops_after"] = peak_after
    if peak_after:
        print("# bench_peak after: %s GFLOP/s" % ", ".join("%.0f on %d" % (v, k) for k, v in sorted(peak_after.items())))
        # the fractions against the mean of the two measurements
        mean = {k: (peak_before.get(k, v) + v) / 2 for k, v in peak_after.items()}
        info["peak_gflops"] = mean
        for r in rows:
            for b, t in cells(r) if "error" not in r else []:
                c = r["b%d_t%d" % (b, t)]
                if "gflops" in c and mean.get(t):
                    c["peak_fraction"] = c["gflops"] / mean[t]
    info["load_after"] = machine()["load"]
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "rows": rows}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
