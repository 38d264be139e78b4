#!/usr/bin/python3
"""ExactLine on whole segments of torchvision CNNs (docs/benchmarks.md, "ExactLine on torchvision CNNs").

    /usr/bin/python3 benchmarks/exactline_cnn.py [MODEL ...] [--tool PATH] [--bench PATH] [--size 64]
        [--threads 2] [--precisions f32,f64] [--max-memory 1024] [--rounds 0] [--fraction 0.02] [--breaks]
        [--dir DIR] [--json FILE] [--markdown FILE]

For each model (default: resnet18 squeezenet1_1 mobilenet_v2 googlenet), exported as compare_zoo.py
exports it (seeded random weights, eval mode, torch.onnx.export, DIR/MODEL-SIZE/model.onnx), two
seeded random images (uniform [0, 1], normalised with ImageNet's mean and std) are the segment's
ends.  Per precision, `nnlens exact-line MODEL --from A --to B --validate --json --pieces ROWS
--threads T --max-memory M` runs the whole segment: its pieces, wall time, peak resident set (the
child's ru_maxrss) and --validate's verdict (pieces checked, violations, max deviation).

--rounds N: the cost per piece against the batched forward pass per sample, interleaved: N rounds
of (exact-line without --validate or --pieces, f32, T threads, on the first --fraction of the
segment: the JSON's seconds, which leave out the printing, / pieces) and (bench_zoo --serve at batch
64, forward(execution::par) on T threads or execution::seq on one: the median call / 64), in ABBA
order; reported as the median ratio and its range.

--breaks: where the f32 and f64 partitions of the same segment differ: the breaks of each (from the
--pieces rows), how many of the f64 breaks have an f32 break within 1e-9, 1e-6 and 1e-4 in t, and the
largest such distance.  Exit 0, or 1 when a run fails.
"""
import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["resnet18", "squeezenet1_1", "mobilenet_v2", "googlenet"]


