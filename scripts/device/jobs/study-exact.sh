#!/usr/bin/env bash
# study-exact: bench/studies/bench_exact, the exact k-NN study, and its torch peer
# (bench/studies/torch_exact.py): every GraftFlat path (FP32, certified TF32 / FP16, fused FP16,
# INT8 on integer data) against FAISS CPU (and FAISS GpuIndexFlatL2 with faiss-gpu in the call),
# torch, and the GEMM and distance-matrix floors, at k from 1 to 4096 and d = 128 / 960, on the
# random sets, the 1M dense-SIFT set, dup-sift1m (grown from it) and the smooth-SIFT set
# (duplicates kept). "quick" (study-exact-quick): the small sets only; "focus"
# (study-exact-focus): the targets only. GRAFT_EXACT_SETS (e.g. dense-sift1m,dup-sift1m) keeps
# those sets, GRAFT_EXACT_PATHS those paths (bench_exact.cpp's header); GRAFT_EXACT_PROFILE=1
# prints the FP16 paths' stage clocks.
# Writes to $OUT: exact.jsonl (records), bench_exact.log, torch_exact.log.
# Time: ~5 min after the build and tests on nvidia-h100 (bench/logs/exact-1715bba-h100.log: 309 s;
# exact-6c3c16a-h100.log: 235 s with FAISS GPU); nvidia-h200 kinds not measured.
# targets: bench_exact
# needs: dense-sift smooth-sift
. "$(dirname "$0")/../lib.sh"
mode=${1:-}
link_faiss_gpu
ninja_build bench_exact
stamp "benchmark"
args=(--out "$OUT/exact.jsonl" --commit "$commit" --run-id "exact-$(date -u +%Y%m%dT%H%M%SZ)")
torch_args=()
[ "$mode" = quick ] && args+=(--quick) && torch_args+=(--quick)
[ "$mode" = focus ] && args+=(--focus) && torch_args+=(--focus)
if [ "$mode" != quick ]; then
  bg_wait dense-sift
  [ -f $dense/query.u8bin ] && args+=(--dense-sift "$dense")
  bg_wait smooth-sift
  [ -f $smooth/query.u8bin ] && args+=(--smooth-sift "$smooth")
fi
OMP_NUM_THREADS=$(nproc) timeout "$(seconds_left)" ./build-device/bench/studies/bench_exact "${args[@]}" 2>&1 |
  tee "$OUT/bench_exact.log"
rid=$(head -n1 "$OUT/exact.jsonl" | sed 's/.*"run_id":"\([^"]*\)".*/\1/')
PYTHONUNBUFFERED=1 python3 bench/studies/torch_exact.py --out "$OUT/exact.jsonl" --run-id "$rid" \
  --commit "$commit" "${torch_args[@]}" 2>&1 | tee "$OUT/torch_exact.log"
stamp "done"
