#!/usr/bin/env bash
# living: issue 34's living-index benchmark (bench/studies/bench_living.cpp) on the 1M dense-SIFT
# set, then grown to 10M (--scale 10): a full build, an insert of 1% against it, ten 1% adds to
# +10% and their recall, inserts a second at batch 1k and 100k beside FAISS HNSW32's add rate on
# 16 threads (1M only), removal of 10% and 50%, consolidation. GRAFT_LIVING_SCALES="1 10"
# (default) picks the sizes; GRAFT_LIVING_INSERT_L=96,128 repeats the 1M inserts at those beams.
# Each size starts only with 120 s left before GRAFT_DEADLINE.
# Writes to $OUT: living.jsonl (records), bench_living.log.
# Time: ~100 s at 1M on nvidia-h100 (bench/logs/living-fad9297-h100.log: "done in 102.5 s"), the
# 10M size several minutes; nvidia-h200 kinds not measured.
# targets: bench_living
# needs: dense-sift
. "$(dirname "$0")/../lib.sh"
bg_wait dense-sift
for c in ${GRAFT_LIVING_SCALES:-1 10}; do
  left=$(seconds_left)
  [ "$left" -ge 120 ] || { stamp "bench_living --scale $c skipped: ${left}s left before GRAFT_DEADLINE"; continue; }
  stamp "living-index benchmark, dense-SIFT x$c (${left}s at most)"
  insert_l=()
  [ "$c" = 1 ] && [ -n "${GRAFT_LIVING_INSERT_L:-}" ] && insert_l=(--insert-L "$GRAFT_LIVING_INSERT_L")
  GRAFT_DEVICE_NAME="$(device_name)" OMP_NUM_THREADS=$(nproc) OPENBLAS_NUM_THREADS=1 timeout "$left" \
    ./build-device/bench/studies/bench_living --base $dense/base.u8bin --query $dense/query.u8bin \
    --name dense-sift1m --scale "$c" --nq 10000 --hnsw-threads 16 --out "$OUT/living.jsonl" \
    --commit "$commit" --deadline $(( left - 30 )) "${insert_l[@]}" 2>&1 | tee -a "$OUT/bench_living.log"
done
stamp "living-index benchmark done"
