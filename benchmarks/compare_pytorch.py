#!/usr/bin/python3
"""Side-by-side throughput: nnlens (bench_core, Google Benchmark) vs PyTorch on the same
architectures, batch sizes and thread counts.  Prints medians and the ratio nnlens / PyTorch.

    /usr/bin/python3 benchmarks/compare_pytorch.py [--bench build/bin/benchmarks/bench_core]
                                                   [--threads 1 2] [--reps 5] [--markdown]

Needs Debian's python3-torch (never a dependency of the library itself).  Both sides use the same
thread count: NNLENS_NUM_THREADS for nnlens; for PyTorch torch.set_num_threads plus OMP_NUM_THREADS
and OPENBLAS_NUM_THREADS, set in a fresh worker process before torch loads.  Debian's torch is built
with BLAS_INFO=generic: its Linear layers run on whatever libblas.so.3 the alternatives system
selects, so install OpenBLAS (benchmarks/run_comparison selects the OpenMP build, which shares
torch's OpenMP pool).  Each PyTorch measurement runs under OMP_WAIT_POLICY=PASSIVE and ACTIVE and
the better one is kept (with ACTIVE, 2 threads on 2 cores ran 5x slower than 1 here).  Batch-1
forward runs on one thread on both sides (nnlens' batch-1 path is sequential).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn


def mlp():
    layers, width = [], 784
    for _ in range(6):
        layers += [nn.Linear(width, 256), nn.ReLU()]
        width = 256
    layers.append(nn.Linear(256, 10))
    return nn.Sequential(*layers)


def lenet5():
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


NETS = {"mlp": (mlp, (784,)), "lenet5": (lenet5, (1, 28, 28))}


def median_rate(fn, batch, reps, min_time=0.5):
    """Median samples/s over `reps` repetitions, each running fn for at least min_time seconds."""
    fn()  # warm-up
    rates = []
    for _ in range(reps):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= min_time:
                break
        rates.append(n * batch / dt)
    return statistics.median(rates)


def torch_worker(threads, reps, train_batch, names):
    """Runs in a fresh process whose OpenMP/OpenBLAS environment was set before torch loaded."""
    out = {}
    for name in names:
        out.update(torch_rates(name, threads, reps, train_batch))
    print(json.dumps(out))


def torch_rates_subprocess(threads, reps, train_batch, names):
    best = {}
    for policy in ("PASSIVE", "ACTIVE"):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   OMP_WAIT_POLICY=policy)
        cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", str(threads), "--reps", str(reps),
               "--train-batch", str(train_batch), "--nets", *names]
        res = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
        for k, v in res.items():
            best[k] = max(best.get(k, 0.0), v)
    return best


def torch_rates(name, threads, reps, train_batch):
    make, shape = NETS[name]
    torch.manual_seed(0)
    net = make().eval()
    out = {}
    with torch.no_grad():
        jit = torch.jit.freeze(torch.jit.script(net))
    for batch in (1, 256):
        torch.set_num_threads(1 if batch == 1 else threads)
        x = torch.rand((batch,) + shape)
        with torch.no_grad():
            out[f"forward/{name}/{batch}"] = median_rate(lambda: net(x), batch, reps)
            out[f"jit:forward/{name}/{batch}"] = median_rate(lambda: jit(x), batch, reps)
    torch.set_num_threads(threads)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.rand((train_batch,) + shape)
    y = torch.randint(0, 10, (train_batch,))

    def step():
        opt.zero_grad(set_to_none=False)
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()

    out[f"train_step/{name}/{train_batch}"] = median_rate(step, train_batch, reps)
    return out


def nnlens_rates(bench, threads, reps):
    env = dict(os.environ, NNLENS_NUM_THREADS=str(threads))
    cmd = [bench, "--benchmark_format=json", f"--benchmark_repetitions={reps}",
           "--benchmark_report_aggregates_only=true", "--benchmark_min_time=0.5"]
    res = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
    out = {}
    for b in res["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        key = b["run_name"].replace("/real_time", "")
        out[key] = b["samples/s"]
    return out, res.get("context", {})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bench", default=os.path.join(here, "..", "build", "bin", "benchmarks", "bench_core"))
    ap.add_argument("--threads", type=int, nargs="+", default=[os.cpu_count()])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--train-batch", type=int, default=64)
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--torch-worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--nets", nargs="*", default=list(NETS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        torch_worker(args.torch_worker, args.reps, args.train_batch, args.nets)
        return
    if not os.path.exists(args.bench):
        sys.exit(f"compare_pytorch: {args.bench} not found; run ./scripts/build first")

    rows = []
    for threads in args.threads:
        ours, ctx = nnlens_rates(args.bench, threads, args.reps)
        names = [n for n in NETS if any(k.split("/")[1] == n for k in ours)]
        theirs = torch_rates_subprocess(threads, args.reps, args.train_batch, names)
        for key in sorted(k for k in theirs if not k.startswith("jit:")):
            if key in ours:
                jit = theirs.get("jit:" + key)
                rows.append((threads, key, ours[key], theirs[key], jit))

    blas = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    print(f"# machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
          f"({ctx.get('num_cpus', '?')} seen by benchmark, {ctx.get('mhz_per_cpu', '?')} MHz); "
          f"torch {torch.__version__} (BLAS: {blas}); medians of {args.reps} repetitions")
    def fmt(v):
        return "-" if v is None else f"{v:,.0f}"

    def ratio(a, b):
        return "-" if b is None else f"{a / b:.2f}x"

    if args.markdown:
        print("| threads | benchmark | nnlens samples/s | PyTorch eager | ratio | TorchScript (frozen) | ratio |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for t, k, a, b, j in rows:
            print(f"| {t} | {k} | {a:,.0f} | {b:,.0f} | {ratio(a, b)} | {fmt(j)} | {ratio(a, j)} |")
    else:
        print(f"{'threads':>7}  {'benchmark':<24} {'nnlens/s':>12} {'eager/s':>12} {'ratio':>7} {'jit/s':>12} {'ratio':>7}")
        for t, k, a, b, j in rows:
            print(f"{t:>7}  {k:<24} {a:>12,.0f} {b:>12,.0f} {ratio(a, b):>7} {fmt(j):>12} {ratio(a, j):>7}")


if __name__ == "__main__":
    main()
