#!/usr/bin/env bash
# photo-sift40m: the recall-at-scale sets at 40M (issue 46): the photographs of photo-sift10m at
# grid step 2 (4 times the rows of the same pixels; docs/benchmarks.md), 40M base rows and 10k
# queries into .data/photo-sift40m, then its evenly spread 10M and 1M subsets with the same
# queries (.data/photo-sift40m-10m, -1m: --finish over the same distinct rows, both at once),
# made in the background from the carried .deps/data/photo-images/part1. Starts only when named,
# or when GRAFT_GQ_SETS names one of the three (the graph-quality job waits for each).
# Writes to $OUT: setup.log (its log, once waited for).
# Time: 430 s on nvidia-h200 (16 cores) for the 40M set, 123 s more for the subsets
# (bench/logs/photo-sift40m-9d87fc6-h200.log): a call that makes them has little time left, and
# the next call on the warm machine finds them on its disk.
# background: yes
. "$(dirname "$0")/../lib.sh"
s=.data/photo-sift40m
if [ "${1:-}" = start ]; then
  wanted photo-sift40m || gq_wants photo-sift40m photo-sift40m-10m photo-sift40m-1m || exit 0
  [ -d .deps/data/photo-images/part1 ] && [ ! -f $s-1m/recipe.json ] || exit 0
  sub() { echo "mkdir -p $s-$1 && cp -rl $s/parts $s-$1/ && python3 scripts/make_photo_sets.py $s-$1 \
    --kind sift --finish --n-base $2"; }
  bg_start photo-sift40m bash -c "{ [ -f $s/recipe.json ] || python3 scripts/make_photo_sets.py $s --kind sift \
    --step 2 --n-base 40000000 --images .deps/data/photo-images/part1; } && { $(sub 10m 10000000) & \
    $(sub 1m 1000000); wait; }"
  exit 0
fi
bg_wait photo-sift40m
[ -f $s-1m/recipe.json ] || { stamp "no photo-sift40m sets (no .deps/data/photo-images carried, or setup.log)"; exit 1; }
