#!/usr/bin/python3
"""Side-by-side throughput, nnlens (bench_core, Google Benchmark) vs PyTorch, measured interleaved.

    /usr/bin/python3 benchmarks/compare_pytorch.py [--bench build/bin/benchmarks/bench_core]
        [--threads 1 2] [--peer 1 2] [--pairs 5] [--min-time 0.3] [--rows forward/mlp/256 ...]
        [--markdown] [--json FILE]

Protocol (docs/benchmarks.md, "Protocol for peer ratios").  The machines are shared: the same binary
measured 41k, 50k and 72k samples/s in three back-to-back runs.  So the two sides are never
measured in separate blocks.  For each row (e.g. forward/mlp/256), pair i measures nnlens at every
thread count of --threads (one bench_core process per measurement, --benchmark_min_time=MIN_TIME)
and PyTorch in every configuration (thread count of --peer x eager / frozen TorchScript), each
for at least MIN_TIME seconds, then the next pair; nnlens goes first in even pairs and PyTorch in
odd ones (ABBA), so that a drift of the load does not always favour one side.  Per row:
  - the peer's configuration is the one with the highest median rate over the pairs (its better
    thread setting, and eager or TorchScript, whichever is faster for that row; the table says
    which);
  - ratio_i = nnlens rate in pair i / that configuration's rate in pair i (nnlens / PyTorch, > 1
    means nnlens is faster); the table gives the median of the ratio_i and their range (min-max).
The load average before and after is printed; run it as it is, and quote every row.

PyTorch: Debian's python3-torch (never a dependency of the library itself).  Each PyTorch thread
count runs in its own persistent worker process whose OMP_NUM_THREADS / OPENBLAS_NUM_THREADS /
OMP_WAIT_POLICY are set before torch loads (--peer 2:ACTIVE adds a 2-thread worker with the ACTIVE
wait policy; PASSIVE is the default: with ACTIVE, 2 threads on 2 shared cores ran 5x slower than
1).  Debian's torch is built with BLAS_INFO=generic: its Linear layers run on whatever libblas.so.3
the alternatives system selects, so select OpenBLAS (benchmarks/run_comparison selects the OpenMP
build, which shares torch's OpenMP pool); the script refuses the reference BLAS unless
--allow-reference-blas.  nnlens: NNLENS_NUM_THREADS; its batch-1 forward is sequential whatever
the thread count.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROWS = ["forward/mlp/1", "forward/mlp/256", "forward/lenet5/1", "forward/lenet5/256",
        "train_step/mlp/64", "train_step/lenet5/64"]
BLAS = "/usr/lib/x86_64-linux-gnu/libblas.so.3"


# ---------------------------------------------------------------------------------------------
# PyTorch worker: a persistent process, one per peer thread setting; reads one JSON request per
# line on stdin ({"row": ..., "mode": "eager"|"jit", "min_time": s}), answers {"rate": samples/s}.
# ---------------------------------------------------------------------------------------------
def torch_worker(threads):
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

    nets = {"mlp": (mlp, (784,)), "lenet5": (lenet5, (1, 28, 28))}
    torch.set_num_threads(threads)
    cache = {}

    def callable_for(row, mode):
        key = (row, mode)
        if key in cache:
            return cache[key]
        what, name, batch = row.split("/")
        batch = int(batch)
        make, shape = nets[name]
        torch.manual_seed(0)
        net = make()
        if what == "forward":
            net.eval()
            x = torch.rand((batch,) + shape)
            if mode == "jit":
                with torch.no_grad():
                    net = torch.jit.freeze(torch.jit.script(net))

            def fn():
                with torch.no_grad():
                    return net(x)
        elif what == "train_step":
            if mode != "eager":
                return None
            net.train()
            opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
            loss_fn = nn.CrossEntropyLoss()
            x = torch.rand((batch,) + shape)
            y = torch.randint(0, 10, (batch,))

            def fn():
                opt.zero_grad(set_to_none=False)
                loss = loss_fn(net(x), y)
                loss.backward()
                opt.step()
        else:
            raise ValueError(f"unknown row {row}")
        for _ in range(5):  # warm-up (TorchScript's profiling executor optimises after 2 calls)
            fn()
        cache[key] = (fn, batch)
        return cache[key]

    print(json.dumps({"ready": torch.__version__, "threads": torch.get_num_threads()}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        got = callable_for(req["row"], req["mode"])
        if got is None:
            print(json.dumps({"rate": None}), flush=True)
            continue
        fn, batch = got
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= req["min_time"]:
                break
        print(json.dumps({"rate": n * batch / dt}), flush=True)


class TorchPeer:
    """A persistent PyTorch worker with one thread setting ("2" or "2:ACTIVE")."""

    def __init__(self, setting):
        threads, _, policy = setting.partition(":")
        self.threads, self.policy = int(threads), (policy or "PASSIVE").upper()
        self.name = f"{self.threads}t" + ("" if self.policy == "PASSIVE" else f" {self.policy}")
        env = dict(os.environ, OMP_NUM_THREADS=str(self.threads), OPENBLAS_NUM_THREADS=str(self.threads),
                   OMP_WAIT_POLICY=self.policy)
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--torch-worker", str(self.threads)],
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        hello = json.loads(self.proc.stdout.readline())
        self.version = hello["ready"]

    def rate(self, row, mode, min_time):
        self.proc.stdin.write(json.dumps({"row": row, "mode": mode, "min_time": min_time}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"compare_pytorch: the PyTorch worker ({self.name}) died")
        return json.loads(line)["rate"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def nnlens_rate(bench, row, threads, min_time):
    """One bench_core process, one benchmark, one repetition of >= min_time seconds."""
    env = dict(os.environ, NNLENS_NUM_THREADS=str(threads))
    cmd = [bench, "--benchmark_format=json", f"--benchmark_filter=^{row}/real_time$",
           f"--benchmark_min_time={min_time}"]
    res = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout)
    runs = [b for b in res["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    if len(runs) != 1:
        raise RuntimeError(f"compare_pytorch: {bench} ran {len(runs)} benchmarks for {row}")
    return runs[0]["samples/s"], res.get("context", {})


def loadavg():
    return "{:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())


def summarize(row, ours, theirs):
    """ours: {threads: [rate per pair]}, theirs: {config: [rate per pair]} -> result rows."""
    best = max((c for c in theirs if theirs[c][0] is not None), key=lambda c: statistics.median(theirs[c]))
    out = []
    for t, rates in ours.items():
        ratios = [a / b for a, b in zip(rates, theirs[best])]
        out.append({"row": row, "threads": t, "nnlens": statistics.median(rates), "peer_config": best,
                    "peer": statistics.median(theirs[best]), "ratio": statistics.median(ratios),
                    "ratio_min": min(ratios), "ratio_max": max(ratios), "ratios": ratios})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bench", default=os.path.join(here, "..", "build", "bin", "benchmarks", "bench_core"))
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="nnlens thread counts (rows)")
    ap.add_argument("--peer", nargs="+", default=["1", "2"],
                    help="PyTorch thread settings, e.g. 1 2 2:ACTIVE; the faster one per row is the peer")
    ap.add_argument("--pairs", type=int, default=5, help="interleaved pairs per row (at least 5)")
    ap.add_argument("--min-time", type=float, default=0.3, help="seconds per measurement")
    ap.add_argument("--rows", nargs="+", default=ROWS)
    ap.add_argument("--no-jit", action="store_true", help="PyTorch eager only (no frozen TorchScript)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--json", help="write every measurement to this file")
    ap.add_argument("--allow-reference-blas", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--torch-worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.torch_worker:
        torch_worker(args.torch_worker)
        return 0
    if args.pairs < 5:
        sys.exit("compare_pytorch: --pairs must be at least 5 (the protocol's minimum)")
    if not os.path.exists(args.bench):
        sys.exit(f"compare_pytorch: {args.bench} not found; build the bench_core target first")
    blas = os.path.realpath(BLAS)
    if "openblas" not in blas and not args.allow_reference_blas:
        sys.exit(f"compare_pytorch: {BLAS} is {blas}, not OpenBLAS: PyTorch's Linear layers would run on the "
                 "reference BLAS, ~20x slower, an unfair peer (benchmarks/run_comparison selects OpenBLAS)")

    load_before = loadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    peers = [TorchPeer(s) for s in args.peer]
    modes = ["eager"] if args.no_jit else ["eager", "jit"]
    results, raw, ctx = [], {}, {}
    try:
        for row in args.rows:
            ours = {t: [] for t in args.threads}
            theirs = {}
            for i in range(args.pairs):
                def measure_ours():
                    nonlocal ctx
                    for t in args.threads:
                        rate, ctx = nnlens_rate(args.bench, row, t, args.min_time)
                        ours[t].append(rate)

                def measure_theirs():
                    for p in peers:
                        for m in modes:
                            r = p.rate(row, m, args.min_time)
                            if r is not None:
                                theirs.setdefault(f"{p.name} {m}", []).append(r)
                # ABBA order: nnlens first in even pairs, PyTorch first in odd ones, so that a
                # drift in the load during a row does not always favour the same side
                for step in ((measure_ours, measure_theirs) if i % 2 == 0 else (measure_theirs, measure_ours)):
                    step()
            raw[row] = {"nnlens": {str(t): v for t, v in ours.items()}, "pytorch": theirs}
            results += summarize(row, ours, theirs)
            print(f"# {row} done, load {loadavg()}", file=sys.stderr, flush=True)
    finally:
        for p in peers:
            p.close()
    load_after = loadavg()

    ratios = [r["ratio"] for r in results]
    print(f"# {started}; machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores "
          f"({ctx.get('mhz_per_cpu', '?')} MHz); torch {peers[0].version} (BLAS {blas}); load average "
          f"before {load_before}, after {load_after}")
    print(f"# {args.pairs} interleaved pairs per row, {args.min_time} s per measurement; ratio = nnlens / "
          f"PyTorch's best configuration of {', '.join(args.peer)} threads x {'/'.join(modes)}: median of the "
          f"per-pair ratios (min-max); over all {len(results)} rows the medians span "
          f"{min(ratios):.2f}x-{max(ratios):.2f}x")
    if args.markdown:
        print("| nnlens threads | benchmark | nnlens samples/s | PyTorch samples/s | PyTorch's best | ratio (median) | range |")
        print("|---:|---|---:|---:|---|---:|---|")
        for r in results:
            print(f"| {r['threads']} | {r['row']} | {r['nnlens']:,.0f} | {r['peer']:,.0f} | {r['peer_config']} | "
                  f"{r['ratio']:.2f}x | {r['ratio_min']:.2f}-{r['ratio_max']:.2f}x |")
    else:
        print(f"{'threads':>7}  {'benchmark':<22} {'nnlens/s':>10} {'pytorch/s':>10} {'pytorch best':<13} "
              f"{'ratio':>6}  range")
        for r in results:
            print(f"{r['threads']:>7}  {r['row']:<22} {r['nnlens']:>10,.0f} {r['peer']:>10,.0f} "
                  f"{r['peer_config']:<13} {r['ratio']:>5.2f}x  {r['ratio_min']:.2f}-{r['ratio_max']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"started": started, "load_before": load_before, "load_after": load_after,
                       "pairs": args.pairs, "min_time": args.min_time, "torch": peers[0].version, "blas": blas,
                       "results": results, "raw": raw}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
