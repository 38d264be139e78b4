#!/usr/bin/env bash
# MPI scale-out of `nnlens profile` (docs/scale.md): NNSlicer's profile of Fashion-MNIST
# training images (the first N of the 60,000) with one process and under mpirun, timed end to end
# (wall clock: launch, MPI_Init, reading the IDX file, profiling, the reduction, writing) and as
# the tool reports it (profiling + reduction, after the data is read).  Best of REPEAT runs.
#
#   benchmarks/run_mpi_bench.sh [BUILD_DIR [MODEL [DATA]]]       (REPEAT=3, SIZES="60000 ...")
#
# Configurations: `nnlens profile --threads 1` (1 rank, the baseline), `mpirun -np 1` (the same
# plus the launcher), `mpirun -np 2` (each rank one thread: the tool gives each rank
# cores / ranks-on-the-node threads), and, for comparison, one process with 2 threads.
# MODEL defaults to the tool tests' LeNet-5 fixture (untrained; the weights do not change the
# cost); the profiles of all configurations are checked to agree (within 1e-12 relative).
# NICE=-10 runs every command at that niceness (root only): on a machine shared with other work it
# keeps the measurement close to what an idle machine gives (the load average is printed).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tool=$build/bin/nnlens
cmp=$build/bin/tests/test_mpi
model=${2:-$build/tools/nnlens/fixtures/lenet5.nnlw}
data=${3:-/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz}
repeat=${REPEAT:-3}
sizes=${SIZES:-"1000 4000 15000 60000"}
for f in "$tool" "$model" "$data"; do [ -e "$f" ] || { echo "run_mpi_bench: $f not found (build the tool and its test fixtures first)" >&2; exit 1; }; done
command -v mpirun >/dev/null || { echo "run_mpi_bench: mpirun not found (Debian: openmpi-bin)" >&2; exit 1; }
mpirun=(mpirun --oversubscribe)
[ "$(id -u)" -eq 0 ] && mpirun+=(--allow-run-as-root)
export OMPI_MCA_btl_vader_single_copy_mechanism=none
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# the first N images as their own IDX file
subset() {
  /usr/bin/python3 - "$data" "$1" "$work/train-$1-idx3-ubyte" <<'PY'
import gzip, struct, sys
src, n, dst = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with (gzip.open(src) if src.endswith('.gz') else open(src, 'rb')) as f:
    magic, count, h, w = struct.unpack('>IIII', f.read(16))
    n = min(n, count)
    body = f.read(n * h * w)
with open(dst, 'wb') as f:
    f.write(struct.pack('>IIII', magic, n, h, w)); f.write(body)
PY
}

# best wall and tool seconds of REPEAT runs: prints "wall tool"
timed() {
  local best_w="" best_t=""
  for _ in $(seq "$repeat"); do
    local s e line w t
    s=$(date +%s.%N)
    line=$(${NICE:+nice -n "$NICE"} "$@" 2>/dev/null | tail -1)
    e=$(date +%s.%N)
    w=$(awk -v s="$s" -v e="$e" 'BEGIN { printf "%.3f", e - s }')
    t=$(sed -E 's/.*, ([0-9.e+-]+) s$/\1/' <<<"$line")
    if [ -z "$best_w" ] || awk -v a="$w" -v b="$best_w" 'BEGIN { exit !(a < b) }'; then best_w=$w; fi
    if [ -z "$best_t" ] || awk -v a="$t" -v b="$best_t" 'BEGIN { exit !(a < b) }'; then best_t=$t; fi
  done
  echo "$best_w $best_t"
}

