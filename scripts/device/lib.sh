# shellcheck shell=bash disable=SC2034,SC2120
# (SC2034: the paths below are the jobs'; SC2120: device_cfg's argument is optional.)
# Shared helpers of the GPU machine's driver (scripts/device/run.sh) and its jobs (jobs/*.sh).
# Sourced, never run. It moves to the repository root. The driver sets, for every job:
#   OUT          where the outputs go (default device-out/); the device tool returns at most 8
#                files, so each job keeps to one or two logs and its records there
#   GRAFT_T0     the call's start (date +%s): stamp and seconds_left count from it
#   GRAFT_JOBS   the call's jobs, e.g. " build tests graft-bench "
#   GRAFT_BG     the background jobs started for them (data sets, peer builds), e.g. " dense-sift ggnn "
#   GRAFT_STATE  a folder for this call's markers (a log already copied, a peer already linked)
#   GRAFT_BLAS   the OpenBLAS library (faiss_deb)
# and the user's own: GRAFT_COMMIT (written into the records), GRAFT_DEADLINE (seconds after the
# call's start by which it must end), each job's own (its header).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1
OUT=${OUT:-$root/device-out}
mkdir -p "$OUT"
GRAFT_T0=${GRAFT_T0:-$(date +%s)}
GRAFT_STATE=${GRAFT_STATE:-/tmp/graft-call-$GRAFT_T0}
mkdir -p "$GRAFT_STATE"
export OUT GRAFT_T0 GRAFT_STATE

# Where things live on the GPU machine: under /tmp, so that a warm machine keeps them for the
# next call (data sets, peer builds, ground truths in /tmp/graft-bench-gt).
dense=/tmp/dense-sift1m smooth=/tmp/smooth-sift1m patches=/tmp/kde-patches1m
fr=/tmp/graft-faiss            # Debian's FAISS 1.7.3 .deb, unpacked
fgpu=/tmp/faiss-gpu-build      # stock FAISS 1.7.3 with its GPU part (job faiss-gpu)
f115=/tmp/faiss115-gpu-build   # FAISS 1.15 with its GPU part (job faiss115)
ggnn=/tmp/ggnn                 # GGNN 0.9.1 (job ggnn)
fm=$root/.deps/data/fashion-mnist
commit=${GRAFT_COMMIT:-unknown}
ggnn_lib=$ggnn/deps/usr/lib/x86_64-linux-gnu:$ggnn/build
# GRAFT_PREBUILT=1: graft-bench comes built (scripts/device/pack_prebuilt.sh packs it and graft's
# libraries into .deps/carry/prebuilt.tar.xz on the build machine): the call builds nothing,
# which saves the build's 2.5-4 minutes. The jobs find it where they look, build-device/bench/.
if [ -n "${GRAFT_PREBUILT:-}" ] && [ -x .deps/prebuilt/graft-bench ]; then
  mkdir -p build-device/bench && ln -sf "$root/.deps/prebuilt/graft-bench" build-device/bench/graft-bench
  export LD_LIBRARY_PATH=$root/.deps/prebuilt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # Packed from a build with the CAGRA peer, it needs CAGRA's libraries in every job (the shards
  # job's copy of it failed without them): carry .deps/carry/cagra.tar.xz.
  if ldd .deps/prebuilt/graft-bench 2>/dev/null | grep -q "libcuvs.so => not found"; then
    [ -d .deps/cagra ] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$root/.deps/cagra
  fi
fi
# The sets the graph-quality job benchmarks: a data job starts only for those (or when named).
gq_sets=" ${GRAFT_GQ_SETS:-fashion-mnist dense-sift1m kde-patches1m} "
gq_wants() {  # SET...: is one of them asked (itself, or grown: SET-xC)?
  local s; for s in "$@"; do [[ $gq_sets == *" $s "* || $gq_sets == *" $s-x"[0-9]* ]] && return 0; done; return 1
}

