#!/usr/bin/env bash
# mpi: issue 49's GPU run (docs/mpi.md, "Measuring"): graft across 2 MPI ranks with one GPU each
# ("MPI,GraftGraph,gpu=local") against one process holding both GPUs as shards
# ("GraftGraph,gpus=0-1") on one 2-GPU host, at batch 10,000 and each L of GRAFT_MPI_L, by
# bench/mpi_bench under mpirun -np 2: QPS (median of 5 calls over the 10k queries), recall@10
# against the exact k-NN, and on rank 0 the search's phases (local search, wait for the slowest
# rank, merge), each L with the merge unpipelined and pipelined (merge_chunks of GRAFT_MPI_CHUNKS:
# 1 = one chunk, 0 = the automatic rule, N = N chunks forced). Open MPI: the machine's, else
# Debian's unpacked from .deps/mpi (lib.sh mpi_env, before the build). Run the mpi tests too
# with `tests` and GRAFT_TESTS=mpi.
# Writes to $OUT: mpi-bench.log, mpi-bench.jsonl (bench "mpi").
# On one GPU (the kind lent when 2-GPU kinds are not), both ranks on it against "gpus=0,0".
# Time: not measured (a 2-GPU kind; nvidia-h200-x2).
# targets: mpi_bench
# needs: dense-sift
. "$(dirname "$0")/../lib.sh"
[ -x build-device/bench/mpi_bench ] || { stamp "mpi_bench was not built (no MPI found by CMake?)"; exit 1; }
bg_wait dense-sift
[ -f $dense/query.u8bin ] || { stamp "no dense-SIFT set (setup.log)"; exit 1; }
export GRAFT_RUN_ID=mpi-$(date -u +%Y%m%dT%H%M%SZ)
gpus=$(nvidia-smi -L | wc -l)
GRAFT_DEVICE="$(device_name) x$gpus"
export GRAFT_DEVICE
# On one GPU both ranks share it (they take turns on it, as two processes do without MPS), and
# the one process holds two shards on it: the run then measures MPI's messages and merge, not
# the scaling.
compare="GraftGraph,gpus=0-1"
[ "$gpus" -ge 2 ] || compare="GraftGraph,gpus=0,0"
stamp "mpi_bench, run $GRAFT_RUN_ID, against $compare"
# Two ranks on one host split its cores, and idle OpenMP threads sleep: one rank's spinning team
# would take the cores the other's MPI progress needs. (At 4b7a6bd, with 16 threads a rank on 16
# cores, the merge of a 10k batch took 0.95 ms; the same allreduce takes 0.15-0.25 ms between two
# processes on a quiet 2-core host.)
timeout "$(seconds_left)" mpirun -np 2 --allow-run-as-root --oversubscribe --bind-to none \
  -x OMP_NUM_THREADS=$(( $(nproc) / 2 )) -x OMP_WAIT_POLICY=passive \
  build-device/bench/mpi_bench $dense/base.u8bin $dense/query.u8bin \
  --index "MPI,GraftGraph,gpu=local" --compare "$compare" --batch 10000 \
  --L "${GRAFT_MPI_L:-32,48,64,96,128,192}" --chunks "${GRAFT_MPI_CHUNKS:-1,0,2,4}" --records "$OUT/mpi-bench.jsonl" 2>&1 | tee "$OUT/mpi-bench.log"
exit "${PIPESTATUS[0]}"
