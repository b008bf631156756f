#!/usr/bin/env bash
# smooth-sift: the exact benchmark's 1M smooth-image set (scripts/make_dense_sift.py --smooth on
# the carried mate-images: many equal and near-duplicate vectors) into /tmp/smooth-sift1m, made in
# the background like dense-sift.
# Writes to $OUT: setup.log (its log, once waited for).
# Time: not measured alone (it overlaps the build and tests).
# background: yes
. "$(dirname "$0")/../lib.sh"
if [ "${1:-}" = start ]; then
  [ -f .deps/data/mate-images/desktop/Ubuntu-Mate-Warm-no-logo.png ] && [ ! -f $smooth/query.u8bin ] || exit 0
  bg_start smooth-sift env PYTHONUNBUFFERED=1 python3 scripts/make_dense_sift.py $smooth --smooth \
    --images .deps/data/mate-images --no-gt
  exit 0
fi
bg_wait smooth-sift
[ -f $smooth/query.u8bin ] || { stamp "no smooth-SIFT set (setup.log)"; exit 1; }