echo "# nnlens profile, MPI: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(mpirun --version | head -1)"
echo "# model $(basename "$model"), best of $repeat; wall = the whole command, tool = profiling + reduction"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)${NICE:+, commands at nice $NICE}"
echo
echo "| images | 1 process, 1 thread: wall / tool s | mpirun -np 1 wall s | mpirun -np 2: wall / tool s | speed-up (wall / tool) | 1 process, 2 threads: wall / tool s |"
echo "|---:|---:|---:|---:|---:|---:|"
for n in $sizes; do
  subset "$n"
  d=$work/train-$n-idx3-ubyte
  read -r w1 t1 < <(timed "$tool" profile "$model" --data "$d" -o "$work/p1" --threads 1 --no-progress)
  read -r wm1 _ < <(timed "${mpirun[@]}" -np 1 "$tool" profile "$model" --data "$d" -o "$work/pm1" --threads 1 --no-progress)
  read -r w2 t2 < <(timed "${mpirun[@]}" -np 2 "$tool" profile "$model" --data "$d" -o "$work/p2" --no-progress)
  read -r wt tt < <(timed "$tool" profile "$model" --data "$d" -o "$work/pt" --threads 2 --no-progress)
  if [ -x "$cmp" ]; then
    NNLENS_MPI_COMPARE_PROFILES="$work/p1:$work/p2" "$cmp" -tc='tool*' >/dev/null || { echo "run_mpi_bench: the 2-rank profile differs" >&2; exit 1; }
  fi
  sw=$(awk -v a="$w1" -v b="$w2" 'BEGIN { printf "%.2f", a / b }')
  st=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.2f", a / b }')
  echo "| $n | $w1 / $t1 | $wm1 | $w2 / $t2 | $sw / $st | $wt / $tt |"
done

# The library alone (benchmarks/bench_mpi.cpp, compiled here with mpicxx): each rank's profiling in
# wall clock and in CPU time of its thread, and the reduction.  Measured interleaved (docs/benchmarks.md,
# "Protocol for peer ratios"): PAIRS pairs of one 1-rank and one 2-rank run (one repetition each),
# the 1-rank run first in odd pairs and second in even ones; the speed-ups are the medians of the
# per-pair ratios, with their range.  The table gives the medians of each column.
bench=$work/bench_mpi
pairs=${PAIRS:-5}
[ "$pairs" -ge 5 ] || { echo "run_mpi_bench: PAIRS must be at least 5" >&2; exit 1; }
mpicxx -std=c++20 -O3 -march=native -mprefer-vector-width=256 -DNNLENS_HAS_ZLIB -DOMPI_SKIP_MPICXX -Iinclude \
  benchmarks/bench_mpi.cpp -lz -o "$bench"
: >"$work/mpi_pairs"
echo "# load average before the library pairs: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$pairs"); do
  order="1 2"; [ $((i % 2)) -eq 0 ] && order="2 1"
  declare -A total=() wall=() cpu=() red=()
  for np in $order; do
    line=$(${NICE:+nice -n "$NICE"} "${mpirun[@]}" -np "$np" "$bench" "$data" 60000 1)
    read -r _ _ _ _ _ t _ w _ c _ r <<<"$line"
    total[$np]=$t wall[$np]=$w cpu[$np]=$c red[$np]=$r
  done
  echo "${total[1]} ${wall[1]} ${cpu[1]} ${red[1]} ${total[2]} ${wall[2]} ${cpu[2]} ${red[2]}" >>"$work/mpi_pairs"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
/usr/bin/python3 - "$work/mpi_pairs" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
med = lambda i: statistics.median(r[i] for r in rows)
def ratio(num, den):
    v = [r[num] / r[den] for r in rows]
    return f"{statistics.median(v):.2f}x ({min(v):.2f}-{max(v):.2f})"
print(f"| mpi::profile_network, 60000 images, {len(rows)} interleaved pairs (medians) | total wall s | slowest rank: wall s | slowest rank: CPU s | reduce_merge s |")
print("|---|---:|---:|---:|---:|")
for name, o in (("1 rank", 0), ("2 ranks", 4)):
    print(f"| {name} | {med(o):.3f} | {med(o + 1):.3f} | {med(o + 2):.3f} | {med(o + 3):.5f} |")
print()
print(f"2 ranks vs 1, wall clock (per-pair ratio, median and range): {ratio(0, 4)}")
# CPU time of the profiling (what 2 idle cores give; the reduction's wall time, which includes
# waiting for the slower rank, is left out)
print(f"2 ranks vs 1, CPU time of the slowest rank's profiling: {ratio(2, 6)}")
PY
