#!/usr/bin/env bash
# Builds stock FAISS with its GPU part (sm_90) for the benchmarks' FAISS GPU peer (GpuIndexFlatL2,
# GpuIndexIVFFlat, GpuIndexIVFPQ, ...). Runs on the GPU machine: the faiss-gpu and faiss115 jobs
# of scripts/device/run.sh call it.
#   bash scripts/device/build_faiss_gpu.sh BUILD_DIR BLAS_LIB
#       FAISS 1.7.3 from .deps/faiss-src: BUILD_DIR/faiss/libfaiss.a (~5 min with 16 cores), linked
#       by the benchmarks beside graft built against Debian's FAISS 1.7.3 (GRAFT_FAISS_GPU_DIR).
#       Three changes make 1.7.3 build with CUDA 13 and GCC 13 (each verified on the device):
#        - CMAKE_CXX_STANDARD 17 (CCCL 3 needs C++17);
#        - c_api/gpu/DeviceUtils_c.h includes <cublas_v2.h> instead of the removed <cublas.h>;
#        - <cstdint> included at the top of every header under faiss/ (they use uint8_t/int64_t
#          without it; a -include flag would break nvcc).
#   bash scripts/device/build_faiss_gpu.sh BUILD_DIR BLAS_LIB TARBALL
#       FAISS from a release tarball (.deps/peers/faiss-1.15.0.tar.gz: scripts/fetch_deps.sh
#       carries it), unmodified, with the flags /work/shared/peers/README.md verified on the H100
#       (CUDA 13.0), shared libraries and its C API, installed into BUILD_DIR-prefix: graft is then
#       built against that prefix (CMAKE_PREFIX_PATH), so graft, its benchmarks and their FAISS GPU
#       peers share one FAISS (the faiss115 job of scripts/device/run.sh). cuVS is not available
#       here: no GpuIndexCagra. ~5 min with 16 cores.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?build dir}
blas=${2:?BLAS library path}
tarball=${3:-}
src=$build-src
if [ -n "$tarball" ]; then
  prefix=$build-prefix
  if [ ! -f "$prefix/share/faiss/faiss-config.cmake" ]; then
    rm -rf "$src" && mkdir -p "$src"
    tar xzf "$tarball" -C "$src" --strip-components=1
    # Generic SIMD level: FAISS's package target `faiss` is that build (FAISS_OPT_LEVEL=avx2 adds
    # a second library, faiss_avx2, that graft would not link); the GPU peers do not use it.
    cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
      -DFAISS_ENABLE_GPU=ON -DFAISS_ENABLE_C_API=ON -DFAISS_ENABLE_PYTHON=OFF -DBUILD_TESTING=OFF \
      -DFAISS_OPT_LEVEL=generic -DCMAKE_CUDA_ARCHITECTURES=90 \
      -DBLAS_LIBRARIES="$blas" -DLAPACK_LIBRARIES="$blas"
    ninja -C "$build" faiss faiss_c
    cmake --install "$build" --prefix "$prefix" >/dev/null
  fi
  echo "FAISS GPU: $(sed -nE 's/^#define FAISS_VERSION_(MAJOR|MINOR|PATCH) ([0-9]+).*/\2/p' "$src/faiss/Index.h" | paste -sd.) in $prefix"
  exit 0
fi
if [ ! -f "$build/faiss/libfaiss.a" ]; then
  rm -rf "$src" && cp -r "$root/.deps/faiss-src" "$src"
  sed -i 's/set(CMAKE_CXX_STANDARD 11)/set(CMAKE_CXX_STANDARD 17)/' "$src/CMakeLists.txt"
  sed -i 's/#include <cublas.h>/#include <cublas_v2.h>/' "$src/c_api/gpu/DeviceUtils_c.h"
  find "$src/faiss" -name '*.h' -exec sed -i '1i #include <cstdint>' {} +
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFAISS_ENABLE_GPU=ON \
    -DFAISS_ENABLE_C_API=OFF -DFAISS_ENABLE_PYTHON=OFF -DBUILD_TESTING=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DBLAS_LIBRARIES="$blas" -DLAPACK_LIBRARIES="$blas"
  ninja -C "$build" faiss
fi
echo "FAISS GPU: $build/faiss/libfaiss.a"
