#!/usr/bin/env bash
# cagra: CAGRA (NVIDIA cuVS) beside graft in one graft-bench run per set (issue 51): GraftGraph,
# CAGRA (cuVS's auto search, then single-CTA and multi-CTA forced on the same graph), FAISS's GPU
# IVF-Flat where a FAISS GPU build is there (the faiss115 job; else FAISS's HNSW32 on 16 CPU
# threads), on dense-SIFT 1M, Fashion-MNIST and KDE-patches 1M,
# at batch 10,000 and 100 (GRAFT_CAGRA_BATCHES) and batch-1 latency over 200 queries; then one
# graph, two walks: CAGRA's search on graft's graph ("CAGRA,graph=graft") and graft's on CAGRA's
# ("GraftGraph,graph=cagra"). GRAFT_CAGRA_INDEXES replaces the lists; GRAFT_CAGRA_ARGS adds
# graft-bench options (e.g. "--sweep L=8,10,12,16,24,32,64,128,256": batch 1 is timed at the
# sweep's values only, not at the refined ones). --graph-recall 2000 puts
# each graph's quality beside it. CAGRA comes as four libraries carried in .deps/cagra (libcuvs.so, librmm.so,
# librapids_logger.so, libgraft_cagra_peer.so), built off the GPU machine by
# scripts/device/build_cuvs.sh (64 MiB a carry: see docs/developing.md), or here by the cuvs job.
# Writes to $OUT: cagra.log, cagra.jsonl (records).
# Time: 270 s after a 139 s build on nvidia-h200, HNSW32 as FAISS's index
# (bench/logs/cagra-6f3ee36-h200.log).
# targets: graft-bench
# needs: dense-sift kde-patches cuvs
. "$(dirname "$0")/../lib.sh"
log=$OUT/cagra.log
lib=$PWD/.deps/cagra
started cuvs && bg_wait cuvs 5  # built here when not carried (the cuvs job)
[ -f $lib/libgraft_cagra_peer.so ] || { stamp "no .deps/cagra/libgraft_cagra_peer.so carried"; exit 1; }
export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# A prebuilt graft-bench (GRAFT_PREBUILT) packed from a build with the CAGRA peer is used as it is.
if [ -z "${GRAFT_PREBUILT:-}" ] || ! ldd build-device/bench/graft-bench | grep -q libgraft_cagra_peer; then
  cmake -S . -B build-device -DGRAFT_CAGRA_PEER_LIB=$lib/libgraft_cagra_peer.so >>"$OUT/build.log" 2>&1
  ninja -C build-device graft-bench >>"$OUT/build.log" 2>&1 || build_failed "$OUT/build.log"
fi
# FAISS: its GPU IVF-Flat where a FAISS GPU build is there, else HNSW32 on the CPU (16 threads).
faiss=(--index HNSW32) fm_faiss=(--index HNSW32)
faiss_gpu_ready && faiss=(--index "IVF4096,Flat@gpu") fm_faiss=(--index "IVF1024,Flat@gpu")
gpu_name=$(device_name)
# GRAFT_CAGRA_INDEXES (';'-separated) replaces every set's list, FAISS's and the two walks included.
cross=(--index CAGRA,graph=graft --index GraftGraph,graph=cagra)
indexes=(--index GraftGraph --index CAGRA --index CAGRA,algo=single --index CAGRA,algo=multi)
if [ -n "${GRAFT_CAGRA_INDEXES:-}" ]; then
  IFS=';' read -r -a list <<<"$GRAFT_CAGRA_INDEXES"
  indexes=() faiss=() fm_faiss=() cross=()
  for i in "${list[@]}"; do indexes+=(--index "$i"); done
fi
cb() {  # NAME SHARE BASE QUERY [ARGS...]: SHARE percent of the seconds left
  local name=$1 secs=$(( $(seconds_left) * $2 / 100 )) base=$3 query=$4
  shift 4
  [ "$secs" -gt 60 ] || { stamp "$name skipped: ${secs}s" | tee -a "$log"; return; }
  stamp "cagra on $name (${secs}s at most)" | tee -a "$log"
  GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=16 timeout "$secs" ./build-device/bench/graft-bench \
    --name "$name" --base "$base" --query "$query" --k 10 --batch "${GRAFT_CAGRA_BATCHES:-10000,100}" \
    --latency-queries 200 --min-time 0.2 --graph-recall 2000 --out /tmp/cagra-bench \
    --gt-cache /tmp/graft-bench-gt --commit "$commit" --deadline $(( secs - 20 )) \
    ${GRAFT_CAGRA_ARGS:-} "${indexes[@]}" "$@" 2>&1 |
    tr '\r' '\n' | grep -v '^ *$' >>"$log"
  grep -E "built in|graph rows hold|~" "$log" | tail -n 24
}
mkdir -p /tmp/cagra-bench && rm -f /tmp/cagra-bench/graft-bench.jsonl
bg_wait dense-sift
[ -f $dense/query.u8bin ] && cb dense-sift1m 45 $dense/base.u8bin $dense/query.u8bin "${faiss[@]}" "${cross[@]}"
[ -f "$fm/t10k-images-idx3-ubyte.gz" ] &&
  cb fashion-mnist 45 "$fm/train-images-idx3-ubyte.gz" "$fm/t10k-images-idx3-ubyte.gz" "${fm_faiss[@]}" "${cross[@]}"
bg_wait kde-patches
[ -f $patches/query.u8bin ] && cb kde-patches1m 95 $patches/base.u8bin $patches/query.u8bin "${faiss[@]}" "${cross[@]}"
cp /tmp/cagra-bench/graft-bench.jsonl "$OUT/cagra.jsonl" 2>/dev/null
stamp "cagra done"
