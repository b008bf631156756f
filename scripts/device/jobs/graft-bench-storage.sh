#!/usr/bin/env bash
# graft-bench-storage: the graph index's storages against each other in one run (issue 21 aims
# at QPS at recall@10 >= 0.95, SQ8 >= 2x and FP16 >= 1.6x FP32's, and GPU bytes per vector):
# GraftGraph (the summary's ratios are to it), ,FP16, ,SQ8, ,PQ32 and ,OPQ32,PQ32 on the 1M
# dense-SIFT set, then the same on Fashion-MNIST with PQ28 (784 = 28 x 28), batch 10k only (no
# FAISS GPU, no GGNN: nothing to build in the background); then FP16 and SQ8 with 4 lanes a
# distance (GRAFT_SEARCH_LANES=4 against the default 8 at d = 128: the compressed rows are 2-4x
# shorter), console only.
# Writes to $OUT: graft-bench-storage.log, graft-bench.jsonl (records).
# Time: ~40 s after the build on nvidia-h100 (bench/logs/storage-ea41d87-h100.log); nvidia-h200
# kinds not measured.
# targets: graft-bench
# needs: dense-sift
. "$(dirname "$0")/../lib.sh"
bg_wait dense-sift
gpu_name=$(device_name)
gbs() {  # NAME SECONDS ARGS...
  local name=$1 secs=$2; shift 2
  stamp "graft-bench (storages) on $name (${secs}s at most)"
  GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=1 \
    timeout "$secs" ./build-device/bench/graft-bench --name "$name" --k 10 --batch 10000 --latency-queries 0 \
    --out "$OUT" --gt-cache /tmp/graft-bench-gt --commit "$commit" \
    --sweep "L=16,24,32,48,64,96,128,256" --deadline $(( secs - 20 )) "$@" 2>&1 | tee -a "$OUT/graft-bench-storage.log"
}
left=$(seconds_left)
if [ -f $dense/query.u8bin ] && [ "$left" -ge 60 ]; then
  gbs dense-sift1m $(( left > 180 ? left - 60 : left )) --base $dense/base.u8bin --query $dense/query.u8bin \
    --index GraftGraph --index GraftGraph,FP16 --index GraftGraph,SQ8 --index GraftGraph,PQ32 \
    --index GraftGraph,OPQ32,PQ32
else
  stamp "graft-bench (storages) on dense-sift1m skipped: no set (setup.log) or ${left}s left"
fi
left=$(seconds_left)
if [ "$left" -ge 40 ]; then
  gbs fashion-mnist "$left" --base "$fm/train-images-idx3-ubyte.gz" --query "$fm/t10k-images-idx3-ubyte.gz" \
    --index GraftGraph --index GraftGraph,FP16 --index GraftGraph,SQ8 --index GraftGraph,PQ28 \
    --index GraftGraph,OPQ28,PQ28
else
  stamp "graft-bench (storages) on fashion-mnist skipped: ${left}s left before GRAFT_DEADLINE"
fi
left=$(seconds_left)
if [ -f $dense/query.u8bin ] && [ "$left" -ge 60 ]; then
  stamp "lanes: FP16 and SQ8 with 4 lanes a distance on dense-sift1m (${left}s at most)"
  GRAFT_SEARCH_LANES=4 GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=16 timeout "$left" \
    ./build-device/bench/graft-bench --name dense-sift1m-lanes4 --k 10 --batch 10000 \
    --latency-queries 0 --out /tmp/graft-lanes --gt-cache /tmp/graft-bench-gt \
    --sweep "L=32,48,64,96" --refine 0 --deadline $(( left - 10 )) --base $dense/base.u8bin \
    --query $dense/query.u8bin --index GraftGraph --index GraftGraph,FP16 --index GraftGraph,SQ8 \
    2>&1 | tee -a "$OUT/graft-bench-storage.log"
fi
stamp "graft-bench (storages) done"
