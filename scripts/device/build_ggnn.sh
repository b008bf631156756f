#!/usr/bin/env bash
# Builds GGNN 0.9.1 (graft-bench's GGNN peer) from the tarball and glog/gflags .debs that
# scripts/fetch_deps.sh puts in .deps/peers/ (/work/shared/peers/README.md). Runs on the GPU
# machine (the ggnn job of scripts/device/run.sh); ~30 s with 16 cores.
#   bash scripts/device/build_ggnn.sh DIR        # DIR/src (GGNN's source), DIR/build (libGGNN*.so), DIR/deps (glog, gflags)
# Prints the two CMake settings graft-bench needs and the library path to run it with.
# Two changes make it build there (each verified on the H100, CUDA 13.0, CMake 4.4):
#  - glog/gflags from the .debs unpacked under DIR/deps, with glog's module path (else glog's
#    config cannot find Unwind, and GGNN falls back to cloning glog from the network);
#  - -static-global-template-stub=false in GGNN's CMAKE_CUDA_FLAGS: CUDA 13 gives __global__
#    template stubs internal linkage, and libGGNNQuery.so's link fails with undefined ggnn::query<...>.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:?GGNN build dir}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
deps=$dir/deps src=$dir/src build=$dir/build
if [ ! -f "$build/libGGNNBase.so" ]; then
  rm -rf "$deps" "$src" && mkdir -p "$deps" "$src"
  for deb in "$root"/.deps/peers/*.deb; do dpkg -x "$deb" "$deps"; done
  tar -xzf "$root"/.deps/peers/ggnn-0.9.1-4f8088f.tar.gz -C "$src" --strip-components=1
  sed -i 's/set(CMAKE_CUDA_FLAGS "--expt-relaxed-constexpr")/set(CMAKE_CUDA_FLAGS "--expt-relaxed-constexpr -static-global-template-stub=false")/' \
    "$src/CMakeLists.txt"
  grep -q static-global-template-stub "$src/CMakeLists.txt" || { echo "GGNN: CMAKE_CUDA_FLAGS line not found"; exit 1; }
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGNN_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$deps/usr" -DCMAKE_MODULE_PATH="$deps/usr/share/glog/cmake"
  ninja -C "$build" GGNNBase
fi
echo "GGNN: -DGRAFT_GGNN_DIR=$src -DGRAFT_GGNN_BUILD=$build"
echo "GGNN: LD_LIBRARY_PATH=$deps/usr/lib/x86_64-linux-gnu:$build"
