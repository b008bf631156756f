#!/usr/bin/env bash
# study-pieces: study-build with GRNND in pieces (bench_build --pieces 1), against the whole GRNND
# and the CPU builds.
# Writes to $OUT: build.jsonl, bench_build.log.
# Time: ~2 min on nvidia-h100 (bench/logs/pieces-7555d1a-h100.log: 163 s with the tests);
# nvidia-h200 kinds not measured.
# targets: bench_build
# needs: dense-sift
exec bash "$(dirname "$0")/study-build.sh" pieces
