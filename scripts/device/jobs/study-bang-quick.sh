#!/usr/bin/env bash
# study-bang-quick: study-bang on sift5k only (bench_bang --quick; GRAFT_BANG_SCALE grows sift5k).
# Writes to $OUT: bang.jsonl, bench_bang.log.
# Time: not measured.
# targets: bench_bang
exec bash "$(dirname "$0")/study-bang.sh" quick