def compare_zoo():
    spec = importlib.util.spec_from_file_location("compare_zoo", os.path.join(ROOT, "benchmarks", "compare_zoo.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def endpoints(d, size):
    """Two seeded random images, ImageNet-normalised, as one-line CSVs (NCHW rows)."""
    import torch
    paths = []
    mean = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)
    for seed, name in ((1, "a.csv"), (2, "b.csv")):
        g = torch.Generator().manual_seed(seed)
        x = (torch.rand(3, size, size, generator=g) - mean) / std
        p = os.path.join(d, name)
        with open(p, "w") as f:
            f.write(",".join("%.9g" % v for v in x.flatten().tolist()) + "\n")
        paths.append(p)
    return paths


def rss_of(cmd):
    """(returncode, stdout, stderr, wall seconds, peak RSS in MiB) of cmd: the child's own (os.wait4)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, out, err, time.perf_counter() - t0, ru.ru_maxrss / 1024.0


def exact_line(args, model, a, b, prec, validate, rows):
    cmd = [args.tool, "exact-line", model, "--from", a, "--to", b, "--json", "--no-progress", "--precision", prec,
           "--threads", str(args.threads), "--max-memory", str(args.max_memory)] + (["--pieces", rows] if rows else [])
    if validate:
        cmd.append("--validate")
    rc, out, err, wall, rss = rss_of(cmd)
    row = {"precision": prec, "validate": validate, "wall_s": wall, "peak_rss_mib": rss, "rc": rc}
    try:
        j = json.loads(out)
        line = j["lines"][0]
        row["pieces"] = line.get("pieces")
        row["seconds"] = j.get("seconds")
        row["classes"] = len(line.get("classes", []))
        if "validation" in line:
            row["validation"] = line["validation"]
        if "error" in line:
            row["error"] = line["error"]
    except (ValueError, KeyError, IndexError):
        row["error"] = (err.strip().splitlines() or ["no output"])[-1]
    if rc != 0 and "error" not in row:
        row["error"] = (err.strip().splitlines() or ["exit %d" % rc])[-1]
    return row


def breaks_of(path):
    t = []
    with open(path) as f:
        for line in f:
            t.append(json.loads(line)["t"])
    return t


def compare_breaks(t64, t32):
    import bisect
    inner64, inner32 = t64[1:-1], t32[1:-1]
    out = {"f64_breaks": len(inner64), "f32_breaks": len(inner32)}
    far = 0.0
    within = {1e-9: 0, 1e-6: 0, 1e-4: 0}
    for t in inner64:
        i = bisect.bisect_left(inner32, t)
        d = min([abs(t - inner32[j]) for j in (i - 1, i) if 0 <= j < len(inner32)] or [1.0])
        far = max(far, d)
        for tol in within:
            within[tol] += d <= tol
    out.update({"within_1e-9": within[1e-9], "within_1e-6": within[1e-6], "within_1e-4": within[1e-4],
                "max_distance": far})
    return out


def per_sample_ms(zoo_server, batch=64, calls=5):
    return zoo_server.median(batch, calls) / batch


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--tool", default=os.path.join(ROOT, "build-bench", "bin", "nnlens"))
    ap.add_argument("--bench", default=os.path.join(ROOT, "build-bench", "bin", "benchmarks", "bench_zoo"))
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precisions", default="f32,f64")
    ap.add_argument("--max-memory", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--fraction", type=float, default=0.02, help="the share of the segment the --rounds time")
    ap.add_argument("--whole", default="yes", choices=["yes", "no"], help="no: only the --rounds (and --breaks off)")
    ap.add_argument("--breaks", action="store_true")
    ap.add_argument("--dir", default=os.environ.get("ZOO_BENCH_DIR", "/tmp/nnlens-bench-zoo"))
    ap.add_argument("--json", default="")
    ap.add_argument("--markdown", default="")
    args = ap.parse_args()
    if not os.path.exists(args.tool):
        print("exactline_cnn.py: no nnlens tool at %s (--tool)" % args.tool, file=sys.stderr)
        return 2
    cz = compare_zoo()
    zoo = cz.zoo_export()
    info = cz.machine()
    print("# %s, %d cores, commit %s, %d threads, --max-memory %d MiB" % (
        info["cpu"], info["nproc"], info["commit"], args.threads, args.max_memory), flush=True)
    rows, failed = [], False
    for name in args.models or MODELS:
        _, path = cz.export(zoo, name, args.size, 17, args.dir)
        d = os.path.dirname(path)
        a, b = endpoints(d, args.size)
        r = {"model": name, "size": args.size, "threads": args.threads, "runs": []}
        files = {}
        for prec in (args.precisions.split(",") if args.whole == "yes" else []):
            files[prec] = os.path.join(d, "rows-%s.jsonl" % prec)
            run = exact_line(args, path, a, b, prec, True, files[prec])
            r["runs"].append(run)
            failed |= "error" in run
            v = run.get("validation", {})
            print("%-14s %s  %7s pieces  %8.1f s  peak RSS %6.0f MiB  validate: %s violations of %s, max dev %.2g%s" % (
                name, prec, run.get("pieces"), run["wall_s"], run["peak_rss_mib"], v.get("violations"),
                v.get("pieces"), v.get("max_deviation") or 0, ("  ERROR " + run["error"]) if "error" in run else ""),
                flush=True)
        if args.breaks and "f32" in files and "f64" in files and all("error" not in x for x in r["runs"]):
            r["breaks"] = compare_breaks(breaks_of(files["f64"]), breaks_of(files["f32"]))
            print("%-14s breaks: %s" % (name, json.dumps(r["breaks"])), flush=True)
        if args.rounds > 0 and os.path.exists(args.bench):
            server = cz.Nnlens(args.bench, path, args.threads)
            import numpy as np
            pa, pb = np.loadtxt(a, delimiter=","), np.loadtxt(b, delimiter=",")
            bf = os.path.join(d, "b-fraction.csv")
            with open(bf, "w") as fh:
                fh.write(",".join("%.9g" % v for v in (pa + args.fraction * (pb - pa)).tolist()) + "\n")
            ratios, el_ms, fw_ms = [], [], []
            for k in range(args.rounds):
                order = ("el", "fw") if k % 2 == 0 else ("fw", "el")
                got = {}
                for what in order:
                    if what == "el":
                        # rows kept, not written: the JSON's seconds leave out its printing
                        run = exact_line(args, path, a, bf, "f32", False, None)
                        got["el"] = 1e3 * run["seconds"] / max(run.get("pieces") or 1, 1)
                    else:
                        got["fw"] = per_sample_ms(server)
                el_ms.append(got["el"])
                fw_ms.append(got["fw"])
                ratios.append(got["el"] / got["fw"])
            server.close()
            r["ratio"] = {"fraction": args.fraction, "ms_per_piece": el_ms, "ms_per_sample_b64": fw_ms, "ratios": ratios,
                          "median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}
            print("%-14s f32 per piece %.2f ms (%.2f-%.2f), forward per sample at batch 64 %.2f ms (%.2f-%.2f): "
                  "ratio %.2f (%.2f-%.2f) over %d rounds" % (
                      name, statistics.median(el_ms), min(el_ms), max(el_ms), statistics.median(fw_ms), min(fw_ms),
                      max(fw_ms), r["ratio"]["median"], r["ratio"]["min"], r["ratio"]["max"], args.rounds), flush=True)
        rows.append(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "rows": rows}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("| model | precision | pieces | time s | peak RSS MiB | --validate |\n|---|---|---:|---:|---:|---|\n")
            for r in rows:
                for x in r["runs"]:
                    v = x.get("validation", {})
                    verdict = ("valid, max deviation %.2g" % v["max_deviation"]) if v.get("valid") else (
                        x.get("error") or "%s violations" % v.get("violations"))
                    f.write("| %s | %s | %s | %.1f | %.0f | %s |\n" % (
                        r["model"], x["precision"], x.get("pieces"), x["wall_s"], x["peak_rss_mib"], verdict))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
