#!/usr/bin/env bash
# ggnn: GGNN 0.9.1 (graft-bench's GGNN peer) from the carried .deps/peers tarball and glog/gflags
# .debs (scripts/device/build_ggnn.sh) into /tmp/ggnn, in the background from the call's start.
# graft-bench waits for it and links it; without it graft-bench runs without GGNN.
# Writes to $OUT: setup.log (its log, once waited for).
# Time: ~30 s on nvidia-h100 (16 cores); nvidia-h200 kinds not measured.
# background: yes
. "$(dirname "$0")/../lib.sh"
if [ "${1:-}" = start ]; then
  [ -f $ggnn/build/libGGNNBase.so ] && exit 0
  bg_start ggnn bash scripts/device/build_ggnn.sh $ggnn
  exit 0
fi
bg_wait ggnn 3
[ -f $ggnn/build/libGGNNBase.so ] || { stamp "GGNN did not build (setup.log)"; exit 1; }
