#!/usr/bin/env bash
# The GPU machine's run of issue 49 (docs/mpi.md, "Measuring"): graft across 2 MPI ranks with one
# GPU each against one process holding both GPUs as shards, on one 2-GPU host, at batch 10,000.
# From the repository root of a tree with .deps/ (scripts/fetch_deps.sh, which also fetches Open
# MPI's .debs into .deps/mpi), on nvidia-h200-x2 (or any 2-GPU kind):
#
#   GRAFT_COMMIT=<hash> GRAFT_DEADLINE=550 bash scripts/device_mpi.sh
#
# 1. MPI: the machine's mpirun when it has one, else Debian's Open MPI unpacked from .deps/mpi
#    (dpkg -x; Open MPI is relocated by OPAL_PREFIX).
# 2. graft built and its MPI tests run (scripts/device_run.sh with GRAFT_TESTS=mpi: test_mpi at 2
#    and 4 ranks, the fault test, Python, mpi_bench's smoke run), while the 1M dense-SIFT set is
#    made in the background.
# 3. mpi_bench under mpirun -np 2: "MPI,GraftGraph,gpu=local" (rank r on GPU r), then rank 0
#    alone with "GraftGraph,gpus=0-1" (one process, the same two GPUs, the same parts), at each
#    L of GRAFT_MPI_L; QPS (median of 5 calls over the 10k queries), recall@10 against the exact
#    k-NN, and on rank 0 the search's phases (local search, wait for the slowest rank, merge).
#    Into $OUT: mpi-bench.log, mpi-bench.jsonl (bench "mpi"); the target is MPI within 10% of the
#    one-process QPS at equal L.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-$root/device-out}
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

if ! command -v mpirun >/dev/null; then
  ls .deps/mpi/libopenmpi3_*.deb >/dev/null 2>&1 ||
    { echo "device_mpi: no mpirun here and no .deps/mpi/*.deb (scripts/fetch_deps.sh fetches them)"; exit 1; }
  mx=/tmp/graft-openmpi
  [ -x $mx/usr/bin/orterun ] || for f in .deps/mpi/*.deb; do dpkg -x "$f" $mx || exit 1; done
  mkdir -p $mx/bin
  for t in mpirun mpiexec mpicc mpicxx; do ln -sf $mx/usr/bin/$t.openmpi $mx/bin/$t; done
  # Open MPI and its PMIx find their components from these, not from the /usr they were built for
  # (tried on the build machine with the system's Open MPI hidden in a mount namespace).
  export OPAL_PREFIX=$mx/usr PATH=$mx/bin:$PATH PMIX_INSTALL_PREFIX=$mx/usr/lib/x86_64-linux-gnu/pmix2
  export PMIX_MCA_mca_base_component_path=$mx/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
  export LD_LIBRARY_PATH=$mx/usr/lib/x86_64-linux-gnu/openmpi/lib:$mx/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
stamp "MPI: $(command -v mpirun) ($(mpirun --version 2>/dev/null | head -n1))"

dense=/tmp/dense-sift1m
if [ ! -f $dense/query.u8bin ] && ! pgrep -f "make_dense_sift.py $dense" >/dev/null; then
  setsid nohup env PYTHONUNBUFFERED=1 python3 scripts/make_dense_sift.py $dense \
    --images .deps/data/mate-images --no-gt >/tmp/graft-dense-sift.log 2>&1 </dev/null &
  stamp "dense-SIFT 1M generation started in the background"
fi

GRAFT_TESTS=mpi OUT=$OUT bash scripts/device_run.sh | tee "$OUT/device-run.log"
[ -x build-device/bench/mpi_bench ] || { echo "device_mpi: mpi_bench was not built (no MPI found by CMake?)"; exit 1; }

while pgrep -f "make_dense_sift.py $dense" >/dev/null; do sleep 2; done
[ -f $dense/query.u8bin ] || { tail -5 /tmp/graft-dense-sift.log; exit 1; }
flags=(--allow-run-as-root --oversubscribe --bind-to none)
export GRAFT_RUN_ID=mpi-$(date -u +%Y%m%dT%H%M%SZ)
export GRAFT_DEVICE="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1) x$(nvidia-smi -L | wc -l)"
stamp "mpi_bench, run $GRAFT_RUN_ID"
timeout $(( ${GRAFT_DEADLINE:-100000} - ($(date +%s) - t0) )) \
  mpirun -np 2 "${flags[@]}" build-device/bench/mpi_bench $dense/base.u8bin $dense/query.u8bin \
  --index "MPI,GraftGraph,gpu=local" --compare "GraftGraph,gpus=0-1" --batch 10000 \
  --L "${GRAFT_MPI_L:-32,48,64,96,128,192}" --records "$OUT/mpi-bench.jsonl" 2>&1 | tee "$OUT/mpi-bench.log"
stamp "done: $OUT/mpi-bench.log, $OUT/mpi-bench.jsonl"
