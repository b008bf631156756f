#!/usr/bin/env bash
# The GPU search call's chunk rule, old against new in one call (bench/RESULTS.md, "The pipeline's
# chunks"), on a GPU machine after scripts/device_run.sh has built build-device/:
#   bash scripts/device_pipe_ab.sh LOG NAME:L:SWEEP:BASE:QUERY ...
# For each set: graft-bench of GraftGraph at batches 2,500 to 40,000 with the earlier rule
# (GRAFT_SEARCH_PIPE_GROW=1: an eighth of the call, then doubling) and with the default (equal
# chunks, one a wave), twice in turn (host noise), then examples/search_loop (a user's faiss_c
# loop: malloc'd buffers, six calls) at L with OMP_NUM_THREADS unset and 1. Lines go to LOG.
set -uo pipefail
log=$1
shift
gb=./build-device/bench/graft-bench
for set in "$@"; do
  IFS=: read -r name L sweep base query <<<"$set"
  for pass in 1 2; do
    for rule in grow equal; do
      ( [ $rule = grow ] && export GRAFT_SEARCH_PIPE_GROW=1
        $gb --base "$base" --query "$query" --name "$name" --k 10 --index GraftGraph \
          --sweep "L=$sweep" --refine 0 --batch 2500,5000,10000,40000 --min-time 0.3 \
          --latency-queries 0 --out /tmp/pipe-ab --gt-cache /tmp/graft-bench-gt \
          --commit "${GRAFT_COMMIT:-unknown}" ) 2>&1 | grep -E "^graft " | sed "s/^/$name $rule pass $pass: /" | tee -a "$log"
    done
  done
  for omp in unset 1; do
    ( [ $omp = 1 ] && export OMP_NUM_THREADS=1
      ./build-device/examples/search_loop "$base" "$query" GraftGraph "$L" 10 6 ) 2>&1 |
      grep -E "median|^search_loop" | sed "s/^/$name OMP $omp: /" | tee -a "$log"
  done
done
cp /tmp/pipe-ab/graft-bench.jsonl "$(dirname "$log")/pipe-ab.jsonl" 2>/dev/null
