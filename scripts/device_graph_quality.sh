#!/usr/bin/env bash
# GPU job: the graph build's convergence (issue 46). On the three 1M-scale sets (Fashion-MNIST
# 60k x 784, dense-SIFT 1M x 128, KDE-patches 1M x 192; the latter two made here from the carried
# images while graft builds), graft-bench of each GraftGraph build variant in GRAFT_GQ_INDEXES
# (factory strings, ';'-separated) at batch 10k with --graph-recall (graph rows against sampled
# vertices' exact neighbours) and GRNND's per-round new entries (GRAFT_GRNND_ROUNDS=1), after
# test_gpu_grnnd (the GPU build against the CPU reference). Optionally GRAFT_GQ_SCALE=C: dense-SIFT
# grown to C synthetic copies (build time and L against n). Into $OUT: graph-quality.log,
# graph-quality.jsonl, build.log, ctest.log.
#   GRAFT_COMMIT=abc1234 GRAFT_DEADLINE=560 bash scripts/device_graph_quality.sh
# About 6-9 minutes on one H200 for four variants (not yet timed on other kinds).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-$root/device-out}
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
left() { echo $(( ${GRAFT_DEADLINE:-100000} - ($(date +%s) - t0) )); }
log=$OUT/graph-quality.log
# A call may carry its dependencies in one folder (.deps/c1: the 8-path carry limit).
[ -d .deps/c1 ] && cp -rlf .deps/c1/. .deps/

# The two image-made sets, in the background while graft builds (their own process groups).
dense=/tmp/dense-sift1m patches=/tmp/kde-patches1m
pids=()
if [ ! -f $dense/query.u8bin ]; then
  setsid env PYTHONUNBUFFERED=1 python3 scripts/make_dense_sift.py $dense --images .deps/data/mate-images \
    --no-gt >/tmp/graft-dense.log 2>&1 </dev/null & pids+=($!)
fi
if [ ! -f $patches/query.u8bin ] && [ -d .deps/data/kde-images ]; then
  setsid env PYTHONUNBUFFERED=1 python3 scripts/make_patches.py $patches --images .deps/data/kde-images \
    >/tmp/graft-patches.log 2>&1 </dev/null & pids+=($!)
fi

fr=/tmp/graft-faiss
[ -f $fr/usr/lib/x86_64-linux-gnu/libfaiss.a ] || dpkg -x .deps/debs/libfaiss-dev_*.deb $fr || exit 1
blas=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}')
stamp "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n1); BLAS $blas" | tee "$log"
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DGRAFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DGRAFT_FAISS_ROOT=$fr -DGRAFT_BLAS_LIBRARIES="$blas" -DGRAFT_FAISS_SOURCE_DIR="$root/.deps/faiss-src" \
  -DGRAFT_PYTHON=OFF -DGRAFT_DATA_DIR="$root/.deps/data" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
ninja -C build-device graft-bench test_gpu_grnnd test_gpu_search >>"$OUT/build.log" 2>&1 ||
  { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -60; exit 1; }
stamp "built" | tee -a "$log"
ctest --test-dir build-device -R "test_gpu_grnnd|test_gpu_search" --output-on-failure -V >"$OUT/ctest.log" 2>&1
stamp "GPU tests: $(grep -E "tests passed|tests failed" "$OUT/ctest.log")" | tee -a "$log"
grep -E "converged|^sift5k: n=|L=(16|32) +recall" "$OUT/ctest.log" | head -20 | tee -a "$log"

IFS=';' read -r -a indexes <<<"${GRAFT_GQ_INDEXES:-GraftGraph,T1=3,T2=8;GraftGraph,T1=6,T2=15;GraftGraph,T1=10,T2=40,delta=0.002;GraftGraph,T1=10,T2=40,delta=0.0005}"
index_args=()
for i in "${indexes[@]}"; do index_args+=(--index "$i"); done
bench() {  # NAME BASE QUERY [more graft-bench options]
  local name=$1 base=$2 query=$3
  shift 3
  local secs=$(left)
  [ "$secs" -gt 60 ] || { stamp "$name skipped: ${secs}s left" | tee -a "$log"; return; }
  stamp "$name (${secs}s at most)" | tee -a "$log"
  GRAFT_GRNND_ROUNDS=1 timeout "$secs" ./build-device/bench/graft-bench --name "$name" --base "$base" \
    --query "$query" --k 10 --batch 10000 --latency-queries 0 --min-time 0.2 --graph-recall 2000 \
    --out /tmp/gq --gt-cache /tmp/graft-bench-gt --commit "${GRAFT_COMMIT:-unknown}" \
    --deadline $(( secs - 20 )) "${index_args[@]}" "$@" 2>&1 | tr '\r' '\n' | grep -v '^ *$' >>"$log"
  grep -E "built in|GRNND [0-9]+ rounds|^GraftGraph.*~" "$log" | tail -n 12
}
fm=.deps/data/fashion-mnist
bench fashion-mnist $fm/train-images-idx3-ubyte.gz $fm/t10k-images-idx3-ubyte.gz
for p in "${pids[@]}"; do wait "$p"; done
stamp "sets made: $(tail -n1 /tmp/graft-dense.log) | $(tail -n1 /tmp/graft-patches.log 2>/dev/null)" | tee -a "$log"
[ -f $dense/query.u8bin ] && bench dense-sift1m $dense/base.u8bin $dense/query.u8bin
[ -f $patches/query.u8bin ] && bench kde-patches1m $patches/base.u8bin $patches/query.u8bin
[ -n "${GRAFT_GQ_SCALE:-}" ] && [ -f $dense/query.u8bin ] &&
  bench "dense-sift1m-x${GRAFT_GQ_SCALE}-synthetic" $dense/base.u8bin $dense/query.u8bin --scale "$GRAFT_GQ_SCALE"
cp /tmp/gq/graft-bench.jsonl "$OUT/graph-quality.jsonl" 2>/dev/null
stamp "done" | tee -a "$log"
