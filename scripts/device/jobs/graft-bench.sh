#!/usr/bin/env bash
# graft-bench: bench/graft_bench.cpp on the 1M dense-SIFT set: GraftGraph (the summary's ratios
# are to the first index), GraftFlat, GraftGraph,PQ32, HNSW32 (16 threads), IVF4096,Flat@gpu,
# IVF4096,PQ32@gpu (FAISS GPU), GGNN and CAGRA (where .deps/cagra is carried: the cagra job);
# then GraftGraph, HNSW32, IVF1024,Flat@gpu, GGNN and CAGRA on
# Fashion-MNIST while time is left (90 s of it when more than 4 min are). Batch 10k, latency at
# batch 1 over 200 queries. graft-bench has not always built with both peers linked: it is built
# again without FAISS GPU, then without GGNN too, rather than not run.
# Writes to $OUT: graft-bench.log, graft-bench.jsonl (records), recall-qps-*.svg, the dense-sift1m
# chart's .png (the Fashion-MNIST one as SVG only: the device tool returns at most 8 files).
# Time: 119 s on nvidia-h200 with the peers built (a warm machine after a `faiss115` call:
# bench/logs/graft-bench-e0a7ff5-h200.log); otherwise it first waits for the FAISS GPU build (~6 min
# from the call's start) and takes what GRAFT_DEADLINE leaves.
# targets: graft-bench
# needs: dense-sift faiss-gpu ggnn
. "$(dirname "$0")/../lib.sh"
link_faiss_gpu
bg_wait ggnn 3
ggnn_index=()
if [ -f $ggnn/build/libGGNNBase.so ]; then
  cmake -S . -B build-device -DGRAFT_GGNN_DIR=$ggnn/src -DGRAFT_GGNN_BUILD=$ggnn/build >>"$OUT/build.log" 2>&1
  ggnn_index=(--index GGNN)
else
  stamp "GGNN did not build (see setup.log): graft-bench runs without it"
fi
# CAGRA (cuVS) where its libraries are carried (.deps/cagra: the cagra job's header).
cagra_index=()
if [ -f .deps/cagra/libgraft_cagra_peer.so ]; then
  cmake -S . -B build-device -DGRAFT_CAGRA_PEER_LIB=$PWD/.deps/cagra/libgraft_cagra_peer.so >>"$OUT/build.log" 2>&1
  cagra_index=(--index CAGRA)
fi
# LD_LIBRARY_PATH: the linker finds libGGNNBase.so's glog through it (-rpath-link's search), the run too.
export LD_LIBRARY_PATH=$ggnn_lib:$PWD/.deps/cagra${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
gb_build() { ninja -C build-device graft-bench >>"$OUT/build.log" 2>&1; }
with_faiss_gpu=1
if ! gb_build; then
  grep -E "error|FAILED|undefined|multiple definition" "$OUT/build.log" | head -20
  stamp "graft-bench did not build with the peers (build.log): again without FAISS GPU"
  with_faiss_gpu=0
  cmake -S . -B build-device -DGRAFT_FAISS_GPU_DIR= >>"$OUT/build.log" 2>&1
  if ! gb_build; then
    stamp "graft-bench did not build: again without GGNN"
    ggnn_index=()
    cmake -S . -B build-device -DGRAFT_GGNN_DIR= >>"$OUT/build.log" 2>&1
    gb_build || build_failed "$OUT/build.log"
  fi
fi
faiss_gpu_ready && [ $with_faiss_gpu = 1 ] || with_faiss_gpu=0
bg_wait dense-sift
gpu_name=$(device_name)
# One run per data set: records appended to one file, one chart each; ground truths cached
# outside $OUT.
gb() {  # NAME SECONDS ARGS...
  local name=$1 secs=$2; shift 2
  stamp "graft-bench on $name (${secs}s at most)"
  # GLOG_minloglevel=1: GGNN logs every query at INFO through glog.
  GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=1 GLOG_minloglevel=1 \
    timeout "$secs" ./build-device/bench/graft-bench --name "$name" --k 10 --batch 10000 --latency-queries 200 \
    --out "$OUT" --gt-cache /tmp/graft-bench-gt --plot --commit "$commit" \
    --deadline $(( secs - 30 )) "$@" 2>&1 | tee -a "$OUT/graft-bench.log"
}
left=$(seconds_left)
if [ ! -f $dense/query.u8bin ]; then
  stamp "graft-bench: no dense-SIFT set (see setup.log)"
elif [ "$left" -lt 90 ]; then
  stamp "graft-bench skipped: ${left}s left before GRAFT_DEADLINE"
else
  gpu_index=(--index IVF4096,Flat@gpu --index IVF4096,PQ32@gpu)
  [ $with_faiss_gpu = 1 ] ||
    { gpu_index=(); stamp "no FAISS GPU in graft-bench (setup.log, build.log): it runs without the @gpu indexes"; }
  gb dense-sift1m $(( left > 240 ? left - 90 : left )) --base $dense/base.u8bin --query $dense/query.u8bin \
    --index GraftGraph --index GraftFlat --index GraftGraph,PQ32 --index HNSW32 "${gpu_index[@]}" "${ggnn_index[@]}" \
    "${cagra_index[@]}"
fi
left=$(seconds_left)
if [ "$left" -ge 60 ]; then
  fm_gpu=(--index IVF1024,Flat@gpu)  # 60k vectors: 1024 lists (k-means wants 39 points a list)
  [ $with_faiss_gpu = 1 ] || fm_gpu=()
  gb fashion-mnist "$left" --base "$fm/train-images-idx3-ubyte.gz" --query "$fm/t10k-images-idx3-ubyte.gz" \
    --index GraftGraph --index HNSW32 "${fm_gpu[@]}" "${ggnn_index[@]}" "${cagra_index[@]}"
  rm -f "$OUT/recall-qps-fashion-mnist.png"
else
  stamp "graft-bench on fashion-mnist skipped: ${left}s left before GRAFT_DEADLINE"
fi
stamp "graft-bench done"
