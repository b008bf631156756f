#!/usr/bin/env bash
# walk-ab: the graph walk against another commit's, in one call (issue 36; instance-to-instance
# noise is ~7%, bench/RESULTS.md). GRAFT_AB=DIR is that commit's tree (`git archive HASH`,
# bench/logs and bench/results left out, examples/search_loop.c added), GRAFT_AB_COMMIT=HASH its
# name; it is built beside this one against Debian's FAISS 1.7.3 whatever this call uses (an older
# commit may not build against 1.15; the walk does not depend on FAISS). GRAFT_AB_VARIANT="FLAGS"
# adds this tree built with those CUDA flags (e.g. -DGRAFT_WALK_MIN_BLOCKS=5) as a third walk.
# On the 1M dense-SIFT set, Fashion-MNIST and the 1M KDE-patches set, old then new: graft-bench of
# GraftGraph at batch 10k and batch 1; examples/search_loop (a user's faiss_c loop) of both trees,
# OMP_NUM_THREADS unset and 1; this tree's team sizes (GRAFT_AB_LANES, default "4 8 16 32");
# Nsight Compute's instruction count of both walks at dense-SIFT L = 48, and this walk's
# instructions and stall samples by SASS line.
# Writes to $OUT: walk-ab.log, walk-ab.jsonl (both trees' records), walk-sass.csv.gz.
# Time: ~5 min after the build on nvidia-h100 (bench/logs/walk-ab-*-h100.log); nvidia-h200
# kinds not measured.
# targets: graft-bench search_loop
# needs: dense-sift kde-patches
# requires: GRAFT_AB
. "$(dirname "$0")/../lib.sh"
device_cfg 1.7.3
cmake -S "$GRAFT_AB" -B build-ab "${cfg[@]}" >>"$OUT/build.log" 2>&1 &&
  ninja -C build-ab graft-bench search_loop >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
stamp "built ${GRAFT_AB_COMMIT:-the other tree} beside this one"
trees="build-ab build-device"
if [ -n "${GRAFT_AB_VARIANT:-}" ]; then
  device_cfg
  cmake -S . -B build-variant "${cfg[@]}" -DCMAKE_CUDA_FLAGS="$GRAFT_AB_VARIANT" >>"$OUT/build.log" 2>&1 &&
    ninja -C build-variant graft-bench search_loop >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  trees="$trees build-variant"
fi
bg_wait dense-sift
bg_wait kde-patches
log=$OUT/walk-ab.log
# The same L values in both trees: --refine 0 where the tree's graft-bench has the adaptive sweep.
fixed_sweep() { ./"$1"/bench/graft-bench --help | grep -q -- --refine && echo "--refine 0"; }
for set in "dense-sift1m 48 16,24,32,40,48,56,64,96,128 $dense/base.u8bin $dense/query.u8bin" \
           "fashion-mnist 16 8,12,16,20,24,32,48 $fm/train-images-idx3-ubyte.gz $fm/t10k-images-idx3-ubyte.gz" \
           "kde-patches1m 48 16,24,32,48,64,96,128,192 $patches/base.u8bin $patches/query.u8bin"; do
  read -r name L sweep base query <<<"$set"
  for tree in $trees; do
    case $tree in
      build-ab) which=${GRAFT_AB_COMMIT:-other} ;;
      build-variant) which="${GRAFT_COMMIT:-this} $GRAFT_AB_VARIANT" ;;
      *) which=${GRAFT_COMMIT:-this} ;;
    esac
    stamp "$name: graft-bench of $which" | tee -a "$log"
    # shellcheck disable=SC2046  # fixed_sweep's words are options
    ./"$tree"/bench/graft-bench --name "$name" --k 10 --batch 10000 --latency-queries 200 \
      --out "/tmp/walk-ab-$tree" --gt-cache /tmp/graft-bench-gt --commit "$which" \
      --sweep "L=$sweep" $(fixed_sweep "$tree") --index GraftGraph --base "$base" --query "$query" 2>&1 |
      grep -E "^graft|^GraftGraph|built in" | tee -a "$log"
    for omp in unset 1; do
      ( [ $omp = 1 ] && export OMP_NUM_THREADS=1; ./"$tree"/examples/search_loop "$base" "$query" GraftGraph "$L" 10 6 ) \
        2>&1 | grep -E "median|^search_loop" | sed "s/^/$which: /" | tee -a "$log"
    done
  done
  for g in ${GRAFT_AB_LANES:-4 8 16 32}; do
    GRAFT_SEARCH_LANES=$g ./build-device/bench/graft-bench --name "$name-lanes$g" --k 10 --batch 10000 \
      --latency-queries 0 --out /tmp/walk-ab-lanes --gt-cache /tmp/graft-bench-gt \
      --sweep "L=$L" --refine 0 --index GraftGraph --base "$base" --query "$query" 2>&1 |
      grep -E "^graft" | sed "s/^/lanes $g: /" | tee -a "$log"
  done
done
cat /tmp/walk-ab-build-ab/graft-bench.jsonl /tmp/walk-ab-build-device/graft-bench.jsonl >"$OUT/walk-ab.jsonl" 2>/dev/null
# Warp instructions a query (ncu's inst_executed over the chunk's 2.5k queries), both walks.
ncu=$(ncu_bin)
dense_args=(--name dense-sift1m --k 10 --batch 10000 --latency-queries 0 --out /tmp/walk-ab-ncu
            --gt-cache /tmp/graft-bench-gt --min-time 0 --sweep "L=48" --index GraftGraph
            --base "$dense/base.u8bin" --query "$dense/query.u8bin")
for tree in $trees; do
  # shellcheck disable=SC2046
  "$ncu" --clock-control none -k regex:graph_search_kernel --launch-skip 4 --launch-count 1 \
    --metrics smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
    ./"$tree"/bench/graft-bench "${dense_args[@]}" $(fixed_sweep "$tree") 2>&1 |
    grep -E "smsp__inst|gpu__time|registers|warps_active|dram__" | sed "s/^/ncu $tree: /" | tee -a "$log"
done
# This walk's instructions and stall samples by SASS line (ncu's source page), for the notes.
"$ncu" --clock-control none -k regex:graph_search_kernel --launch-skip 4 --launch-count 1 \
  --section SourceCounters --section WarpStateStats -o /tmp/walk-ab-src -f \
  ./build-device/bench/graft-bench "${dense_args[@]}" >/dev/null 2>&1
"$ncu" -i /tmp/walk-ab-src.ncu-rep --page source --csv --print-source sass 2>&1 | gzip >"$OUT/walk-sass.csv.gz"
"$ncu" -i /tmp/walk-ab-src.ncu-rep --page details --section WarpStateStats 2>&1 | grep -E "Stall|Warp Cycles" >>"$log"
stamp "walk A/B done"
