#!/usr/bin/env bash
# cuvs: cuVS trimmed to CAGRA (scripts/device/build_cuvs.sh) from the carried
# .deps/peers/cuvs/*.tar.gz (8.6 MB, scripts/fetch_deps.sh) into /tmp/cuvs, in the background from
# the call's start, when .deps/cagra (the libraries built off the GPU machine) was not carried;
# the cagra job then takes its libraries. Kept in /tmp: a warm machine's next call goes on where
# this one stopped (ninja).
# Writes to $OUT: setup.log (its log, once waited for).
# Time: not measured here (about 15 min on the 2-core build machine; 392 steps).
# background: yes
. "$(dirname "$0")/../lib.sh"
if [ "${1:-}" = start ]; then
  [ -f .deps/cagra/libgraft_cagra_peer.so ] || [ ! -f .deps/peers/cuvs/README.md ] && exit 0
  bg_start cuvs bash scripts/device/build_cuvs.sh /tmp/cuvs .deps/peers/cuvs
  exit 0
fi
started cuvs || exit 0
bg_wait cuvs 5
[ -f .deps/cagra/libgraft_cagra_peer.so ] || { stamp "cuVS did not build (setup.log)"; exit 1; }