stamp() { echo "[$(( $(date +%s) - GRAFT_T0 ))s] $*"; }
# Seconds left before GRAFT_DEADLINE (large when it is not set).
seconds_left() { echo $(( ${GRAFT_DEADLINE:-100000} - ($(date +%s) - GRAFT_T0) )); }
wanted() { [[ " ${GRAFT_JOBS:-} " == *" $1 "* ]]; }      # JOB: is it in this call?
started() { [[ " ${GRAFT_BG:-} " == *" $1 "* ]]; }       # BG: started for this call?
device_name() { nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1; }
ncu_bin() { command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n1; }

# Appends a log to $OUT/setup.log once a call (KEY says which) and shows its last LINES lines.
setup_log() {  # TITLE LOG LINES KEY
  [ -f "$2" ] && [ ! -f "$GRAFT_STATE/logged-$4" ] || return 0
  touch "$GRAFT_STATE/logged-$4"
  { echo "=== $1"; cat "$2"; } >>"$OUT/setup.log"
  tail -n "$3" "$2"
}

# Background work (data sets, peer builds) runs in its own session, so that it outlives the call
# when the device tool's limit ends it; /tmp/graft-NAME.pid holds its pid and command line,
# /tmp/graft-NAME.log its output. Waiting goes by that pid: a `pgrep -f NAME` loop typed into the
# device command matches its own command line and waits until the limit.
bg_running() {  # NAME: true while NAME's process (this call's or an earlier call's) runs
  local pid cmd now
  { read -r pid && read -r cmd; } 2>/dev/null <"/tmp/graft-$1.pid" || return 1
  [ -r "/proc/$pid/cmdline" ] || return 1
  # The process runs the command's tail: setsid, nohup and a leading `env VAR=...` exec the rest
  # (a test for equality never saw `env ... python3 ...` run, and bg_wait did not wait).
  now=$(tr '\0' ' ' <"/proc/$pid/cmdline")
  [ -n "$now" ] && [[ "$cmd " == *"$now" ]]
}
bg_start() {  # NAME COMMAND...: starts it unless it already runs
  local name=$1; shift
  if bg_running "$name"; then stamp "$name: still running from an earlier call"; return 0; fi
  setsid nohup "$@" >"/tmp/graft-$name.log" 2>&1 </dev/null &
  printf '%s\n%s\n' "$!" "$*" >"/tmp/graft-$name.pid"
  stamp "$name: started in the background"
}
bg_wait() {  # NAME [LINES]: waits for it (not past GRAFT_DEADLINE), then its log into setup.log
  if bg_running "$1"; then
    stamp "waiting for $1"
    while bg_running "$1" && [ "$(seconds_left)" -gt 10 ]; do sleep 2; done
    bg_running "$1" && stamp "$1: still running at GRAFT_DEADLINE"
  fi
  setup_log "$1 (background)" "/tmp/graft-$1.log" "${2:-2}" "$1"
}
# Sends SIGNAL (STOP / CONT) to a background job's whole session: shards pauses the FAISS GPU
# build (every core) while graft is timed.
bg_signal() {  # NAME SIGNAL
  local pid
  bg_running "$1" && read -r pid <"/tmp/graft-$1.pid" && kill -"$2" -- -"$pid" 2>/dev/null
  return 0
}

