#!/usr/bin/env bash
# search-ncu: Nsight Compute (--clock-control none: the clocks as they run) on one walk kernel
# per index, the fifth launch: a pass of 10k queries is a pipeline of three or four chunks and the
# beam is swept twice, so that there are five. Indexes GraftGraph, GraftGraph,FP16,
# GraftGraph,SQ8 (GRAFT_NCU_INDEXES), each set at its recall-0.95 beam (15a7b3e's walk), at batch
# 10,000 (GRAFT_NCU_BATCH: under a wave the walk's multi mode runs, so "GraftGraph" against
# "GraftGraph,search_mode=single" at batch 100 is the modes' before and after):
# dense-SIFT at L = 40, Fashion-MNIST at L = 16 and, with .deps/data/kde-images carried,
# KDE-patches at L = 160. Throughput, occupancy, stall reasons, instruction mix
# (GRAFT_NCU_SECTIONS replaces the sections, e.g. "WarpStateStats SourceCounters": stall reasons
# and the source lines they fall on). GRAFT_OCCUPANCY_BLOCKS="2 3 4 0": then graft-bench of the
# same indexes with at most B blocks (4 warps each) a multiprocessor (0: no limit).
# Writes to $OUT: search-ncu.log.
# Time: about a minute after the build on nvidia-h100 (not clocked in bench/logs/ncu-*-h100.log;
# six such kernels took 25 s in walk-ab-15a7b3e-h100.log); nvidia-h200 kinds not measured.
# targets: graft-bench
# needs: dense-sift kde-patches
. "$(dirname "$0")/../lib.sh"
ncu=$(ncu_bin)
sections=()
all="SpeedOfLight LaunchStats Occupancy WarpStateStats SchedulerStats ComputeWorkloadAnalysis
     MemoryWorkloadAnalysis InstructionStats"
for sec in ${GRAFT_NCU_SECTIONS:-$all}; do
  sections+=(--section "$sec")
done
read -ra indexes <<<"${GRAFT_NCU_INDEXES:-GraftGraph GraftGraph,FP16 GraftGraph,SQ8}"
idx=(); for index in "${indexes[@]}"; do idx+=(--index "$index"); done
bg_wait dense-sift
sets=("dense-sift1m 40 --base $dense/base.u8bin --query $dense/query.u8bin"
      "fashion-mnist 16 --base $fm/train-images-idx3-ubyte.gz --query $fm/t10k-images-idx3-ubyte.gz")
bg_wait kde-patches
[ -f $patches/query.u8bin ] && sets+=("kde-patches1m 160 --base $patches/base.u8bin --query $patches/query.u8bin")
for set in "${sets[@]}"; do
  read -r name L args <<<"$set"
  read -ra args <<<"$args"
  for index in "${indexes[@]}"; do
    [ "$(seconds_left)" -ge 40 ] || { stamp "ncu $name $index: skipped"; continue; }
    stamp "ncu: $name $index L=$L"
    OMP_NUM_THREADS=16 timeout $(( $(seconds_left) - 10 )) "$ncu" --clock-control none \
      -k regex:graph_search_kernel --launch-skip 4 --launch-count 1 "${sections[@]}" --print-details all \
      ./build-device/bench/graft-bench --name "$name" --k 10 --batch "${GRAFT_NCU_BATCH:-10000}" \
      --latency-queries 0 --out /tmp/graft-ncu --gt-cache /tmp/graft-bench-gt --min-time 0 \
      --sweep "L=$L,$L" --refine 0 --index "$index" "${args[@]}" >>"$OUT/search-ncu.log" 2>&1
  done
  # How QPS follows the resident warps (GRAFT_SEARCH_BLOCKS_PER_SM).
  for b in ${GRAFT_OCCUPANCY_BLOCKS:-}; do
    [ "$(seconds_left)" -ge 40 ] || { stamp "occupancy $name B=$b: skipped"; continue; }
    stamp "occupancy: $name, at most $b blocks a multiprocessor"
    GRAFT_SEARCH_BLOCKS_PER_SM=$b OMP_NUM_THREADS=16 timeout $(( $(seconds_left) - 10 )) \
      ./build-device/bench/graft-bench --name "$name-blocks$b" --k 10 --batch 10000 --latency-queries 0 \
      --out /tmp/graft-occupancy --gt-cache /tmp/graft-bench-gt --sweep "L=$L" --refine 0 "${idx[@]}" "${args[@]}" \
      2>&1 | grep -E "^graft " | sed "s/^/blocks $b: /" | tee -a "$OUT/search-ncu.log"
  done
done
stamp "Nsight Compute done"
