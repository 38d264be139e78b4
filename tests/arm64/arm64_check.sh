#!/usr/bin/env bash
# tests/arm64/arm64_check.sh -- ARM64: a portable selection of the test suite,
# cross-compiled for aarch64 (Debian g++-aarch64-linux-gnu, flags as cmake/toolchains/
# aarch64-linux-gnu.cmake sets them) and run under qemu-aarch64 (Debian qemu-user), with the same
# tolerances as on x86.  The selection: forward/backward on static and dynamic networks, field
# reflection, LRP and IDC, NC/KMNC/NBC/SNAC/TKNC, the NNet reader and ExactLine on the real ACAS Xu
# networks, NNSlicer's rules, int8 quantisation, DFlare (its searches, and against an int8 twin).
# Not in it: ONNX (no ARM protobuf here); codegen's round trip through a compiler (test_reflect
# checks the generated text; tests/firmware compiles a generated header for a Cortex-M).
#   arm64_check.sh SOURCE_DIR SHARED_DIR FASHION_DIR OUT_DIR [CXX] [QEMU]
set -euo pipefail
src=$1 shared=$2 fashion=$3 out=$4 cxx=${5:-aarch64-linux-gnu-g++} qemu=${6:-qemu-aarch64}
rm -rf "$out/o"; mkdir -p "$out/o"  # no stale objects from an earlier layout
mapfile -t files < <(grep -v '^\s*#' "$src/tests/portable_tests.txt" | grep -v '^\s*$' | grep -v '^tests/main.cpp$')
jobs=$(nproc 2>/dev/null || echo 2)
start=$(date +%s)
# the selection as $jobs unity files (cmake/nnlens_unity_gen.cmake, as the x86 test build does:
# about half the compiler time of one object per file), beside tests/main.cpp
incs=() units=("$src/tests/main.cpp")
for ((k = 0; k < jobs; k++)); do
  batch=()
  for ((i = k; i < ${#files[@]}; i += jobs)); do batch+=("$src/${files[i]}"); done
  [ ${#batch[@]} -gt 0 ] || continue
  (IFS='|'; cmake -DOUT="$out/portable_$k.cpp" -DSOURCES="${batch[*]}" -P "$src/cmake/nnlens_unity_gen.cmake")
  units+=("$out/portable_$k.cpp")
done
for f in "${files[@]}"; do incs+=("-I$(dirname "$src/$f")"); done
printf '%s\n' "${units[@]}" | xargs -P "$jobs" -I{} sh -c '
  f={}; o="'"$out"'/o/$(basename "$f" .cpp).o"
  '"$cxx"' -std=c++20 -O1 -fopenmp -Wno-psabi -idirafter /usr/include -I"'"$src"'/include" -I"'"$src"'/tests" '"${incs[*]}"' \
    -DNNLENS_SHARED_DIR="\"'"$shared"'\"" -DNNLENS_FASHION_DIR="\"'"$fashion"'\"" -DNNLENS_SOURCE_DIR="\"'"$src"'\"" \
    -c "$f" -o "$o" || { echo "arm64_check: compiling $f failed" >&2; exit 255; }'
"$cxx" -static -fopenmp "$out"/o/*.o -o "$out/test_portable"
built=$(date +%s)
echo "arm64_check: built in $((built - start)) s; running under $qemu"
"$qemu" "$out/test_portable"
echo "arm64_check: ran in $(( $(date +%s) - built )) s"