# FAISS 1.7.3 from the carried .deb (no FAISS on the GPU machine), BLAS/LAPACK from its OpenBLAS.
faiss_deb() {  # sets and exports GRAFT_BLAS
  [ -f $fr/usr/lib/x86_64-linux-gnu/libfaiss.a ] || dpkg -x .deps/debs/libfaiss-dev_*.deb $fr || return 1
  [ -n "${GRAFT_BLAS:-}" ] && return 0
  GRAFT_BLAS=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}')
  [ -n "$GRAFT_BLAS" ] || GRAFT_BLAS=$(find / -name 'libopenblas*.so*' 2>/dev/null | head -n1)
  [ -n "$GRAFT_BLAS" ] || { echo "no OpenBLAS found"; return 1; }
  export GRAFT_BLAS
}
# Sets cfg: graft's configure arguments for build-device (sm_90, Ninja, Release). Against FAISS
# 1.15 when the faiss115 job built it for this call; with "1.7.3", Debian's FAISS whatever the call.
device_cfg() {  # [1.7.3]
  faiss_deb || exit 1
  local faiss=("-DGRAFT_FAISS_ROOT=$fr" "-DGRAFT_BLAS_LIBRARIES=$GRAFT_BLAS"
               "-DGRAFT_FAISS_SOURCE_DIR=$root/.deps/faiss-src")
  if started faiss115 && [ "${1:-}" != 1.7.3 ]; then
    faiss=("-DCMAKE_PREFIX_PATH=$f115-prefix" "-DGRAFT_FAISS_SOURCE_DIR=$f115-src" -DGRAFT_PYTHON=OFF)
  fi
  cfg=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGRAFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
       "${faiss[@]}" -DGRAFT_DATA_DIR="$root/.deps/data")
}
# Compile jobs: beside the FAISS GPU build (background, every core) a quarter of the cores, at
# least 6.
build_jobs() {
  local n; n=$(nproc)
  if bg_running faiss-gpu; then echo $(( n / 4 > 6 ? n / 4 : 6 )); else echo "$n"; fi
}
build_failed() {  # LOG: its errors shown, and the job ends
  grep -E "error|FAILED" -A3 "$1" | head -60
  exit 1
}
ninja_build() {  # TARGET...: into build-device, logged in $OUT/build.log
  ninja -C build-device -j"$(build_jobs)" "$@" >>"$OUT/build.log" 2>&1 || build_failed "$OUT/build.log"
}
# With the faiss-gpu job in this call: waits for its build and reconfigures build-device against
# it (once a call); the job then builds its program again, linked with FAISS's GPU part.
link_faiss_gpu() {
  started faiss-gpu && [ ! -f "$GRAFT_STATE/faiss-gpu-linked" ] || return 0
  touch "$GRAFT_STATE/faiss-gpu-linked"
  bg_wait faiss-gpu 3
  device_cfg
  [ -f $fgpu/faiss/libfaiss.a ] || return 0
  cmake -S . -B build-device "${cfg[@]}" -DGRAFT_FAISS_GPU_DIR=$fgpu -DGRAFT_FAISS_GPU_SRC=$fgpu-src >>"$OUT/build.log" 2>&1
}
# Is there a FAISS with its GPU part for the @gpu peers (the 1.7.3 build, or FAISS 1.15)?
faiss_gpu_ready() { [ -f $fgpu/faiss/libfaiss.a ] || started faiss115; }

mpi_env() {  # Open MPI for the mpi job: the machine's mpirun, else Debian's unpacked from .deps/mpi
  command -v mpirun >/dev/null && return 0
  ls .deps/mpi/libopenmpi3_*.deb >/dev/null 2>&1 || { stamp "no mpirun and no .deps/mpi/*.deb"; return 1; }
  local mx=/tmp/graft-openmpi t f
  [ -x $mx/usr/bin/orterun ] || for f in .deps/mpi/*.deb; do dpkg -x "$f" $mx || return 1; done
  mkdir -p $mx/bin
  for t in mpirun mpiexec mpicc mpicxx; do ln -sf $mx/usr/bin/$t.openmpi $mx/bin/$t; done
  # Open MPI and its PMIx find their components from these, not from the /usr they were built for.
  export OPAL_PREFIX=$mx/usr PATH=$mx/bin:$PATH PMIX_INSTALL_PREFIX=$mx/usr/lib/x86_64-linux-gnu/pmix2
  export PMIX_MCA_mca_base_component_path=$mx/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
  export LD_LIBRARY_PATH=$mx/usr/lib/x86_64-linux-gnu/openmpi/lib:$mx/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}
