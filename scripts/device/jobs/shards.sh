#!/usr/bin/env bash
# shards: issue 33's multi-GPU benchmark in one call (docs/multi-gpu.md, "Measuring"): graft-bench
# on the 1M dense-SIFT set grown by --scale (cell-permuted copies, each value jittered so that no
# two are equal; recall counts ties at the k-th distance), batch 10k, k = 10, one run id, in steps:
#   10      10M: GraftGraph on one GPU, sharded over the N GPUs ("gpus=0-(N-1)") and replicated on
#           them (",replicas"): build time (every device's graph, before the first search
#           returns) and QPS by recall;
#   faiss   FAISS's IVF16384,Flat on one GPU, sharded (@gpus=N) and replicated (@gpus=N,replicas)
#           at GRAFT_SHARDS_FAISS_SCALES millions (default "10"), once the FAISS GPU build is done
#           (graft-bench is relinked against it in the background while the GPUs run step 10 on a
#           copy of the graft-only binary);
#   scales  step 10 at GRAFT_SHARDS_SCALES (default "40" with 2 GPUs: 40M, the largest whose
#           one-GPU build is one GRNND piece; none with 4, whose large size is step big), before
#           step faiss when FAISS is not built yet;
#   big     with 4+ GPUs: an index larger than one GPU, GraftGraph sharded in memory against
#           GraftGraph,PQ32,ooc on one GPU, at the size (millions) whose FP32 graph index (768 B a
#           vector) needs 1.1x one device's memory (GRAFT_SHARDS_BIG=C overrides, 0 skips;
#           skipped when the host has under 1.6 KB a vector).
# GRAFT_SHARDS_STEPS picks the steps (default "10 faiss scales big"; e.g. "big" on a warm machine
# after a call that ran the others), GRAFT_SHARDS_INDEX the graft index, GRAFT_SHARDS_BATCHES the
# batch, GRAFT_SHARDS_FAISS=0 leaves FAISS out. Set GRAFT_DEADLINE (e.g. 550): a step starts only
# when it leaves the step its time. The FAISS GPU build is paused while graft is timed. Then
# scripts/shards_summary.py: ratios to one GPU (same L, and at equal recall), targets, memory.
# On one GPU: its rows and two shards / replicas on it (the ratios need nvidia-h200-x2 or larger).
# The old --bench-shards alone also tested test_gpu_shards: add the tests job with
# GRAFT_TESTS=test_gpu_shards GRAFT_BUILD_TARGETS="graft-bench test_gpu_shards".
# Writes to $OUT: shards.log, shards.jsonl (records), recall-qps-multi-gpu-*.svg.
# Time: the whole GRAFT_DEADLINE (550 s calls on nvidia-h100-x2 and -x4: bench/logs/shards-*.log;
# 10M ~40-60 s, 40M ~140 s a step); nvidia-h200 kinds not measured.
# targets: graft-bench
# needs: dense-sift faiss-gpu
. "$(dirname "$0")/../lib.sh"
# NCCL is not used (graft's devices share nothing; FAISS 1.7.3's multi-GPU indexes run one
# thread a GPU); NCCL_NVLS_ENABLE=0 all the same.
export NCCL_NVLS_ENABLE=0
bg_wait dense-sift
log=$OUT/shards.log
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")
gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -n1)
host_mib=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
stamp "sharded benchmark: $ngpu GPU(s) of ${gpu_mib:-?} MiB, ${host_mib} MiB host memory, $(nproc) cores: $(nvidia-smi --query-gpu=index,name --format=csv,noheader | tr '\n' ';')" | tee -a "$log"
last=$(( ngpu >= 4 ? 3 : ngpu >= 2 ? 1 : 0 )) N=$(( ngpu >= 4 ? 4 : ngpu >= 2 ? 2 : 1 ))
spread=$([ "$ngpu" -ge 2 ] && echo "gpus=0-$last" || echo "gpus=0,0")
[ "$ngpu" -ge 2 ] || stamp "one GPU: its rows and two shards / replicas on it (the ratios need 2 GPUs or more)"
gidx=${GRAFT_SHARDS_INDEX:-GraftGraph}
gpu_name=$(device_name)
rid=shards-$(date -u +%Y%m%dT%H%M%SZ)
# Records straight into $OUT (a call cut short by the tool keeps what it measured).
sdir="$OUT/shards"
rm -rf "$sdir" && mkdir -p "$sdir"
gbin=/tmp/graft-bench-graft
cp build-device/bench/graft-bench $gbin
ready=/tmp/graft-shards-faiss
rm -f $ready.ok $ready.failed
steps=" ${GRAFT_SHARDS_STEPS:-10 faiss scales big} "
[[ $steps == *" faiss "* ]] || GRAFT_SHARDS_FAISS=0
if [ "${GRAFT_SHARDS_FAISS:-1}" = 1 ] && started faiss115; then
  touch $ready.ok  # graft-bench already links FAISS 1.15 with its GPU part
elif [ "${GRAFT_SHARDS_FAISS:-1}" = 1 ]; then
  ( while bg_running faiss-gpu; do sleep 3; done
    device_cfg
    if [ -f $fgpu/faiss/libfaiss.a ] &&
       cmake -S . -B build-device "${cfg[@]}" -DGRAFT_FAISS_GPU_DIR=$fgpu -DGRAFT_FAISS_GPU_SRC=$fgpu-src >>"$OUT/build.log" 2>&1 &&
       nice -n 10 ninja -C build-device -j4 graft-bench >>"$OUT/build.log" 2>&1; then
      touch $ready.ok
    else
      touch $ready.failed
    fi ) >/dev/null 2>&1 &
