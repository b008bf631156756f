#!/usr/bin/env bash
# Packs graft-bench, built on this machine for sm_90 (build/, scripts/setup.sh with CUDA), with
# graft's libraries and the HDF5 ones the GPU machine lacks, into .deps/carry/prebuilt.tar.xz
# (about 15 MB), so that a call which only benchmarks builds nothing:
#   bash scripts/device/pack_prebuilt.sh
#   GRAFT_PREBUILT=1 GRAFT_GQ_SETS=... bash scripts/device/run.sh graph-quality   # on the device,
#       carrying .deps/carry (run.sh unpacks it into .deps/prebuilt; lib.sh points the jobs at it)
# Only for jobs whose targets are graft-bench alone (graph-quality, graft-bench without peers).
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -q 'CMAKE_CUDA_ARCHITECTURES:[A-Z]*=.*90' build/CMakeCache.txt ||
  { echo "build/ is not a CUDA build for sm_90" >&2; exit 1; }
ninja -C build graft-bench
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp build/bench/graft-bench "$tmp/"
ldd build/bench/graft-bench | awk '/libgraft|libhdf5|libsz|libaec/ { print $3 }' | xargs -I{} cp -L {} "$tmp/"
mkdir -p .deps/carry
tar -C "$tmp" -cJf .deps/carry/prebuilt.tar.xz .
ls -l .deps/carry/prebuilt.tar.xz
