#!/usr/bin/env bash
# study-bang: bench/studies/bench_bang, the graph + PQ study (BANG): in-memory against
# out-of-core, the stage breakdown, the largest-data projection, FAISS GPU IVF-PQ (with faiss-gpu
# in the call) and the CPU reference, on sift5k, Fashion-MNIST and the 1M dense-SIFT set ("quick":
# study-bang-quick, sift5k only). Stops at GRAFT_DEADLINE. Its settings:
#   GRAFT_BANG_REPLICATE=R (R > 1)  dense-sift1m alone, grown to R x 1M vectors by jittered copies
#   GRAFT_BANG_SCALE=C              bench_bang --scale C: C cell-permuted copies ingested in blocks,
#                                   built once, in-memory tried and out-of-core swept
#   GRAFT_BANG_ONLY=NAME            that data set alone
#   GRAFT_BANG_REPEAT=N             the benchmark N times in a row (the host's run-to-run noise)
#   GRAFT_BANG_AB=DIR, GRAFT_BANG_AB_COMMIT=HASH
#                                   also the bench_bang of the tree DIR (e.g. `git archive HASH |
#                                   tar -x -C .deps/ab`), built beside this one; DIR's then this
#                                   tree's, twice while GRAFT_DEADLINE allows: host timings differ
#                                   between instances of the GPU machine, so a change is judged
#                                   within one call
# Writes to $OUT: bang.jsonl (records), bench_bang.log.
# Time: ~40-60 s on nvidia-h100 (bench/logs/bang-*-h100.log); nvidia-h200 kinds not measured.
# targets: bench_bang
# needs: dense-sift
. "$(dirname "$0")/../lib.sh"
quick=${1:-}
link_faiss_gpu
ninja_build bench_bang
[ "$quick" = quick ] || bg_wait dense-sift
left=$(seconds_left)
[ "$left" -ge 60 ] || { stamp "graph + PQ benchmark skipped: ${left}s left before GRAFT_DEADLINE"; exit 0; }
# The runs: this tree's, or with GRAFT_BANG_AB the other tree's and this one's, twice.
runs=("./build-device/bench/studies/bench_bang $commit")
for ((i = 1; i < ${GRAFT_BANG_REPEAT:-1}; i++)); do runs+=("${runs[0]}"); done
if [ -n "${GRAFT_BANG_AB:-}" ]; then
  device_cfg
  cmake -S "$GRAFT_BANG_AB" -B build-ab "${cfg[@]}" >>"$OUT/build.log" 2>&1 &&
    ninja -C build-ab bench_bang >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  # The other tree may predate bench/studies/.
  ab_exe=./build-ab/bench/studies/bench_bang
  [ -x $ab_exe ] || ab_exe=./build-ab/bench/bench_bang
  ab="$ab_exe ${GRAFT_BANG_AB_COMMIT:-other}"
  runs=("$ab" "${runs[0]}" "$ab" "${runs[0]}")
fi
args=()
if [ "$quick" = quick ]; then args+=(--quick); elif [ -f $dense/query.u8bin ]; then args+=(--dense-sift "$dense"); fi
[ "${GRAFT_BANG_REPLICATE:-1}" -gt 1 ] && args+=(--replicate "$GRAFT_BANG_REPLICATE" --only dense-sift1m)
[ -n "${GRAFT_BANG_ONLY:-}" ] && args+=(--only "$GRAFT_BANG_ONLY")
if [ "${GRAFT_BANG_SCALE:-0}" -gt 0 ]; then
  args+=(--scale "$GRAFT_BANG_SCALE")
  [ "$quick" = quick ] || args+=(--only dense-sift1m)
fi
for run in "${runs[@]}"; do
  read -r exe which <<<"$run"
  left=$(seconds_left)
  [ "$left" -ge 60 ] || { stamp "graph + PQ benchmark of $which skipped: ${left}s left"; continue; }
  stamp "graph + PQ benchmark ($which)"
  # OPENBLAS_NUM_THREADS=1: FAISS's k-means of the PQ sub-spaces (tiny GEMMs) is 6x slower with
  # OpenBLAS's own threads spinning against OpenMP's (tests/CMakeLists.txt); the only other BLAS
  # user, the ground truth's FAISS check on ~200 queries, takes a second or two single-threaded.
  GRAFT_DEVICE_NAME="$(device_name)" OMP_NUM_THREADS=$(nproc) OPENBLAS_NUM_THREADS=1 \
    timeout "$left" "$exe" --out "$OUT/bang.jsonl" --commit "$which" \
    --deadline $(( left - 30 )) --data "$root/.deps/data" --fmnist "$fm" "${args[@]}" \
    2>&1 | tee -a "$OUT/bench_bang.log"
done
stamp "graph + PQ benchmark done"
