#!/usr/bin/env bash
# study-search: bench/studies/bench_search, the graph-search study: the walk's kernel time
# against the HBM floor, the ablations of its visited set, worklist update, lanes and probes, the
# graph searched through FAISS's HNSW export, and the GPU walk against the CPU reference, on
# sift5k, Fashion-MNIST and the 1M dense-SIFT set ("quick": study-search-quick, sift5k only). Its
# former peers (FAISS HNSW32, GPU IVF-Flat) and batch sweeps are graft-bench's now
# (bench/studies/README.md). Stops at GRAFT_DEADLINE (no new configuration
# 30 s before); with study-bang in the call, it takes half of the time left.
# Writes to $OUT: search.jsonl (records), bench_search.log.
# Time: ~3 min on nvidia-h100 (bench/logs/search-cf25786-h100.log); nvidia-h200 kinds not measured.
# targets: bench_search
# needs: dense-sift
. "$(dirname "$0")/../lib.sh"
quick=${1:-}
link_faiss_gpu
ninja_build bench_search
args=()
if [ "$quick" = quick ]; then
  args=(--quick)
else
  bg_wait dense-sift
  [ -f $dense/query.u8bin ] && args=(--dense-sift "$dense")
fi
left=$(seconds_left)
# The graph + PQ benchmark still to come gets the other half.
if wanted study-bang || wanted study-bang-quick; then left=$(( left / 2 )); fi
[ "$left" -ge 60 ] || { stamp "graph-search benchmark skipped: ${left}s left before GRAFT_DEADLINE"; exit 0; }
stamp "graph-search benchmark"
# --deadline: no new configuration after it; the margin lets the last one and the summary finish.
GRAFT_DEVICE_NAME="$(device_name)" OMP_NUM_THREADS=$(nproc) \
  timeout "$left" ./build-device/bench/studies/bench_search --out "$OUT/search.jsonl" --commit "$commit" \
  --deadline $(( left - 30 )) --data "$root/.deps/data" --fmnist "$fm" "${args[@]}" \
  2>&1 | tee -a "$OUT/bench_search.log"
stamp "graph-search benchmark done"
