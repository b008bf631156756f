#!/usr/bin/env bash
# filter-bench: filtered search (graft-bench --selectivity): GraftGraph and GraftGraph,PQ32 (paths
# auto, walk and exact forced), FAISS CPU Flat and IVF4096,Flat with the same random
# IDSelectorBatch of 50% .. 0.01% of the ids, on the 1M dense-SIFT set, then Fashion-MNIST
# (PQ16, IVF1024); FAISS GPU 1.7.3 takes no selector. ("quick": filter-bench-quick, sift5k and
# Fashion-MNIST.) Each run stops at GRAFT_DEADLINE.
# Writes to $OUT: filter-bench.jsonl (records), filter-bench.log.
# Time: not measured (bench/logs/filter-ed7de7d-h100.log has no clock); it takes at most what
# GRAFT_DEADLINE leaves.
# targets: graft-bench
# needs: dense-sift
. "$(dirname "$0")/../lib.sh"
quick=${1:-}
gpu_name=$(device_name)
fb() {  # NAME SECONDS ARGS...
  local name=$1 secs=$2; shift 2
  stamp "filtered graft-bench on $name (${secs}s at most)"
  GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=$(nproc) OPENBLAS_NUM_THREADS=1 \
    timeout "$secs" ./build-device/bench/graft-bench --name "$name" --k 10 --batch 10000 --latency-queries 0 \
    --selectivity 0.5,0.1,0.01,0.001,0.0001 --filter-modes auto,walk,exact --min-time 0.2 \
    --out "$OUT/filter-bench" --gt-cache /tmp/graft-bench-gt --commit "$commit" \
    --deadline $(( secs - 20 )) "$@" 2>&1 | tee -a "$OUT/filter-bench.log"
}
if [ "$quick" = quick ]; then
  s5=$root/.deps/data/sift5k
  fb sift5k 90 --base "$s5/sift5k_base.fvecs" --query "$s5/sift5k_query.fvecs" --sweep L=32,64 --sweep nprobe=8,32 \
    --index GraftGraph --index GraftGraph,PQ32 --index Flat --index IVF64,Flat
else
  bg_wait dense-sift
  left=$(seconds_left)
  if [ -f $dense/query.u8bin ] && [ "$left" -ge 120 ]; then
    fb dense-sift1m $(( left > 300 ? left - 120 : left )) --base $dense/base.u8bin --query $dense/query.u8bin \
      --sweep L=32,64,128 --sweep nprobe=16,64,256 \
      --index GraftGraph --index GraftGraph,PQ32 --index Flat --index IVF4096,Flat
  else
    stamp "filtered graft-bench on dense-sift1m skipped (no set, or ${left}s left)"
  fi
fi
left=$(seconds_left)
if [ "$left" -ge 60 ]; then
  fb fashion-mnist "$left" --base "$fm/train-images-idx3-ubyte.gz" --query "$fm/t10k-images-idx3-ubyte.gz" \
    --sweep L=32,64 --sweep nprobe=16,64 --index GraftGraph --index GraftGraph,PQ16 --index Flat --index IVF1024,Flat
else
  stamp "filtered graft-bench on fashion-mnist skipped: ${left}s left"
fi
[ -f "$OUT/filter-bench/graft-bench.jsonl" ] && mv "$OUT/filter-bench/graft-bench.jsonl" "$OUT/filter-bench.jsonl"
rm -rf "$OUT/filter-bench"
stamp "filtered graft-bench done"
