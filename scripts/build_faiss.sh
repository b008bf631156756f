#!/usr/bin/env bash
# Builds a FAISS release from its source (a tarball such as ../shared/peers/faiss-1.15.0.tar.gz, or
# an unpacked tree) and installs it into a cache outside the clone, for graft to build against
# (scripts/setup.sh GRAFT_FAISS=1.15). What it builds: libfaiss and libfaiss_c as shared
# libraries (one FAISS per process: graft's libraries, FAISS's C API and FAISS's Python module
# all link the same libfaiss.so), FAISS's Python module (swigfaiss) for /usr/bin/python3, CPU only,
# generic SIMD level, OpenBLAS. About 15 minutes on 2 cores; a second run with the same source and
# options reuses the installed prefix at once.
#   bash scripts/build_faiss.sh SOURCE            prints the prefix on its last line
# Layout under GRAFT_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/graft), V = FAISS's version:
#   src/faiss-V/     the source (GRAFT_FAISS_SOURCE_DIR for graft: its C API and SWIG interface)
#   build-faiss-V/   FAISS's build folder (kept: an interrupted build resumes)
#   faiss-V/         the install prefix (CMAKE_PREFIX_PATH for graft): lib/libfaiss.so,
#                    lib/libfaiss_c.so, include/faiss, share/faiss (CMake package),
#                    lib/python3/dist-packages/faiss (the Python module), .graft-stamp (what it
#                    was built from: a prefix whose stamp differs is rebuilt), .graft-source-dir
#                    (the source folder)
# Environment: GRAFT_CACHE, GRAFT_JOBS (default nproc), GRAFT_FAISS_CMAKE_ARGS (more FAISS options,
# part of the stamp).
set -euo pipefail
src_in=${1:?usage: build_faiss.sh FAISS_SOURCE (tarball or folder)}
cache=${GRAFT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/graft}
jobs=${GRAFT_JOBS:-$(nproc)}
python=/usr/bin/python3  # the interpreter graft's Python package is built for (adapters/python)
mkdir -p "$cache/src"

# The source's identity: a tarball's checksum, or a folder's path. Its version: faiss/Index.h.
if [ -f "$src_in" ]; then
  id="tarball $(sha256sum "$src_in" | cut -d' ' -f1)"
  top=$(tar tzf "$src_in" | awk -F/ 'NR == 1 { print $1 }')
  src=$cache/src/$top
  if [ "$(cat "$src/.graft-source" 2>/dev/null)" != "$id" ]; then
    rm -rf "$src"
    tar xzf "$src_in" -C "$cache/src"
    echo "$id" > "$src/.graft-source"
  fi
elif [ -f "$src_in/faiss/Index.h" ]; then
  src=$(cd "$src_in" && pwd)
  id="folder $src"
else
  echo "build_faiss: $src_in is neither a FAISS source tarball nor a FAISS source folder" >&2
  exit 2
fi
version=$(sed -nE 's/^#define FAISS_VERSION_(MAJOR|MINOR|PATCH) ([0-9]+).*/\2/p' "$src/faiss/Index.h" | paste -sd.)
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "build_faiss: no version in $src/faiss/Index.h" >&2; exit 2; }

build=$cache/build-faiss-$version
prefix=$cache/faiss-$version
opts=(-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON -DFAISS_ENABLE_GPU=OFF
      -DFAISS_ENABLE_PYTHON=ON -DFAISS_ENABLE_C_API=ON -DBUILD_TESTING=OFF -DFAISS_OPT_LEVEL=generic
      -DBLA_VENDOR=OpenBLAS -DPython_EXECUTABLE=$python ${GRAFT_FAISS_CMAKE_ARGS:-})
stamp="$id; ${opts[*]}"
if [ "$(cat "$prefix/.graft-stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "build_faiss: FAISS $version already built from this source ($prefix)" >&2
  echo "$prefix"
  exit 0
fi

echo "build_faiss: building FAISS $version from $src_in ($jobs jobs; about 15 minutes on 2 cores)" >&2
t0=$(date +%s)
rm -rf "$prefix"
cmake -S "$src" -B "$build" -G Ninja "${opts[@]}" >/dev/null
# faiss, faiss_c and the Python module; FAISS's own tests and benchmarks are not needed.
cmake --build "$build" -j "$jobs" --target faiss faiss_c swigfaiss >&2
# FAISS's install rules would put a second libfaiss.so inside the Python package (for wheels) and
# the package at the prefix's top: the libraries go to lib/ and the package beside Debian's layout.
cmake --install "$build" --prefix "$prefix" >/dev/null
pkg=$prefix/lib/python3/dist-packages/faiss
mkdir -p "$(dirname "$pkg")"
rm -rf "$pkg" && mv "$prefix/faiss" "$pkg"
for lib in "$pkg"/libfaiss*.so*; do
  [ -e "$lib" ] || continue
  # _swigfaiss finds libfaiss through $ORIGIN: a link to the prefix's, so that it is one file.
  rm -f "$lib" && ln -s "../../../$(basename "$lib")" "$lib"
done
# The module imports. FAISS_OPT_LEVEL=generic names the one module built, which FAISS's loader
# would otherwise find through numpy >= 2's CPU features (Debian bookworm has numpy 1.24).
FAISS_OPT_LEVEL=generic PYTHONPATH=$prefix/lib/python3/dist-packages $python -c \
  "import faiss, numpy as np; i = faiss.IndexFlatL2(4); i.add(np.eye(4, dtype='float32')); assert faiss.__version__ == '$version'"
echo "$src" > "$prefix/.graft-source-dir"
echo "$stamp" > "$prefix/.graft-stamp"
echo "build_faiss: FAISS $version installed in $prefix ($(( $(date +%s) - t0 )) s)" >&2
echo "$prefix"
