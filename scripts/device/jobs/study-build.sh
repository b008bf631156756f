#!/usr/bin/env bash
# study-build: bench/studies/bench_build, the graph-build study: GRNND on the GPU against the CPU
# RNN-Descent reference, FAISS HNSW32 and NSG32, and its ablations, on sift5k, Fashion-MNIST and
# the 1M dense-SIFT set; stops at GRAFT_DEADLINE. ("pieces": study-pieces.)
# Writes to $OUT: build.jsonl (records), bench_build.log.
# Time: not measured alone on any kind (its logs are console only).
# targets: bench_build
# needs: dense-sift
. "$(dirname "$0")/../lib.sh"
pieces=0
[ "${1:-}" = pieces ] && pieces=1
bg_wait dense-sift
dense_args=()
[ -f $dense/query.u8bin ] && dense_args=(--dense-sift "$dense")
stamp "graph-build benchmark"
GRAFT_DEVICE_NAME="$(device_name)" OMP_NUM_THREADS=$(nproc) \
  timeout "$(seconds_left)" ./build-device/bench/studies/bench_build --out "$OUT/build.jsonl" --commit "$commit" \
  --data "$root/.deps/data" --fmnist "$fm" "${dense_args[@]}" --pieces $pieces 2>&1 | tee -a "$OUT/bench_build.log"
stamp "graph-build benchmark done"
