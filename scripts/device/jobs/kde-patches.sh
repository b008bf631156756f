#!/usr/bin/env bash
# kde-patches: the 1M KDE-patches set (d = 192, scripts/make_patches.py on the carried
# .deps/data/kde-images) into /tmp/kde-patches1m, made in the background like dense-sift.
# Writes to $OUT: setup.log (its log, once waited for).
# Time: not measured alone (it overlaps the build and tests).
# background: yes
. "$(dirname "$0")/../lib.sh"
if [ "${1:-}" = start ]; then
  [ -d .deps/data/kde-images ] && [ ! -f $patches/query.u8bin ] || exit 0
  bg_start kde-patches env PYTHONUNBUFFERED=1 python3 scripts/make_patches.py $patches \
    --images .deps/data/kde-images
  exit 0
fi
bg_wait kde-patches
[ -f $patches/query.u8bin ] || { stamp "no KDE-patches set (no .deps/data/kde-images carried, or setup.log)"; exit 1; }
