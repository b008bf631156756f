#!/usr/bin/env bash
# filter-bench-quick: filter-bench on sift5k (90 s at most) and Fashion-MNIST.
# Writes to $OUT: filter-bench.jsonl, filter-bench.log.
# Time: not measured.
# targets: graft-bench
exec bash "$(dirname "$0")/filter-bench.sh" quick
