#!/usr/bin/env bash
# study-exact-focus: study-exact at its targets only (bench_exact --focus), with FAISS GPU built
# beside it (--no-faiss-gpu: without; no ~5 min build): k = 10 and 1024 on the 1M dense-SIFT set,
# random-uniform and random-uint8 1M x 128, random-uniform 1M x 960, every GraftFlat path with its
# floor, FAISS GpuIndexFlatL2 and torch in the same run; also k = 10 on dup-sift1m and
# smooth-sift1m (many equal or near-duplicate vectors).
# Writes to $OUT: exact.jsonl, bench_exact.log, torch_exact.log.
# Time: ~4 min after waiting for FAISS GPU on nvidia-h100 (bench/logs/exact-6c3c16a-h100.log);
# nvidia-h200 kinds not measured.
# targets: bench_exact
# needs: dense-sift smooth-sift faiss-gpu
exec bash "$(dirname "$0")/study-exact.sh" focus
