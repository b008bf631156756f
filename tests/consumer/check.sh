#!/usr/bin/env bash
# Builds tests/consumer/consumer.c against an installed graft, as a user outside this tree would,
# twice: with CMake's find_package(graft) and with pkg-config. Runs both on sift5k.
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

echo "== pkg-config graft from $prefix"
pc=$(find "$prefix"/lib* -maxdepth 3 -name graft.pc -path '*pkgconfig*' 2>/dev/null | head -n1)
[ -n "$pc" ] || { echo "no graft.pc under $prefix"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
libdir=$(pkg-config --variable=libdir graft)
echo "cc consumer.c $(pkg-config --cflags --libs graft)"
cc -O2 "$here/consumer.c" -o consumer-pc $(pkg-config --cflags --libs graft) -Wl,-rpath,"$libdir"
for f in GraftGraph GraftFlat; do ./consumer-pc "$data" "$f"; done
