#!/usr/bin/env bash
# graft setup: installs what the build needs on Debian bookworm (as root), fetches the FAISS
# source package (for its C API) into .deps/, then configures and builds into build/.
# Idempotent: a second run only rebuilds what changed. Open MPI (and mpi4py) for the index across
# MPI ranks (adapters/mpi, tests label mpi; built only where CMake finds MPI).
# FAISS: Debian's libfaiss-dev (1.7.3) by default. GRAFT_FAISS=1.15 builds FAISS 1.15 from
# ../shared/peers/faiss-1.15*.tar.gz (or GRAFT_FAISS_SRC: a FAISS source tarball or folder) into a
# cache outside the clone (scripts/build_faiss.sh; ~15 min on 2 cores the first time) and graft
# against it, into build-faiss1.15/ (docs/faiss-versions.md).
#   bash scripts/setup.sh            # deps + build (CUDA arch: native if a GPU is visible, else
#                                    # the package list 80, 86, 89, 90 + PTX: CMakeLists.txt)
#   GRAFT_SKIP_APT=1 bash scripts/setup.sh   # build only
#   GRAFT_CUDA=OFF bash scripts/setup.sh     # CPU references only, no CUDA
#   GRAFT_CUDA_ARCH="80;90" bash scripts/setup.sh   # explicit CUDA architectures
#   GRAFT_SKIP_BUILD=1 bash scripts/setup.sh # dependencies only
#   GRAFT_BENCH_DATA=1 bash scripts/setup.sh # also what scripts/make_dense_sift.py needs
#   GRAFT_SANITIZE=0 bash scripts/setup.sh   # skip the ASan/UBSan + fuzz tree (build-sanitize/)
#   GRAFT_FAISS=1.15 bash scripts/setup.sh   # against FAISS 1.15 (built once into GRAFT_CACHE,
#                                            # default ~/.cache/graft), in build-faiss1.15/
#   GRAFT_FAISS=1.15 GRAFT_FAISS_SRC=~/faiss-1.15.0.tar.gz bash scripts/setup.sh
#   GRAFT_BUILD_DIR=b bash scripts/setup.sh  # another build folder
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo

if [ "${GRAFT_SKIP_APT:-0}" != 1 ]; then
  export DEBIAN_FRONTEND=noninteractive
  # FAISS's C API library is not packaged by Debian: its sources come from the source package,
  # which needs a deb-src entry. None configured: one is derived from the system's own Debian
  # entries (same mirror, suites, components and keyring), so mirrors and proxies keep working.
  $SUDO apt-get update -qq
  if [ -z "$(apt-cache showsrc faiss 2>/dev/null)" ]; then
    src=/etc/apt/sources.list.d/graft-deb-src
    # deb822 files: each stanza whose Types has deb, again as deb-src.
    for f in /etc/apt/sources.list.d/*.sources; do
      [ -f "$f" ] && [ "$f" != "$src.sources" ] || continue
      awk 'BEGIN { RS = ""; ORS = "\n\n" }
           /(^|\n)Types:[^\n]*(^|[ \t])deb([ \t]|\n|$)/ && !/(^|\n)Enabled: *no/ {
             sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print }' "$f"
    done | $SUDO tee "$src.sources" >/dev/null
    # One-line files: each "deb" line, again as "deb-src".
    cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
      sed -nE 's/^[[:space:]]*deb[[:space:]]/deb-src /p' | $SUDO tee "$src.list" >/dev/null
    [ -s "$src.sources" ] || $SUDO rm -f "$src.sources"
    [ -s "$src.list" ] || $SUDO rm -f "$src.list"
    $SUDO apt-get update -qq
    if [ -z "$(apt-cache showsrc faiss 2>/dev/null)" ]; then
      echo "setup: the FAISS source package (for its C API) is not reachable: no deb-src entry for it" >&2
      echo "setup: could be made from /etc/apt/sources.list{,.d/}. Add a deb-src line for a Debian" >&2
      echo "setup: bookworm mirror that has faiss, or put FAISS's source tree in .deps/faiss-src." >&2
      exit 1
    fi
  fi
  $SUDO apt-get install -y -qq --no-install-recommends \
    build-essential cmake ninja-build pkg-config dpkg-dev \
    libfaiss-dev libopenblas-dev liblapack-dev zlib1g-dev \
    dataset-fashion-mnist libhdf5-dev librsvg2-bin \
    swig python3-dev python3-faiss python3-numpy python3-pytest \
    libopenmpi-dev openmpi-bin python3-mpi4py >/dev/null
  # The sanitizer + fuzz tree (build-sanitize/): clang with its ASan/UBSan/libFuzzer runtimes.
  if [ "${GRAFT_SANITIZE:-1}" != 0 ]; then
    $SUDO apt-get install -y -qq --no-install-recommends clang-14 libclang-rt-14-dev libomp-14-dev >/dev/null
  fi
  if [ "${GRAFT_BENCH_DATA:-0}" = 1 ]; then
    # For scripts/make_dense_sift.py (the 1M-scale benchmark set); not needed to build or test.
    $SUDO apt-get install -y -qq --no-install-recommends mate-backgrounds python3-opencv python3-numpy >/dev/null
  fi
fi

# FAISS source (same version as libfaiss-dev) for c_api/*.cpp.
if [ ! -d .deps/faiss-src/c_api ]; then
  mkdir -p .deps
  (cd .deps && rm -rf faiss-*/ && apt-get source -qq faiss >/dev/null 2>&1 || apt-get source faiss)
  d=$(cd .deps && ls -d faiss-*/ | head -n1)
  rm -rf .deps/faiss-src && mv ".deps/$d" .deps/faiss-src