else
  touch $ready.failed
fi
gbs() {  # WHAT SECONDS BINARY ARGS...: one graft-bench run into $sdir, logged
  local what=$1 secs=$2 bin=$3; shift 3
  stamp "$what (${secs}s at most)" | tee -a "$log"
  GRAFT_DEVICE_NAME="$gpu_name x$ngpu" OMP_NUM_THREADS=$(nproc) OPENBLAS_NUM_THREADS=1 \
    timeout "$secs" "$bin" --base $dense/base.u8bin --query $dense/query.u8bin --name dense-sift1m --k 10 \
    --batch "${GRAFT_SHARDS_BATCHES:-10000}" --latency-queries 0 --min-time 0.3 --out "$sdir" \
    --gt-cache /tmp/graft-bench-gt --commit "$commit" --run-id "$rid" \
    --deadline $(( secs - 30 )) "$@" 2>&1 | tee -a "$log"
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader >>"$log" 2>&1
}
graft_step() {  # C NEED_SECONDS: step 10 / scales at C million vectors
  local left; left=$(seconds_left)
  [ "$left" -ge "$2" ] || { stamp "--scale $1 (graft) skipped: ${left}s left, it needs ~$2" | tee -a "$log"; return; }
  gbs "graft at ${1}M: 1 GPU, $spread, $spread,replicas" $(( left - 20 )) $gbin --scale "$1" \
    --sweep L=24,32,48,64,96,128,192,256 --index "$gidx" --index "$gidx,$spread" --index "$gidx,$spread,replicas"
}
scales=${GRAFT_SHARDS_SCALES-$([ "$ngpu" -eq 2 ] && echo 40)}
scales_done=0
scale_steps() { for c in $scales; do graft_step "$c" $(( 60 + 5 * c )); done; scales_done=1; }
faiss_step() {
  if [ ! -f $ready.ok ] && [ ! -f $ready.failed ]; then
    stamp "waiting for FAISS GPU and graft-bench linked with it" | tee -a "$log"
    while [ ! -f $ready.ok ] && [ ! -f $ready.failed ] && [ "$(seconds_left)" -gt 100 ]; do sleep 3; done
  fi
  setup_log "faiss-gpu (background)" /tmp/graft-faiss-gpu.log 3 faiss-gpu
  [ -f $ready.ok ] || { stamp "no FAISS GPU peer: its build or graft-bench's link failed or is not done (setup.log, build.log)" | tee -a "$log"; return; }
  local f=(--index IVF16384,Flat@gpu) c left
  [ $N -ge 2 ] && f+=(--index "IVF16384,Flat@gpus=$N" --index "IVF16384,Flat@gpus=$N,replicas")
  for c in ${GRAFT_SHARDS_FAISS_SCALES:-10}; do
    left=$(seconds_left)
    [ "$left" -ge 100 ] || { stamp "FAISS at ${c}M skipped: ${left}s left" | tee -a "$log"; continue; }
    gbs "FAISS IVF16384,Flat at ${c}M: 1 GPU, @gpus=$N, @gpus=$N,replicas" $(( left - 20 )) ./build-device/bench/graft-bench \
      --scale "$c" --sweep nprobe=16,32,64,128,256 "${f[@]}"
  done
}
big_step() {
  local c=${GRAFT_SHARDS_BIG-$([ "$ngpu" -ge 4 ] && [ -n "$gpu_mib" ] && echo $(( (gpu_mib * 1048576 / 768 * 11 / 10 + 999999) / 1000000 )) || echo 0)}
  [ "$c" -gt 0 ] 2>/dev/null || return 0
  # ~2 s a million (GRNND in pieces and the host's merges for the out-of-core build dominate) and
  # ~1.6 KB a vector of host memory at its peak (the base, the out-of-core index while it builds).
  local left need_mib=$(( c * 1600 )) need_s=$(( 2 * c + 30 ))
  left=$(seconds_left)
  if [ $need_mib -gt "$host_mib" ]; then
    stamp "${c}M (larger than one GPU) skipped: ~${need_mib} MiB of host memory needed, ${host_mib} here" | tee -a "$log"
  elif [ "$left" -lt $need_s ]; then
    stamp "${c}M (larger than one GPU) skipped: ${left}s left, it needs ~${need_s}" | tee -a "$log"
  else
    gbs "${c}M, larger than one GPU: GraftGraph over gpus=0-$last in memory vs GraftGraph,PQ32,ooc on one GPU" \
      $(( left - 20 )) $gbin --scale "$c" --sweep L=32,48,64,96,128,192,256 \
      --index "GraftGraph,gpus=0-$last" --index "GraftGraph,PQ32,ooc"
  fi
}
# A compile on every core beside a timed search measures the compile.
timed() { bg_signal faiss-gpu STOP; "$@"; bg_signal faiss-gpu CONT; }
[[ $steps == *" 10 "* ]] && timed graft_step 10 90
[[ $steps == *" scales "* ]] || scales_done=1
[ -f $ready.ok ] || [ -f $ready.failed ] || [ $scales_done = 1 ] || timed scale_steps
[[ $steps == *" faiss "* ]] && faiss_step
[ $scales_done = 1 ] || timed scale_steps
[[ $steps == *" big "* ]] && timed big_step
mv "$sdir/graft-bench.jsonl" "$OUT/shards.jsonl" 2>/dev/null && rmdir "$sdir"
python3 scripts/shards_summary.py "$OUT/shards.jsonl" --run-id "$rid" --charts "$OUT" ${gpu_mib:+--gpu-mib "$gpu_mib"} \
  2>&1 | tee -a "$log"
stamp "sharded benchmark done"
