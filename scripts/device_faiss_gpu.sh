#!/usr/bin/env bash
# Builds stock FAISS 1.7.3 with its GPU part (sm_90) from .deps/faiss-src, for the benchmarks'
# FAISS GPU peer (GpuIndexFlatL2, GpuIndexIVFFlat, ...). Runs on the GPU machine; ~5 min with 16 cores.
#   bash scripts/device_faiss_gpu.sh BUILD_DIR BLAS_LIB
# Three changes make 1.7.3 build with CUDA 13 and GCC 13 (each verified on the device):
#  - CMAKE_CXX_STANDARD 17 (CCCL 3 needs C++17);
#  - c_api/gpu/DeviceUtils_c.h includes <cublas_v2.h> instead of the removed <cublas.h>;
#  - <cstdint> included at the top of every header under faiss/ (they use uint8_t/int64_t
#    without it; a -include flag would break nvcc).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?build dir}
blas=${2:?BLAS library path}
src=$build-src
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
