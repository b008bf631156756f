#!/usr/bin/env bash
# faiss115: graft, its tests and benchmarks against FAISS 1.15 instead of Debian's FAISS 1.7.3:
# FAISS 1.15 with its GPU part and C API is built from the carried .deps/peers/faiss-1.15.0.tar.gz
# (scripts/device/build_faiss_gpu.sh, into /tmp/faiss115-gpu-build-prefix) before graft builds, and
# the build job configures against it. The FAISS GPU peers are then FAISS 1.15's (graft-bench's
# records say faiss_version), and the faiss-gpu job's 1.7.3 build is not made. walk-ab's other
# tree still builds against 1.7.3.
# Writes to $OUT: setup.log (its build log).
# Time: 307 s on nvidia-h200, ~5 min on nvidia-h100 (16 cores), before the build.
# background: yes
. "$(dirname "$0")/../lib.sh"
log=/tmp/graft-faiss115.log
if [ "${1:-}" = start ]; then
  stamp "building FAISS 1.15 with its GPU part (scripts/device/build_faiss_gpu.sh)"
  bash scripts/device/build_faiss_gpu.sh $f115 "$GRAFT_BLAS" .deps/peers/faiss-1.15.0.tar.gz >$log 2>&1 ||
    { tail -30 $log; exit 1; }
  setup_log "FAISS 1.15 GPU build" $log 1 faiss115
  exit 0
fi
[ -f $f115-prefix/share/faiss/faiss-config.cmake ] || { tail -30 $log; exit 1; }
stamp "$(tail -n1 $log)"
