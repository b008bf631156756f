#!/usr/bin/env bash
# Builds tests/consumer/consumer.c against an installed graft, as a user outside this tree would,
# twice: with CMake's find_package(graft) and with pkg-config. Runs both on sift5k. Where graft's
# FAISS has FAISS 1.15's C API (faiss_Index_search_with_params), also filtered.c (FAISS's own
# strings and graft's through one factory line, with search parameters); where graft's Python
# package was installed, also examples/python/faiss_swap.py against the installed package.
#   bash tests/consumer/check.sh PREFIX DATA_DIR WORK_DIR
# PREFIX: where graft was installed (cmake --install ... --prefix PREFIX, or /usr for the .deb).
set -euo pipefail
prefix=$1 data=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export OPENBLAS_NUM_THREADS=1

echo "== find_package(graft) from $prefix"
cmake -S "$here" -B cmake-build -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >cmake.log 2>&1 ||
  { cat cmake.log; exit 1; }
cmake --build cmake-build >>cmake.log 2>&1 || { cat cmake.log; exit 1; }
for f in GraftGraph GraftFlat; do ./cmake-build/consumer "$data" "$f"; done
if [ -x cmake-build/filtered ]; then
  for f in HNSW32 GraftGraph GraftFlat; do ./cmake-build/filtered "$data" "$f"; done
fi

echo "== pkg-config graft from $prefix"
pc=$(find "$prefix"/lib* -maxdepth 3 -name graft.pc -path '*pkgconfig*' 2>/dev/null | head -n1)
[ -n "$pc" ] || { echo "no graft.pc under $prefix"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir graft)
echo "cc consumer.c $(pkg-config --cflags --libs graft)"
cc -O2 "$here/consumer.c" -o consumer-pc $(pkg-config --cflags --libs graft) -Wl,-rpath,"$libdir"
for f in GraftGraph GraftFlat; do ./consumer-pc "$data" "$f"; done
if [ -x cmake-build/filtered ]; then
  cc -O2 "$here/filtered.c" -o filtered-pc $(pkg-config --cflags --libs graft) -Wl,-rpath,"$libdir"
  ./filtered-pc "$data" GraftGraph
fi

# The Python package as installed, beside the FAISS Python module graft was built against.
py=$(find "$prefix"/lib* -maxdepth 4 -type d -name graft -path '*-packages/graft' 2>/dev/null | head -n1)
if [ -n "$py" ]; then
  echo "== Python: examples/python/faiss_swap.py with $(dirname "$py")"
  faiss_py=$(pkg-config --variable=faiss_pythonpath graft)
  # A FAISS of its own prefix (scripts/build_faiss.sh): its generic module by name, as the tests
  # do (adapters/python/CMakeLists.txt, GRAFT_FAISS_PYTHON_ENV, says why).
  [ -z "$faiss_py" ] || export FAISS_OPT_LEVEL=${FAISS_OPT_LEVEL:-generic}
  PYTHONPATH="$(dirname "$py")${faiss_py:+:$faiss_py}" GRAFT_DATA_DIR="$data" \
    /usr/bin/python3 "$here/../../examples/python/faiss_swap.py" HNSW32 GraftGraph GraftFlat
fi
