#!/usr/bin/env bash
# study-search-quick: study-search on sift5k only (bench_search --quick).
# Writes to $OUT: search.jsonl, bench_search.log.
# Time: ~30 s on nvidia-h100; nvidia-h200 kinds not measured.
# targets: bench_search
exec bash "$(dirname "$0")/study-search.sh" quick
