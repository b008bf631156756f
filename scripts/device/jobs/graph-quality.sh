#!/usr/bin/env bash
# graph-quality: the graph build's convergence (issue 46). graft-bench of each GraftGraph build
# variant in GRAFT_GQ_INDEXES (factory strings, ';'-separated; default: the fixed rounds of waves
# 1-3, T1=3,T2=8, the converging defaults and the oracle graph, init=exact) on Fashion-MNIST, dense-SIFT 1M and
# KDE-patches 1M at batch 10k, with --graph-recall 2000 (graph rows against sampled vertices'
# exact neighbours) and GRNND's new entries a round (GRAFT_GRNND_ROUNDS=1, in the log only).
# Builds from codes (issue 48) are variants like any other:
#   GRAFT_GQ_INDEXES='GraftGraph;GraftGraph,FP16,build_from=codes;GraftGraph,SQ8;GraftGraph,SQ8,build_from=codes'
# (graph recall of each beside the FP32 build's; the SQ8 pair also shows the search at equal storage).
# GRAFT_GQ_SETS picks the sets (default "fashion-mnist dense-sift1m kde-patches1m"; also
# photo-sift10m and its 1M subset photo-sift1m, made by the photo-sift job, and photo-sift40m and
# its subsets photo-sift40m-10m, photo-sift40m-1m, by the photo-sift40m job), in the order given.
# A set named NAME-xC is the d = 128 set NAME grown to C synthetic copies (graft-bench --scale:
# build time and L against n, or an index past the real sets, e.g. photo-sift10m-x9 = 90M).
# GRAFT_GQ_BATCH: graft-bench's --batch (default 10000; "100,1000" for the small-batch walk);
# GRAFT_GQ_LATENCY=N: batch-1 latency over N queries too (default 0: none).
# Writes to $OUT: graph-quality.log, graph-quality.jsonl (records).
# Time: 11-19 s a 1M set for four variants after the build on nvidia-h200; 40M: 211 s for two;
# dense-sift1m-x10 ~85 s more (bench/logs/graph-quality-0e8bb22-h200.log).
# targets: graft-bench
# needs: dense-sift kde-patches photo-sift photo-sift40m
. "$(dirname "$0")/../lib.sh"
log=$OUT/graph-quality.log
IFS=';' read -r -a indexes <<<"${GRAFT_GQ_INDEXES:-GraftGraph,T1=3,T2=8,delta=0;GraftGraph;GraftGraph,init=exact}"
index_args=()
for i in "${indexes[@]}"; do index_args+=(--index "$i"); done
gq() {  # NAME BASE QUERY [graft-bench options]: NAME-xC-synthetic with the set's scale
  local name=$1${scale[1]:+-x${scale[1]}-synthetic} base=$2 query=$3 secs
  shift 3
  secs=$(seconds_left)
  [ "$secs" -gt 60 ] || { stamp "$name skipped: ${secs}s left" | tee -a "$log"; return; }
  stamp "graph-quality on $name (${secs}s at most)" | tee -a "$log"
  GRAFT_GRNND_ROUNDS=1 GRAFT_DEVICE_NAME="$(device_name)" timeout "$secs" ./build-device/bench/graft-bench \
    --name "$name" --base "$base" --query "$query" --k 10 --batch "${GRAFT_GQ_BATCH:-10000}" --latency-queries "${GRAFT_GQ_LATENCY:-0}" --min-time 0.2 \
    --graph-recall 2000 --out /tmp/graph-quality --gt-cache /tmp/graft-bench-gt --commit "$commit" \
    --deadline $(( secs - 20 )) "${index_args[@]}" "${scale[@]}" "$@" 2>&1 | tr '\r' '\n' | grep -v '^ *$' >>"$log"
  grep -E "built in|GRNND, [0-9]+ rounds|CAGRA.s graph|^GraftGraph.*~" "$log" | tail -n $(( 3 * ${#indexes[@]} ))
}
for s in $gq_sets; do
  scale=() && [[ $s == *-x[0-9]* ]] && scale=(--scale "${s##*-x}") && s=${s%-x*}
  case $s in
    fashion-mnist) gq $s "$fm/train-images-idx3-ubyte.gz" "$fm/t10k-images-idx3-ubyte.gz" ;;
    dense-sift1m) bg_wait dense-sift && [ -f $dense/query.u8bin ] && gq $s $dense/base.u8bin $dense/query.u8bin ;;
    kde-patches1m) bg_wait kde-patches && [ -f $patches/query.u8bin ] && gq $s $patches/base.u8bin $patches/query.u8bin ;;
    photo-sift1m|photo-sift10m) bg_wait photo-sift && gq $s .data/$s/base.u8bin .data/$s/query.u8bin ;;
    photo-sift40m*)  # the 40M set is read as soon as it is written, while its subsets are made
      while bg_running photo-sift40m && [ ! -f .data/$s/recipe.json ] && [ "$(seconds_left)" -gt 60 ]; do sleep 2; done
      [ -f .data/$s/recipe.json ] && gq $s .data/$s/base.u8bin .data/$s/query.u8bin ;;
    *) stamp "graph-quality: no set $s" ;;
  esac
done
cp /tmp/graph-quality/graft-bench.jsonl "$OUT/graph-quality.jsonl" 2>/dev/null
exit 0
