#!/usr/bin/env bash
# Packs graft-bench (and any other targets named, e.g. a GPU test), built on this machine for sm_90
# (build/, scripts/setup.sh with CUDA), with graft's libraries and the HDF5 ones the GPU machine
# lacks, into .deps/carry/prebuilt.tar.xz (about 20 MB), so that a call which only benchmarks or
# runs one test builds nothing:
#   bash scripts/device/pack_prebuilt.sh [TARGET...]
#   GRAFT_PREBUILT=1 GRAFT_GQ_SETS=... bash scripts/device/run.sh graph-quality   # on the device,
#       carrying .deps/carry (run.sh unpacks it into .deps/prebuilt; lib.sh points the jobs at it)
#   GRAFT_DATA_DIR=.deps/data .deps/prebuilt/test_gpu_grnnd    # a packed test, after the unpack
# Only for jobs whose targets are graft-bench alone (graph-quality, graft-bench without its FAISS
# GPU and GGNN peers, and cagra when build/ was configured with -DGRAFT_CAGRA_PEER_LIB=
# $PWD/.deps/cagra/libgraft_cagra_peer.so: carry .deps/carry/cagra.tar.xz beside it).
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -q 'CMAKE_CUDA_ARCHITECTURES:[A-Z]*=.*90' build/CMakeCache.txt ||
  { echo "build/ is not a CUDA build for sm_90" >&2; exit 1; }
targets=(graft-bench "$@")
ninja -C build "${targets[@]}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in "${targets[@]}"; do
  # The newest: build/ also holds installed copies (tests' prefixes) of older builds.
  bin=$(find build -type f -name "$t" -perm -u+x -printf '%T@ %p\n' | sort -nr | head -n1 | cut -d' ' -f2-)
  [ -n "$bin" ] || { echo "no program $t under build/" >&2; exit 1; }
  cp "$bin" "$tmp/"
  ldd "$bin" | awk '/libgraft|libhdf5|libsz|libaec/ { print $3 }' | xargs -I{} cp -L {} "$tmp/"
done
mkdir -p .deps/carry
tar -C "$tmp" -cJf .deps/carry/prebuilt.tar.xz .
ls -l .deps/carry/prebuilt.tar.xz
