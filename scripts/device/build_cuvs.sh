#!/usr/bin/env bash
# Builds NVIDIA cuVS's C++ library (libcuvs.so: CAGRA, graft-bench's CAGRA peer) offline from the
# source tarballs of ../shared/peers/cuvs (its README: versions, licenses, the configure line),
# trimmed to what CAGRA needs for float32 data on sm_90. Nothing of it goes into graft.
#   bash scripts/device/build_cuvs.sh DIR [TARBALLS]   # DIR/src, DIR/build; TARBALLS: default
#                                                       # .deps/peers/cuvs, else ../shared/peers/cuvs
# Runs again where it stopped (ninja keeps what it built). Needs CMake >= 4.0 (cuVS asks for it),
# CUDA 13 and Python 3; no GPU: objects compile anywhere and libcuvs.so travels as a file.
# Then builds graft-bench's CAGRA face against it (DIR/peer). Prints the CMake setting graft-bench
# needs and the library path to run it with.
#
# What is changed, each for its reason:
#  - The object library's sources are filtered (scripts/device/cuvs_cagra_only.py puts the block
#    after cuVS's add_library(cuvs_objs)): cuVS has no option to build CAGRA alone, and its 1,736 compile units
#    (1,319 of them JIT-LTO kernel fragments) are hours on a few cores. Kept: CAGRA's search and
#    graph optimization for float32 and the graph build cagra::build uses by default while the
#    data fits the GPU (NN-descent; cagra_build.cuh), select_k. Dropped: half, int8 and uint8
#    instantiations and fragments, the other algorithms, and IVF-PQ (CAGRA's build when
#    NN-descent would not fit the GPU), refine, brute force, pairwise distances, k-means and the
#    quantizers (CAGRA's VPQ compression), L1 and cosine, CAGRA's merge, extend and files.
#    CAGRA's code still names the dropped functions: they stay undefined in libcuvs.so (bound
#    lazily, at the first call), so a call into one ends the process with a symbol lookup error
#    instead of running. graft-bench's CAGRA takes none of those paths (NN-descent fits every
#    set it runs). An undefined variable would stop the library from loading at all: the check
#    after the link fails the build on one (relocations other than a function's jump slot).
#  - cuCollections' build folder gets an empty CUCO_RAPIDS.cmake: the old snapshot's CMake
#    otherwise downloads it (the README's configure line).
#  - The two sparse files that need a newer cuCollections are among the dropped algorithms.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:?cuVS build dir}
tarballs=${2:-}
[ -n "$tarballs" ] || for t in "$root/.deps/peers/cuvs" "$root/../shared/peers/cuvs"; do
  [ -f "$t/README.md" ] && { tarballs=$t; break; }; done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
src=$dir/src build=$dir/build
ninja_jobs=${GRAFT_CUVS_JOBS:-$(nproc)}

if [ ! -f "$src/cuvs/cpp/CMakeLists.txt" ]; then
  [ -n "$tarballs" ] || { echo "cuVS: no source tarballs (.deps/peers/cuvs or ../shared/peers/cuvs)"; exit 1; }
  rm -rf "$src" && mkdir -p "$src"
  for f in "$tarballs"/*.tar.gz; do tar -C "$src" -xzf "$f"; done
fi
python3 "$root/scripts/device/cuvs_cagra_only.py" "$src/cuvs/cpp/CMakeLists.txt"

if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build/_deps/cuco-build" && touch "$build/_deps/cuco-build/CUCO_RAPIDS.cmake"
  SRC=$src BUILD=$build bash "$src/cuvs-offline-extras/configure-cuvs.sh" >"$dir/configure.log" 2>&1 ||
    { tail -30 "$dir/configure.log"; exit 1; }
fi
echo "cuVS: $(ninja -C "$build" -n cuvs | grep -c '^\[') steps left"
ninja -C "$build" -j "$ninja_jobs" -k 0 cuvs
# A dropped file that CAGRA's code still calls shows here as an undefined cuvs symbol: a function
# (bound at its first call) is fine, anything else (a variable, a vtable) stops the load.
undefined=$(nm -D --undefined-only -C "$build/libcuvs.so" | grep -c 'cuvs::' || true)
echo "cuVS: libcuvs.so $(du -m "$build/libcuvs.so" | cut -f1) MB, $undefined undefined cuvs:: functions"
not_calls=$(readelf -rW "$build/libcuvs.so" | awk '$3 !~ /JUMP_SLOT/ && $4 ~ /^0+$/ && $5 ~ /cuvs/' | head)
[ -z "$not_calls" ] || { echo "cuVS: undefined non-function symbols (add their files back):"; echo "$not_calls"; exit 1; }

# graft-bench's CAGRA face (bench/cagra_peer.cu) as its own library against this build, so that
# graft's build needs neither cuVS's headers nor CMake 4: -DGRAFT_CAGRA_PEER_LIB names it.
mkdir -p "$dir/peer"
cat >"$dir/peer/CMakeLists.txt" <<EOF2
cmake_minimum_required(VERSION 4.0)
project(graft_cagra_peer LANGUAGES CXX CUDA)
find_package(cuvs CONFIG REQUIRED PATHS "$build" NO_DEFAULT_PATH)
add_library(graft_cagra_peer SHARED "$root/bench/cagra_peer.cu")
set_target_properties(graft_cagra_peer PROPERTIES CUDA_STANDARD 20 CUDA_STANDARD_REQUIRED ON
  CUDA_ARCHITECTURES 90 BUILD_RPATH "$build;$build/_deps/rapids_logger-build")
target_link_libraries(graft_cagra_peer PRIVATE cuvs::cuvs)
EOF2
cmake -S "$dir/peer" -B "$dir/peer/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER="${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" \
  -DCPM_DOWNLOAD_LOCATION="$src/CPM.cmake/cmake/CPM.cmake" >"$dir/peer/configure.log" 2>&1 ||
  { tail -30 "$dir/peer/configure.log"; exit 1; }
ninja -C "$dir/peer/build"
echo "cuVS: -DGRAFT_CAGRA_PEER_LIB=$dir/peer/build/libgraft_cagra_peer.so"
echo "cuVS: LD_LIBRARY_PATH=$build:$build/_deps/rapids_logger-build"
# The four libraries, stripped of what only a debugger reads, where the device jobs take them:
# .deps/cagra (carried to the GPU machine).
mkdir -p "$root/.deps/cagra"
for f in "$build/libcuvs.so" "$build/_deps/rapids_logger-build/librapids_logger.so" \
         "$build/_deps/rmm-build/librmm.so" "$dir/peer/build/libgraft_cagra_peer.so"; do
  strip --strip-unneeded -o "$root/.deps/cagra/$(basename "$f")" "$f"
done
echo "cuVS: $(du -sh "$root/.deps/cagra" | cut -f1) in .deps/cagra"
