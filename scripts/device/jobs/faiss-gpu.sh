#!/usr/bin/env bash
# faiss-gpu: stock FAISS 1.7.3 with its GPU part (scripts/device/build_faiss_gpu.sh: .deps/faiss-src
# patched for CUDA 13 / GCC 13) into /tmp/faiss-gpu-build, in the background on every core from
# the call's start (the build job then takes a quarter of the cores). The benchmarks that have a
# FAISS GPU peer wait for it and link it (lib.sh's link_faiss_gpu). Not made with faiss115 in the
# call (FAISS 1.15 is then the peers' FAISS) or with --no-faiss-gpu. Kept in /tmp for the next call.
# Writes to $OUT: setup.log (its log, once waited for).
# Time: ~4 min alone on nvidia-h100 (16 cores), ~6 min beside graft's build and tests
# (bench/logs/exact-6c3c16a-h100.log); nvidia-h200 kinds not measured.
# background: yes
. "$(dirname "$0")/../lib.sh"
if [ "${1:-}" = start ]; then
  [ -f $fgpu/faiss/libfaiss.a ] && exit 0
  bg_start faiss-gpu bash scripts/device/build_faiss_gpu.sh $fgpu "$GRAFT_BLAS"
  exit 0
fi
started faiss115 && { stamp "faiss-gpu: not made, FAISS 1.15 (faiss115) is this call's FAISS"; exit 0; }
bg_wait faiss-gpu 3
[ -f $fgpu/faiss/libfaiss.a ] || { stamp "no FAISS GPU build (setup.log)"; exit 1; }
