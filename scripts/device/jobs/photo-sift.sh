#!/usr/bin/env bash
# photo-sift: the real 10M-scale set photo-sift10m (dense SIFT of 260 Debian-packaged photographs,
# 10k queries from 28 others: scripts/make_photo_sets.py, docs/benchmarks.md) into .data/, and
# photo-sift1m, its evenly spread 1M subset with the same queries (--finish --n-base 1000000 over
# the same distinct rows), made in the background from the carried .deps/data/photo-images/part1,
# when named or when GRAFT_GQ_SETS names one of the two.
# Writes to $OUT: setup.log (its log, once waited for).
# Time: 96 s + 19 s on nvidia-h200 (16 cores), overlapping the build.
# background: yes
. "$(dirname "$0")/../lib.sh"
if [ "${1:-}" = start ]; then
  wanted photo-sift || gq_wants photo-sift1m photo-sift10m || exit 0
  [ -d .deps/data/photo-images/part1 ] && [ ! -f .data/photo-sift1m/query.u8bin ] || exit 0
  bg_start photo-sift bash -c "python3 scripts/make_photo_sets.py .data/photo-sift10m --kind sift \
    --images .deps/data/photo-images/part1 && mkdir -p .data/photo-sift1m && cp -rl .data/photo-sift10m/parts \
    .data/photo-sift1m/ && python3 scripts/make_photo_sets.py .data/photo-sift1m --kind sift --finish --n-base 1000000"
  exit 0
fi
bg_wait photo-sift
[ -f .data/photo-sift1m/query.u8bin ] || { stamp "no photo-sift sets (no .deps/data/photo-images carried, or setup.log)"; exit 1; }
