#!/usr/bin/env bash
# dense-sift: the 1M dense-SIFT set (scripts/make_dense_sift.py on the carried
# .deps/data/mate-images: 128 MB is over the carry limit) into /tmp/dense-sift1m, made in the
# background from the call's start while graft builds; the benchmarks compute their own ground
# truth. Kept in /tmp: a warm machine's next call reuses it. The jobs that read it name it in
# "# needs:"; named itself, its turn waits for it.
# Writes to $OUT: setup.log (its log, once waited for).
# Time: under a minute on nvidia-h100 (16 cores: done before a 58 s build + tests,
# bench/logs/storage-ea41d87-h100.log); nvidia-h200 kinds not measured.
# background: yes
. "$(dirname "$0")/../lib.sh"
if [ "${1:-}" = start ]; then
  [ -d .deps/data/mate-images ] && [ ! -f $dense/query.u8bin ] || exit 0
  bg_start dense-sift env PYTHONUNBUFFERED=1 python3 scripts/make_dense_sift.py $dense \
    --images .deps/data/mate-images --no-gt
  exit 0
fi
bg_wait dense-sift
[ -f $dense/query.u8bin ] || { stamp "no dense-SIFT set (no .deps/data/mate-images carried, or setup.log)"; exit 1; }