fi

# A FAISS other than Debian's: built from its source into the cache (once), then found through
# CMAKE_PREFIX_PATH; its source serves the Python package's SWIG interface.
faiss=${GRAFT_FAISS:-system}
build=${GRAFT_BUILD_DIR:-build}
faiss_args=(-DGRAFT_FAISS_SOURCE_DIR="$root/.deps/faiss-src")
if [ "$faiss" != system ]; then
  fsrc=${GRAFT_FAISS_SRC:-}
  if [ -z "$fsrc" ]; then
    fsrc=$(ls -d "$root"/../shared/peers/faiss-"$faiss"*.tar.gz 2>/dev/null | sort -V | tail -n1)
    [ -n "$fsrc" ] || { echo "setup: no ../shared/peers/faiss-$faiss*.tar.gz: give its source in GRAFT_FAISS_SRC" >&2; exit 1; }
  fi
  prefix=$(bash scripts/build_faiss.sh "$fsrc" | tail -n1)
  build=${GRAFT_BUILD_DIR:-build-faiss$faiss}
  faiss_args=(-DCMAKE_PREFIX_PATH="$prefix" -DGRAFT_FAISS_SOURCE_DIR="$(cat "$prefix/.graft-source-dir")")
fi

[ "${GRAFT_SKIP_BUILD:-0}" = 1 ] && exit 0

cuda=${GRAFT_CUDA:-AUTO}
arch=${GRAFT_CUDA_ARCH:-}
# A developer's machine with a GPU builds for that GPU alone (a quarter of the CUDA compile time).
[ -z "$arch" ] && nvidia-smi -L >/dev/null 2>&1 && arch=native
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${GRAFT_BUILD_TYPE:-Release} \
  -DGRAFT_CUDA=$cuda ${arch:+-DCMAKE_CUDA_ARCHITECTURES=$arch} "${faiss_args[@]}"
cmake --build "$build" -j"$(nproc)"
echo "graft: built in $root/$build"
[ "$faiss" != system ] && exit 0  # the sanitizer tree below is Debian's FAISS's

# build-sanitize/: the CPU paths (unit + faiss suites) and the fuzz targets under clang-14 with
# ASan + UBSan, static libraries; the main tree's `asan` and `fuzz` tests run it (tests/sanitize/).
if [ "${GRAFT_SANITIZE:-1}" != 0 ] && command -v clang-14 >/dev/null; then
  CC=clang-14 CXX=clang++-14 cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGRAFT_CUDA=OFF -DGRAFT_SANITIZE=ON -DGRAFT_FUZZ=ON -DBUILD_SHARED_LIBS=OFF -DGRAFT_PYTHON=OFF \
    -DGRAFT_FAISS_SOURCE_DIR="$root/.deps/faiss-src" >/dev/null
  cmake --build build-sanitize -j"$(nproc)"
  echo "graft: sanitizer tree built in $root/build-sanitize"
fi
