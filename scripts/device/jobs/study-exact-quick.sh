#!/usr/bin/env bash
# study-exact-quick: study-exact on its small sets only (bench_exact --quick; no dense-SIFT, no
# smooth-SIFT).
# Writes to $OUT: exact.jsonl, bench_exact.log, torch_exact.log.
# Time: not measured.
# targets: bench_exact
exec bash "$(dirname "$0")/study-exact.sh" quick
