#!/usr/bin/env bash
# walk-floor: the walk's memory floor (issue 47; bench/studies/walk_replay.h): bench_search
# --replay-only on dense-SIFT 1M, Fashion-MNIST and KDE-patches 1M. Per set: ground truth, the
# default GRNND graph, then at L = 32 .. 256, batch 10k: the walk's kernel time against a replay
# of the CPU reference's walks over the same graph with every load independent. A prebuilt
# bench_search (GRAFT_PREBUILT, scripts/device/pack_prebuilt.sh bench_search) is used as it is.
# GRAFT_FLOOR_L="12,16,..." sets the L values (bench_search --replay-L).
# Writes to $OUT: walk-floor.jsonl (records), walk-floor.log.
# Fashion-MNIST runs where .deps/data/fashion-mnist is carried (26 MiB: with prebuilt.tar.xz it
# leaves no room for the images of the other two sets; bench/logs/walk-floor-*.log).
# Time: 49-82 s on nvidia-h200 for two sets made in the call, seven L values (the CPU traces on
# 16 cores, the walk's timing, four replays an L).
# targets: bench_search
# needs: dense-sift kde-patches
. "$(dirname "$0")/../lib.sh"
bin=$root/.deps/prebuilt/bench_search
if [ -z "${GRAFT_PREBUILT:-}" ] || [ ! -x "$bin" ]; then
  ninja_build bench_search
  bin=./build-device/bench/studies/bench_search
fi
bg_wait dense-sift
bg_wait kde-patches
args=()
[ -f $dense/query.u8bin ] && args+=(--dense-sift "$dense")
[ -f $patches/query.u8bin ] && args+=(--kde "$patches")
left=$(seconds_left)
[ "$left" -ge 60 ] || { stamp "walk floor skipped: ${left}s left before GRAFT_DEADLINE"; exit 0; }
stamp "walk floor"
GRAFT_DEVICE_NAME="$(device_name)" OMP_NUM_THREADS=$(nproc) \
  timeout "$left" "$bin" --replay-only --out "$OUT/walk-floor.jsonl" --commit "$commit" \
  --deadline $(( left - 30 )) --data "$root/.deps/data" --fmnist "$fm" "${args[@]}" \
  ${GRAFT_FLOOR_L:+--replay-L "$GRAFT_FLOOR_L"} \
  2>&1 | tee -a "$OUT/walk-floor.log" | grep -E "^==|replay|failed"
stamp "walk floor done"
