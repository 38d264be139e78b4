#!/usr/bin/env bash
# tests/arm64/arm64_check.sh -- ARM64 (issue 18, item 2): a portable selection of the test suite,
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
mkdir -p "$out/o"
mapfile -t files < <(grep -v '^\s*#' "$src/tests/portable_tests.txt" | grep -v '^\s*$')  # the selection
jobs=$(nproc 2>/dev/null || echo 2)
start=$(date +%s)
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -I{} sh -c '
  f={}; o="'"$out"'/o/$(basename "$f" .cpp).o"
  '"$cxx"' -std=c++20 -O1 -fopenmp -Wno-psabi -idirafter /usr/include -I"'"$src"'/include" -I"'"$src"'/tests" \
    -DNNLENS_SHARED_DIR="\"'"$shared"'\"" -DNNLENS_FASHION_DIR="\"'"$fashion"'\"" -DNNLENS_SOURCE_DIR="\"'"$src"'\"" \
    -c "'"$src"'/$f" -o "$o" || { echo "arm64_check: compiling $f failed" >&2; exit 255; }'
"$cxx" -static -fopenmp "$out"/o/*.o -o "$out/test_portable"
built=$(date +%s)
echo "arm64_check: built in $((built - start)) s; running under $qemu"
"$qemu" "$out/test_portable"
echo "arm64_check: ran in $(( $(date +%s) - built )) s"
