#!/usr/bin/env bash
# The GPU-machine command: builds graft for sm_90 with the dependencies carried in .deps/
# (scripts/fetch_deps.sh), runs every CTest label including gpu, and prints a summary.
#   bash scripts/device_run.sh                 # build + all tests
#   bash scripts/device_run.sh --bench         # ... then the exact k-NN benchmark and its torch peer
#   bash scripts/device_run.sh --no-tests --bench-exact-dense
#                                              # ... the exact k-NN benchmark at its targets only (implies
#                                              #     --faiss-gpu): k = 10 and 1024 on the 1M dense-SIFT set,
#                                              #     random-uniform and random-uint8 1M x 128, random-uniform
#                                              #     1M x 960; every GraftFlat path (FP32, certified TF32,
#                                              #     INT8 on integer data) with its floor, FAISS GpuIndexFlatL2
#                                              #     and torch in the same run (bench/studies/bench_exact --focus; into
#                                              #     $OUT: exact.jsonl, bench_exact.log, torch_exact.log);
#                                              #     also k = 10 on two sets with many equal or near-duplicate
#                                              #     vectors: dup-sift1m (grown from dense-SIFT) and
#                                              #     smooth-sift1m (make_dense_sift.py --smooth, made here in
#                                              #     the background from the carried PNGs); GRAFT_EXACT_SETS
#                                              #     (e.g. dense-sift1m,dup-sift1m,smooth-sift1m) keeps those sets only
#   bash scripts/device_run.sh --bench-build   # ... and the graph-build benchmark (GRNND vs RNN-Descent, HNSW, NSG)
#   bash scripts/device_run.sh --bench-pieces  # ... the graph-build benchmark of GRNND in pieces
#                                              #     (vs the whole GRNND and CPU builds; ~2 min)
#   bash scripts/device_run.sh --bench-search  # ... and the graph-search benchmark (graft vs HNSW, IVF, exact; ~3 min)
#   bash scripts/device_run.sh --bench-search-quick
#                                              # ... the same on sift5k only (~30 s)
#   bash scripts/device_run.sh --bench-bang    # ... and the graph + PQ benchmark (BANG: in-memory vs
#                                              #     out-of-core, stage breakdown, largest-data
#                                              #     projection, FAISS GPU IVF-PQ, CPU reference)
#   bash scripts/device_run.sh --bench-bang-quick
#                                              # ... the same on sift5k only
#   bash scripts/device_run.sh --sanitize      # ... and compute-sanitizer memcheck + racecheck on small GPU cases
#                                              #     (GRAFT_SANITIZE_TESTS="test_gpu_bang ..." picks the tests)
#   bash scripts/device_run.sh --install-check # ... and the package build: CMake's default CUDA
#                                              #     architectures (80, 86, 89, 90 + PTX) built (timed
#                                              #     against sm_90 alone), installed into a prefix, and
#                                              #     tests/consumer built against it and run on the GPU
#   bash scripts/device_run.sh --no-tests --filter-bench
#                                              # ... filtered search (graft-bench --selectivity): GraftGraph,
#                                              #     GraftGraph,PQ32, FAISS CPU Flat and IVF4096,Flat with a
#                                              #     random IDSelectorBatch of 50% .. 0.01% of the ids, on
#                                              #     the 1M dense-SIFT set, then Fashion-MNIST (records in
#                                              #     filter-bench.jsonl, log filter-bench.log);
#                                              #     --filter-bench-quick: sift5k and Fashion-MNIST only
#   bash scripts/device_run.sh --no-tests --graft-bench
#                                              # ... graft-bench (bench/graft_bench.cpp) on the 1M dense-SIFT
#                                              #     set: GraftFlat, GraftGraph, GraftGraph,PQ32, HNSW32 (16
#                                              #     threads), IVF4096,Flat@gpu, IVF4096,PQ32@gpu and GGNN
#                                              #     (implies --faiss-gpu; GGNN built from .deps/peers by
#                                              #     scripts/device_ggnn.sh), then GraftGraph, HNSW32 and GGNN
#                                              #     on Fashion-MNIST while time is left; into $OUT:
#                                              #     graft-bench.log, graft-bench.jsonl, recall-qps-*.svg, the
#                                              #     dense-sift1m chart's .png
#   bash scripts/device_run.sh --no-tests --graft-bench-storage
#                                              # ... graft-bench of the graph index's storages alone:
#                                              #     GraftGraph, GraftGraph,FP16, GraftGraph,SQ8,
#                                              #     GraftGraph,PQ32 and GraftGraph,OPQ32,PQ32 on the 1M
#                                              #     dense-SIFT set, then the same on Fashion-MNIST with
#                                              #     PQ28 (784 = 28 x 28), batch 10k only (no FAISS GPU, no
#                                              #     GGNN: nothing to build in the background); into
#                                              #     $OUT: graft-bench-storage.log, graft-bench.jsonl
#   bash scripts/device_run.sh --no-tests --search-ncu
#                                              # ... Nsight Compute on one walk kernel (a chunk of a
#                                              #     batch-10k call) of GraftGraph, ,FP16 and ,SQ8:
#                                              #     dense-SIFT at L = 40, Fashion-MNIST at L = 16 and,
#                                              #     with .deps/data/kde-images, KDE-patches at L = 160
#                                              #     (their recall-0.95 beams); throughput, occupancy, stall
#                                              #     reasons, instruction mix; into $OUT: search-ncu.log.
#                                              #     GRAFT_NCU_INDEXES picks the indexes, GRAFT_NCU_SECTIONS
#                                              #     ncu's sections; GRAFT_OCCUPANCY_BLOCKS="2 3 4 0": then
#                                              #     graft-bench of the same with at most B blocks a
#                                              #     multiprocessor (0: no limit)
#   GRAFT_AB=.deps/ab GRAFT_AB_COMMIT=HASH bash scripts/device_run.sh --walk-ab
#                                              # ... the graph walk against another commit's, in one call
#                                              #     (issue 36): that tree (`git archive HASH`, bench/logs and
#                                              #     bench/results left out, examples/search_loop.c added) is
#                                              #     built beside this one; graft-bench of GraftGraph at batch
#                                              #     10k and batch 1 on the 1M dense-SIFT set, Fashion-MNIST
#                                              #     and the 1M KDE-patches set (d = 192, scripts/make_patches.py),
#                                              #     old then new; this tree's team sizes (GRAFT_SEARCH_LANES);
#                                              #     examples/search_loop (a user's faiss_c loop) of both trees,
#                                              #     OMP_NUM_THREADS unset and 1; Nsight Compute's instruction
#                                              #     count of both walks at dense-SIFT L = 48; into $OUT:
#                                              #     walk-ab.log, walk-ab.jsonl
#   bash scripts/device_run.sh --bench-shards  # ... issue 33's multi-GPU benchmark in one call (implies
#                                              #     --faiss-gpu; alone, it builds only graft-bench and
#                                              #     test_gpu_shards and tests only the latter): the 1M
#                                              #     dense-SIFT set grown to 10M (--scale, jittered copies,
#                                              #     recall with ties), GraftGraph on 1 GPU, sharded and
#                                              #     replicated over all GPUs; FAISS IVF16384,Flat on 1 GPU,
#                                              #     @gpus=N and @gpus=N,replicas; the same graft runs at
#                                              #     GRAFT_SHARDS_SCALES (default 40M on 2 GPUs); with 4+
#                                              #     GPUs an index larger than one GPU, sharded in memory
#                                              #     vs GraftGraph,PQ32,ooc on one (GRAFT_SHARDS_BIG=C
#                                              #     millions, 0: off); then scripts/shards_summary.py's
#                                              #     ratios and targets. Into $OUT: shards.log,
#                                              #     shards.jsonl, recall-qps-multi-gpu-*.svg. Set
#                                              #     GRAFT_DEADLINE (e.g. 550) so that it ends in time;
#                                              #     GRAFT_SHARDS_INDEX picks the graft index,
#                                              #     GRAFT_SHARDS_BATCHES the batches (10000),
#                                              #     GRAFT_SHARDS_FAISS=0 leaves FAISS out,
#                                              #     GRAFT_SHARDS_FAISS_SCALES its sizes ("10"),
#                                              #     GRAFT_SHARDS_STEPS picks the steps ("10 faiss
#                                              #     scales big", all by default; e.g. "big" on a
#                                              #     warm machine after a call that ran the others)
#   bash scripts/device_run.sh --no-tests --bench-living
#                                              # ... issue 34's living-index benchmark (bench/studies/bench_living.cpp)
#                                              #     on the 1M dense-SIFT set, then grown to 10M (--scale 10):
#                                              #     a full build, an insert of 1% against it, ten 1% adds to
#                                              #     +10% and their recall, inserts a second at batch 1k and
#                                              #     100k beside FAISS HNSW32's add rate on 16 threads (1M
#                                              #     only), removal of 10% and 50%, consolidation; into $OUT:
#                                              #     living.jsonl, bench_living.log. GRAFT_LIVING_SCALES="1 10"
#                                              #     (default) picks the sizes; GRAFT_LIVING_INSERT_L=96,128
#                                              #     repeats the 1M inserts at those beams
#   bash scripts/device_run.sh --no-tests ... # skip CTest (a later call on a warm machine, whose tests
#                                              #     already ran for this commit)
#   bash scripts/device_run.sh --bench-exact-dense --no-faiss-gpu
#                                              # ... the same without FAISS GPU (no ~5 min build; a later
#                                              #     option wins), e.g. with GRAFT_EXACT_PATHS=45
#                                              #     GRAFT_EXACT_PROFILE=1 for the FP16 paths' stage clocks
#   bash scripts/device_run.sh --faiss-gpu --bench
#                                              # ... with stock FAISS GPU built (in the background,
#                                              #     from .deps/faiss-src) and linked as a peer
#                                              #     (of --bench, --bench-search and --bench-bang)
# Options combine. Everything goes to $OUT (default ./device-out), few files because the device
# tool returns at most 8: build.log (configure + build), ctest.log, sanitize.log, setup.log (the
# background dense-SIFT generation and FAISS GPU build, appended when waited for), and per
# benchmark its records and console log (search.jsonl + bench_search.log, bang.jsonl +
# bench_bang.log, build.jsonl + bench_build.log, exact.jsonl + bench_exact.log + torch_exact.log).
# GRAFT_BANG_REPLICATE=R (R > 1): --bench-bang runs on dense-sift1m alone, grown to R x 1M vectors
# by jittered copies (bench_bang --replicate; for scale, see bench/bench_record.h). The study
# programs (bench_exact, bench_build, bench_search, bench_bang) live in bench/studies/ (its README).
# GRAFT_BANG_SCALE=C: --bench-bang runs bench_bang --scale C instead: dense-sift1m (sift5k with
# --bench-bang-quick) grown to C cell-permuted copies, ingested in blocks, built once, in-memory
# tried and out-of-core swept (bench/studies/bench_bang.cpp, run_scale).
# GRAFT_BANG_AB=DIR (with GRAFT_BANG_AB_COMMIT=HASH): --bench-bang also builds the bench_bang of the
# source tree DIR (another commit, e.g. `git archive HASH | tar -x -C .deps/ab`) and runs the two
# in turn, DIR's first, twice while GRAFT_DEADLINE allows: host timings differ between instances
# of the GPU machine, so a change is judged within one call.
# GRAFT_BANG_ONLY=NAME: --bench-bang runs that dataset alone (bench_bang --only); GRAFT_BANG_REPEAT=N
# (without GRAFT_BANG_AB): the benchmark N times in a row, to see the host's run-to-run noise.
# --faiss115: graft, its tests and benchmarks against FAISS 1.15 built here with its GPU part from
# the carried .deps/peers/faiss-1.15.0.tar.gz (scripts/device_faiss_gpu.sh, ~5 min before graft
# builds) instead of Debian's FAISS 1.7.3 .deb: the FAISS GPU peers are then FAISS 1.15's
# (graft-bench records say faiss_version), and --faiss-gpu's 1.7.3 build is not made.
# GRAFT_TESTS=REGEX runs only the tests whose names match (ctest -R), e.g. a change's own tests.
# GRAFT_COMMIT names the commit. GRAFT_DEADLINE=S stops the graph-build, graph-search and graph +
# PQ benchmarks S seconds after the script started (records already written are kept), so that a
# call ends inside the device tool's limit; with both --bench-search and --bench-bang, the search
# benchmark gets half of the time left when it starts.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-$root/device-out}
mkdir -p "$OUT"
tests=1 install_check=0 bench=0 faiss_gpu=0 faiss115=0 quick=0 focus=0 graft_bench=0 filter_bench=0 filter_quick=0 storage_bench=0 search_ncu=0 walk_ab=0 bench_shards=0 sanitize=0 bench_build=0 bench_living=0 build_pieces=0 bench_search=0 search_quick=0 bench_bang=0 bang_quick=0
for a in "$@"; do
  case $a in
    --bench) bench=1 ;;
    --quick-bench) bench=1 quick=1 ;;
    --bench-exact-dense) bench=1 focus=1 faiss_gpu=1 ;;
    --faiss-gpu) faiss_gpu=1 ;;
    --no-faiss-gpu) faiss_gpu=0 ;;
    --faiss115) faiss115=1 ;;
    --sanitize) sanitize=1 ;;
    --no-tests) tests=0 ;;
    --install-check) install_check=1 ;;
    --bench-build) bench_build=1 ;;
    --bench-pieces) bench_build=1 build_pieces=1 ;;
    --bench-search) bench_search=1 ;;
    --bench-search-quick) bench_search=1 search_quick=1 ;;
    --bench-bang) bench_bang=1 ;;
    --bench-bang-quick) bench_bang=1 bang_quick=1 ;;
    --graft-bench) graft_bench=1 faiss_gpu=1 ;;
    --filter-bench) filter_bench=1 ;;
    --filter-bench-quick) filter_bench=1 filter_quick=1 ;;
    --graft-bench-storage) storage_bench=1 ;;
    --walk-ab) walk_ab=1 ;;
    --search-ncu) search_ncu=1 ;;
    --bench-shards) bench_shards=1 faiss_gpu=1 ;;
    --bench-living) bench_living=1 ;;
    *) echo "unknown option $a" >&2; exit 2 ;;
  esac
done
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1)
stamp "GPU: ${gpu:-none}; $(nvcc --version | tail -n1); $(cmake --version | head -n1)"

# FAISS 1.7.3 from the carried .deb (no FAISS on the GPU machine), BLAS/LAPACK from its OpenBLAS.
fr=/tmp/graft-faiss
[ -f $fr/usr/lib/x86_64-linux-gnu/libfaiss.a ] || dpkg -x .deps/debs/libfaiss-dev_*.deb $fr || exit 1
blas=$(ldconfig -p | awk '/libopenblas[^ ]*\.so/ {print $NF; exit}')
[ -n "$blas" ] || blas=$(find / -name 'libopenblas*.so*' 2>/dev/null | head -n1)
[ -n "$blas" ] || { echo "no OpenBLAS found"; exit 1; }
stamp "BLAS: $blas"

dense=/tmp/dense-sift1m
want_dense=$(( bench_build || (bench_search && !search_quick) || (bench_bang && !bang_quick) || (bench && !quick) || graft_bench || (filter_bench && !filter_quick) || storage_bench || search_ncu || walk_ab || bench_shards || bench_living ))
# The background jobs log to /tmp (they may outlive this command, and a warm machine keeps their
# logs for the next call); each log is appended to $OUT/setup.log once it has been waited for.
dense_log=/tmp/graft-dense-sift.log faiss_log=/tmp/graft-faiss-gpu-build.log
if [ $want_dense = 1 ] && [ -d .deps/data/mate-images ] && [ ! -f $dense/query.u8bin ]; then
  # The 1M dense-SIFT set (128 MB is over the carry limit), made here while graft builds and
  # tests; the benchmarks compute their own ground truth.
  setsid nohup env PYTHONUNBUFFERED=1 python3 scripts/make_dense_sift.py $dense \
    --images .deps/data/mate-images --no-gt >$dense_log 2>&1 </dev/null &
  stamp "dense-SIFT 1M generation started in the background"
fi

# The exact benchmark's smooth-image set (duplicates kept), made the same way beside it.
smooth=/tmp/smooth-sift1m smooth_log=/tmp/graft-smooth-sift.log
if [ $bench = 1 ] && [ $quick = 0 ] && [ -f .deps/data/mate-images/desktop/Ubuntu-Mate-Warm-no-logo.png ] && \
   [ ! -f $smooth/query.u8bin ]; then
  setsid nohup env PYTHONUNBUFFERED=1 python3 scripts/make_dense_sift.py $smooth --smooth \
    --images .deps/data/mate-images --no-gt >$smooth_log 2>&1 </dev/null &
  stamp "smooth-SIFT 1M generation started in the background"
fi

patches=/tmp/kde-patches1m patches_log=/tmp/graft-patches.log
if [ $(( walk_ab || search_ncu )) = 1 ] && [ -d .deps/data/kde-images ] && [ ! -f $patches/query.u8bin ]; then
  # The third set (d = 192), made here like dense-SIFT.
  setsid nohup env PYTHONUNBUFFERED=1 python3 scripts/make_patches.py $patches \
    --images .deps/data/kde-images >$patches_log 2>&1 </dev/null &
  stamp "KDE-patches 1M generation started in the background"
fi

# --faiss115: FAISS 1.15 with its GPU part first (graft builds against it); it is the peers' FAISS.
f115=/tmp/faiss115-gpu-build
if [ $faiss115 = 1 ]; then
  faiss_gpu=0
  stamp "building FAISS 1.15 with its GPU part (scripts/device_faiss_gpu.sh)"
  bash scripts/device_faiss_gpu.sh $f115 "$blas" .deps/peers/faiss-1.15.0.tar.gz >/tmp/graft-faiss115.log 2>&1 ||
    { tail -30 /tmp/graft-faiss115.log; exit 1; }
  { echo "=== FAISS 1.15 GPU build"; cat /tmp/graft-faiss115.log; } >>"$OUT/setup.log"
  stamp "$(tail -n1 /tmp/graft-faiss115.log)"
fi

fgpu=/tmp/faiss-gpu-build
if [ $faiss_gpu = 1 ] && [ ! -f $fgpu/faiss/libfaiss.a ] && ! pgrep -f device_faiss_gpu.sh >/dev/null; then
  # Its own session, so that it outlives this command if the command's time runs out.
  setsid nohup bash scripts/device_faiss_gpu.sh $fgpu "$blas" >$faiss_log 2>&1 < /dev/null &
  stamp "FAISS GPU build started in the background"
fi

ggnn=/tmp/ggnn ggnn_log=/tmp/graft-ggnn-build.log
if [ $graft_bench = 1 ] && [ ! -f $ggnn/build/libGGNNBase.so ] && ! pgrep -f device_ggnn.sh >/dev/null; then
  setsid nohup bash scripts/device_ggnn.sh $ggnn >$ggnn_log 2>&1 </dev/null &
  stamp "GGNN build started in the background"
fi

# Appends a background job's log to $OUT/setup.log (once per call) and shows its last lines.
dense_logged=0
setup_log() {  # TITLE LOG LINES
  [ -f "$2" ] || return 0
  { echo "=== $1"; cat "$2"; } >>"$OUT/setup.log"
  tail -n "$3" "$2"
}

# Waits for the dense-SIFT set when it is being made.
wait_dense_sift() {
  if pgrep -f "make_dense_sift.py $dense" >/dev/null; then
    stamp "waiting for the dense-SIFT set"
    while pgrep -f "make_dense_sift.py $dense" >/dev/null; do sleep 2; done
  fi
  [ $dense_logged = 1 ] || setup_log "dense-SIFT generation" $dense_log 2
  dense_logged=1
}

# With --faiss-gpu: waits for the FAISS GPU build and reconfigures the benchmarks against it
# (the first call only).
faiss_gpu_linked=0
link_faiss_gpu() {
  [ $faiss_gpu = 1 ] && [ $faiss_gpu_linked = 0 ] || return 0
  faiss_gpu_linked=1
  stamp "waiting for the FAISS GPU build"
  while pgrep -f device_faiss_gpu.sh >/dev/null; do sleep 5; done
  setup_log "FAISS GPU build" $faiss_log 3
  if [ -f $fgpu/faiss/libfaiss.a ]; then
    cmake -S . -B build-device "${cfg[@]}" -DGRAFT_FAISS_GPU_DIR=$fgpu -DGRAFT_FAISS_GPU_SRC=$fgpu-src >>"$OUT/build.log" 2>&1
  fi
}

# Seconds left before GRAFT_DEADLINE (large when it is not set).
seconds_left() { echo $(( ${GRAFT_DEADLINE:-100000} - ($(date +%s) - t0) )); }
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n1)

faiss_cfg=(-DGRAFT_FAISS_ROOT=$fr -DGRAFT_BLAS_LIBRARIES="$blas" -DGRAFT_FAISS_SOURCE_DIR="$root/.deps/faiss-src")
[ $faiss115 = 1 ] && faiss_cfg=(-DCMAKE_PREFIX_PATH=$f115-prefix -DGRAFT_FAISS_SOURCE_DIR=$f115-src -DGRAFT_PYTHON=OFF)
cfg=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGRAFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
     "${faiss_cfg[@]}" -DGRAFT_DATA_DIR="$root/.deps/data")
cmake -S . -B build-device "${cfg[@]}" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
# Beside the FAISS GPU build (background, all cores): a quarter of the cores, at least 6.
jobs=$([ $faiss_gpu = 1 ] && echo $(( $(nproc) / 4 > 6 ? $(nproc) / 4 : 6 )) || nproc)
# --bench-shards alone builds only what it runs (graft-bench, test_gpu_shards) and tests only
# test_gpu_shards (with GRAFT_TESTS: everything, those tests): the call's minutes go to the GPUs.
only_shards=$(( bench_shards && !bench && !bench_build && !bench_search && !bench_bang && !graft_bench && !filter_bench && !storage_bench && !search_ncu && !walk_ab && !sanitize && !install_check ))
targets=()
if [ $only_shards = 1 ] && [ -z "${GRAFT_TESTS:-}" ]; then
  targets=(graft-bench test_gpu_shards)
  GRAFT_TESTS=${GRAFT_TESTS:-test_gpu_shards}
fi
# What a package ships (libraries and programs), timed alone: the single-architecture figure.
shipped=(graft_core graft_faiss faiss_c faiss_swap graph_build graft-bench)
if [ $install_check = 1 ]; then
  s0=$(date +%s.%N)
  ninja -C build-device -j$jobs "${shipped[@]}" >>"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -60; exit 1; }
  stamp "shipped targets, sm_90 only: $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $s0 }") s on $jobs jobs"
fi
ninja -C build-device -j$jobs "${targets[@]}" >>"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/build.log" | head -60; exit 1; }
stamp "graft built${targets:+ (${targets[*]})}"

if [ $install_check = 1 ]; then
  # The package build: no architectures named, so CMake's default list (CMakeLists.txt).
  fat=(); for c in "${cfg[@]}"; do [[ $c == -DCMAKE_CUDA_ARCHITECTURES=* ]] || fat+=("$c"); done
  cmake -S . -B build-fat "${fat[@]}" >"$OUT/install.log" 2>&1 || { tail -30 "$OUT/install.log"; exit 1; }
  s0=$(date +%s.%N)
  ninja -C build-fat -j$jobs "${shipped[@]}" >>"$OUT/install.log" 2>&1 || { grep -E "error|FAILED" -A3 "$OUT/install.log" | head -60; exit 1; }
  stamp "shipped targets, default architectures: $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $s0 }") s on $jobs jobs"
  rm -rf /tmp/graft-prefix
  cmake --install build-fat --prefix /tmp/graft-prefix >>"$OUT/install.log" 2>&1 || { tail -30 "$OUT/install.log"; exit 1; }
  cuobjdump --list-elf /tmp/graft-prefix/lib/libgraft_core.so | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c | tee -a "$OUT/install.log"
  cuobjdump --list-ptx /tmp/graft-prefix/lib/libgraft_core.so | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/PTX \1/' | sort | uniq -c | tee -a "$OUT/install.log"
  ls -la /tmp/graft-prefix/lib/*.so.*.* | tee -a "$OUT/install.log"
  bash tests/consumer/check.sh /tmp/graft-prefix "$root/.deps/data" /tmp/graft-consumer 2>&1 | tee -a "$OUT/install.log"
  stamp "install check: exit ${PIPESTATUS[0]}"
fi

test_status=0
if [ $tests = 1 ]; then
  # -V keeps every test's own output (the numbers quoted in issue notes), passed or not.
  # Four tests at a time, each with a quarter of the cores: OpenMP teams of nproc threads in four
  # processes at once spin against each other (tests/CMakeLists.txt also sets passive waits).
  # The soak (label soak) compares every GPU result with the CPU reference for 5 minutes here.
  OMP_NUM_THREADS=$(( $(nproc) / 4 > 0 ? $(nproc) / 4 : 1 )) GRAFT_SOAK_SECONDS=${GRAFT_SOAK_SECONDS:-300} \
    ctest --test-dir build-device --output-on-failure -V -j4 ${GRAFT_TESTS:+-R "$GRAFT_TESTS"} >"$OUT/ctest.log" 2>&1
  grep -E "Test +#|tests passed|Skipped|Failed" "$OUT/ctest.log" | head -40
  passed=$(grep -c " Passed " "$OUT/ctest.log")
  failed=$(grep -cE "\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run" "$OUT/ctest.log")
  skipped=$(grep -c "\*\*\*Skipped" "$OUT/ctest.log")
  stamp "SUMMARY: GPU ${gpu:-none} | tests: $passed passed, $failed failed, $skipped skipped"
  # A failed test is reported, and the script's exit status says so at the end, but the sanitizer
  # and benchmark steps still run: device time is too scarce to spend a call on one failure.
  if [ "$failed" != 0 ]; then
    grep -B5 -A40 "Failed\|failed" "$OUT/ctest.log" | tail -80
    test_status=1
  fi
fi

if [ $sanitize = 1 ]; then
  # compute-sanitizer on the quick GPU cases: out-of-bounds/misaligned accesses and shared-memory races.
  # test_concurrency: 16 host threads on one GPU index of each type (2 s of mixing per index);
  # test_gpu_oom: every allocation failed once, with memcheck's leak check on the device.
  for t in ${GRAFT_SANITIZE_TESTS:-test_gpu_exact test_gpu_exact_int8 test_gpu_grnnd test_gpu_search test_gpu_bang test_gpu_filter test_concurrency test_gpu_oom}; do
    bin=$(find ./build-device/tests -name "$t" -type f -perm -u+x | head -n1)
    if [ -z "$bin" ]; then
      echo "=== $t: not built" >>"$OUT/sanitize.log"
      stamp "compute-sanitizer $t: not built"
      continue
    fi
    for tool in memcheck racecheck; do
      left=$(seconds_left)
      if [ $left -lt 30 ]; then
        stamp "compute-sanitizer $tool $t: skipped, ${left}s left before GRAFT_DEADLINE"
        continue
      fi
      leak=$([ $tool = memcheck ] && [ $t = test_gpu_oom ] && echo --leak-check=full)
      GRAFT_TEST_QUICK=1 GRAFT_STRESS_SECONDS=2 OPENBLAS_NUM_THREADS=1 timeout $left \
        compute-sanitizer --tool $tool $leak --error-exitcode 9 "$bin" >/tmp/sanitize.log 2>&1
      rc=$?
      { echo "=== $tool $t: exit $rc"; cat /tmp/sanitize.log; } >>"$OUT/sanitize.log"
      stamp "compute-sanitizer $tool $t: exit $rc ($(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" /tmp/sanitize.log | tail -n1))"
    done
  done
fi

if [ $bench_build = 1 ]; then
  ninja -C build-device bench_build >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  wait_dense_sift
  stamp "graph-build benchmark"
  GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=$(nproc) \
    timeout $(seconds_left) ./build-device/bench/studies/bench_build --out "$OUT/build.jsonl" --commit "${GRAFT_COMMIT:-unknown}" \
    --data "$root/.deps/data" --fmnist "$root/.deps/data/fashion-mnist" \
    $([ -f $dense/query.u8bin ] && echo --dense-sift $dense) --pieces $build_pieces 2>&1 | tee "$OUT/bench_build.log"
  stamp "graph-build benchmark done"
fi

if [ $bench_search = 1 ]; then
  link_faiss_gpu
  ninja -C build-device bench_search >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  [ $search_quick = 1 ] || wait_dense_sift
  left=$(seconds_left)
  # The graph + PQ benchmark still to come gets the other half.
  [ $bench_bang = 1 ] && left=$(( left / 2 ))
  if [ $left -lt 60 ]; then
    stamp "graph-search benchmark skipped: ${left}s left before GRAFT_DEADLINE"
  else
    stamp "graph-search benchmark"
    # --deadline: no new configuration after it; the margin lets the last one and the summary finish.
    GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=$(nproc) \
      timeout $left ./build-device/bench/studies/bench_search --out "$OUT/search.jsonl" --commit "${GRAFT_COMMIT:-unknown}" \
      --deadline $(( left - 30 )) --data "$root/.deps/data" --fmnist "$root/.deps/data/fashion-mnist" \
      $([ $search_quick = 1 ] && echo --quick) $([ $search_quick = 0 ] && [ -f $dense/query.u8bin ] && echo --dense-sift $dense) \
      2>&1 | tee "$OUT/bench_search.log"
    stamp "graph-search benchmark done"
  fi
fi

if [ $bench_bang = 1 ]; then
  link_faiss_gpu
  ninja -C build-device bench_bang >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  [ $bang_quick = 1 ] || wait_dense_sift
  left=$(seconds_left)
  if [ $left -lt 60 ]; then
    stamp "graph + PQ benchmark skipped: ${left}s left before GRAFT_DEADLINE"
  else
    # The runs: this tree's, or with GRAFT_BANG_AB the other tree's and this one's, twice.
    runs=("./build-device/bench/studies/bench_bang ${GRAFT_COMMIT:-unknown}")
    for ((i = 1; i < ${GRAFT_BANG_REPEAT:-1}; i++)); do runs+=("${runs[0]}"); done
    if [ -n "${GRAFT_BANG_AB:-}" ]; then
      cmake -S "$GRAFT_BANG_AB" -B build-ab "${cfg[@]}" >>"$OUT/build.log" 2>&1 &&
        ninja -C build-ab bench_bang >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
      # The other tree may predate bench/studies/.
      ab_exe=./build-ab/bench/studies/bench_bang
      [ -x $ab_exe ] || ab_exe=./build-ab/bench/bench_bang
      ab="$ab_exe ${GRAFT_BANG_AB_COMMIT:-other}"
      runs=("$ab" "${runs[0]}" "$ab" "${runs[0]}")
    fi
    for run in "${runs[@]}"; do
      read -r exe commit <<<"$run"
      left=$(seconds_left)
      [ $left -ge 60 ] || { stamp "graph + PQ benchmark of $commit skipped: ${left}s left"; continue; }
      stamp "graph + PQ benchmark ($commit)"
      # OPENBLAS_NUM_THREADS=1: FAISS's k-means of the PQ sub-spaces (tiny GEMMs) is 6x slower with
      # OpenBLAS's own threads spinning against OpenMP's (tests/CMakeLists.txt); the only other BLAS
      # user, the ground truth's FAISS check on ~200 queries, takes a second or two single-threaded.
      GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=$(nproc) OPENBLAS_NUM_THREADS=1 \
        timeout $left $exe --out "$OUT/bang.jsonl" --commit "$commit" \
        --deadline $(( left - 30 )) --data "$root/.deps/data" --fmnist "$root/.deps/data/fashion-mnist" \
        $([ $bang_quick = 1 ] && echo --quick) $([ $bang_quick = 0 ] && [ -f $dense/query.u8bin ] && echo --dense-sift $dense) \
        $([ "${GRAFT_BANG_REPLICATE:-1}" -gt 1 ] && echo --replicate "$GRAFT_BANG_REPLICATE" --only dense-sift1m) \
        $([ -n "${GRAFT_BANG_ONLY:-}" ] && echo --only "$GRAFT_BANG_ONLY") \
        $([ "${GRAFT_BANG_SCALE:-0}" -gt 0 ] && echo --scale "$GRAFT_BANG_SCALE" $([ $bang_quick = 0 ] && echo --only dense-sift1m)) \
        2>&1 | tee -a "$OUT/bench_bang.log"
    done
    stamp "graph + PQ benchmark done"
  fi
fi

if [ $graft_bench = 1 ]; then
  link_faiss_gpu
  stamp "waiting for the GGNN build"
  while pgrep -f device_ggnn.sh >/dev/null; do sleep 2; done
  setup_log "GGNN build" $ggnn_log 3
  ggnn_lib=$ggnn/deps/usr/lib/x86_64-linux-gnu:$ggnn/build
  ggnn_index=()
  if [ -f $ggnn/build/libGGNNBase.so ]; then
    cmake -S . -B build-device -DGRAFT_GGNN_DIR=$ggnn/src -DGRAFT_GGNN_BUILD=$ggnn/build >>"$OUT/build.log" 2>&1
    ggnn_index=(--index GGNN)
  else
    stamp "GGNN did not build (see setup.log): graft-bench runs without it"
  fi
  # LD_LIBRARY_PATH: the linker finds libGGNNBase.so's glog through it (-rpath-link's search), the run too.
  # Neither peer has been linked into graft-bench before: when the build fails, the run goes on
  # without FAISS GPU, then without GGNN too, rather than without results.
  gb_build() { LD_LIBRARY_PATH=$ggnn_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ninja -C build-device graft-bench >>"$OUT/build.log" 2>&1; }
  gb_faiss_gpu=1
  if ! gb_build; then
    grep -E "error|FAILED|undefined|multiple definition" "$OUT/build.log" | head -20
    stamp "graft-bench did not build with the peers (build.log): again without FAISS GPU"
    gb_faiss_gpu=0
    cmake -S . -B build-device -DGRAFT_FAISS_GPU_DIR= >>"$OUT/build.log" 2>&1
    if ! gb_build; then
      stamp "graft-bench did not build: again without GGNN"
      ggnn_index=()
      cmake -S . -B build-device -DGRAFT_GGNN_DIR= >>"$OUT/build.log" 2>&1
      gb_build || { grep -E "error|FAILED" -A3 "$OUT/build.log" | tail -40; exit 1; }
    fi
  fi
  wait_dense_sift
  # One run per dataset: records appended to one file, one chart each (the Fashion-MNIST chart as
  # SVG only: the device tool returns at most 8 files); ground truths cached outside $OUT.
  gb() {  # NAME SECONDS ARGS...
    local name=$1 secs=$2; shift 2
    stamp "graft-bench on $name (${secs}s at most)"
    # GLOG_minloglevel=1: GGNN logs every query at INFO through glog.
    GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=1 GLOG_minloglevel=1 \
      LD_LIBRARY_PATH=$ggnn_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
      timeout $secs ./build-device/bench/graft-bench --name $name --k 10 --batch 10000 --latency-queries 200 \
      --out "$OUT" --gt-cache /tmp/graft-bench-gt --plot --commit "${GRAFT_COMMIT:-unknown}" \
      --deadline $(( secs - 30 )) "$@" 2>&1 | tee -a "$OUT/graft-bench.log"
  }
  left=$(seconds_left)
  if [ ! -f $dense/query.u8bin ]; then
    stamp "graft-bench: no dense-SIFT set (see setup.log)"
  elif [ $left -lt 90 ]; then
    stamp "graft-bench skipped: ${left}s left before GRAFT_DEADLINE"
  else
    # The Fashion-MNIST run below gets 90 s of what is left when more than 4 min are.
    # The first index is the one the summary's ratios are to.
    gpu_index=(--index IVF4096,Flat@gpu --index IVF4096,PQ32@gpu)
    { [ -f $fgpu/faiss/libfaiss.a ] || [ $faiss115 = 1 ]; } && [ $gb_faiss_gpu = 1 ] ||
      { gpu_index=(); stamp "no FAISS GPU in graft-bench (setup.log, build.log): it runs without the @gpu indexes"; }
    gb dense-sift1m $(( left > 240 ? left - 90 : left )) --base $dense/base.u8bin --query $dense/query.u8bin \
      --index GraftGraph --index GraftFlat --index GraftGraph,PQ32 --index HNSW32 "${gpu_index[@]}" "${ggnn_index[@]}"
  fi
  left=$(seconds_left)
  fm=$root/.deps/data/fashion-mnist
  if [ $left -ge 60 ]; then
    fm_gpu=(--index IVF1024,Flat@gpu)  # 60k vectors: 1024 lists (k-means wants 39 points a list)
    { [ -f $fgpu/faiss/libfaiss.a ] || [ $faiss115 = 1 ]; } && [ $gb_faiss_gpu = 1 ] || fm_gpu=()
    gb fashion-mnist $left --base $fm/train-images-idx3-ubyte.gz --query $fm/t10k-images-idx3-ubyte.gz \
      --index GraftGraph --index HNSW32 "${fm_gpu[@]}" "${ggnn_index[@]}"
    rm -f "$OUT/recall-qps-fashion-mnist.png"
  else
    stamp "graft-bench on fashion-mnist skipped: ${left}s left before GRAFT_DEADLINE"
  fi
  stamp "graft-bench done"
fi

if [ $filter_bench = 1 ]; then
  # Filtered search (graft-bench --selectivity): graft's paths (auto, walk and exact forced) and
  # FAISS's CPU indexes with the same selector; FAISS GPU 1.7.3 takes no selector.
  fb() {  # NAME SECONDS ARGS...
    local name=$1 secs=$2; shift 2
    stamp "filtered graft-bench on $name (${secs}s at most)"
    GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=$(nproc) OPENBLAS_NUM_THREADS=1 \
      timeout $secs ./build-device/bench/graft-bench --name $name --k 10 --batch 10000 --latency-queries 0 \
      --selectivity 0.5,0.1,0.01,0.001,0.0001 --filter-modes auto,walk,exact --min-time 0.2 \
      --out "$OUT/filter-bench" --gt-cache /tmp/graft-bench-gt --commit "${GRAFT_COMMIT:-unknown}" \
      --deadline $(( secs - 20 )) "$@" 2>&1 | tee -a "$OUT/filter-bench.log"
  }
  fm=$root/.deps/data/fashion-mnist
  if [ $filter_quick = 1 ]; then
    s5=$root/.deps/data/sift5k
    fb sift5k 90 --base $s5/sift5k_base.fvecs --query $s5/sift5k_query.fvecs --sweep L=32,64 --sweep nprobe=8,32 \
      --index GraftGraph --index GraftGraph,PQ32 --index Flat --index IVF64,Flat
  else
    wait_dense_sift
    left=$(seconds_left)
    if [ -f $dense/query.u8bin ] && [ $left -ge 120 ]; then
      fb dense-sift1m $(( left > 300 ? left - 120 : left )) --base $dense/base.u8bin --query $dense/query.u8bin \
        --sweep L=32,64,128 --sweep nprobe=16,64,256 \
        --index GraftGraph --index GraftGraph,PQ32 --index Flat --index IVF4096,Flat
    else
      stamp "filtered graft-bench on dense-sift1m skipped (no set, or ${left}s left)"
    fi
  fi
  left=$(seconds_left)
  if [ $left -ge 60 ]; then
    fb fashion-mnist $left --base $fm/train-images-idx3-ubyte.gz --query $fm/t10k-images-idx3-ubyte.gz \
      --sweep L=32,64 --sweep nprobe=16,64 --index GraftGraph --index GraftGraph,PQ16 --index Flat --index IVF1024,Flat
  else
    stamp "filtered graft-bench on fashion-mnist skipped: ${left}s left"
  fi
  [ -f "$OUT/filter-bench/graft-bench.jsonl" ] && mv "$OUT/filter-bench/graft-bench.jsonl" "$OUT/filter-bench.jsonl"
  rm -rf "$OUT/filter-bench"
  stamp "filtered graft-bench done"
fi

if [ $walk_ab = 1 ]; then
  # Old walk against new, in one call: instance-to-instance noise is ~7% (bench/RESULTS.md).
  [ -n "${GRAFT_AB:-}" ] || { echo "--walk-ab needs GRAFT_AB=DIR (another commit's tree)"; exit 2; }
  # The other tree against Debian's FAISS 1.7.3 whatever this one uses (an older commit may not
  # build against 1.15): the walk does not depend on FAISS.
  cfg117=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGRAFT_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90
          -DGRAFT_FAISS_ROOT=$fr -DGRAFT_BLAS_LIBRARIES="$blas" -DGRAFT_FAISS_SOURCE_DIR="$root/.deps/faiss-src"
          -DGRAFT_DATA_DIR="$root/.deps/data")
  cmake -S "$GRAFT_AB" -B build-ab "${cfg117[@]}" >>"$OUT/build.log" 2>&1 &&
    ninja -C build-ab graft-bench search_loop >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  stamp "built ${GRAFT_AB_COMMIT:-the other tree} beside this one"
  trees="build-ab build-device"
  if [ -n "${GRAFT_AB_VARIANT:-}" ]; then
    # This tree again with extra CUDA flags (e.g. -DGRAFT_WALK_MIN_BLOCKS=5), as a third walk.
    cmake -S . -B build-variant "${cfg[@]}" -DCMAKE_CUDA_FLAGS="$GRAFT_AB_VARIANT" >>"$OUT/build.log" 2>&1 &&
      ninja -C build-variant graft-bench search_loop >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
    trees="$trees build-variant"
  fi
  wait_dense_sift
  while pgrep -f make_patches.py >/dev/null; do sleep 2; done
  setup_log "KDE-patches generation" $patches_log 2
  fm=$root/.deps/data/fashion-mnist
  log=$OUT/walk-ab.log
  # The same L values in both trees: --refine 0 where the tree's graft-bench has the adaptive sweep.
  fixed_sweep() { ./$1/bench/graft-bench --help | grep -q -- --refine && echo "--refine 0"; }
  for set in "dense-sift1m 48 16,24,32,40,48,56,64,96,128 $dense/base.u8bin $dense/query.u8bin" \
             "fashion-mnist 16 8,12,16,20,24,32,48 $fm/train-images-idx3-ubyte.gz $fm/t10k-images-idx3-ubyte.gz" \
             "kde-patches1m 48 16,24,32,48,64,96,128,192 $patches/base.u8bin $patches/query.u8bin"; do
    read -r name L sweep base query <<<"$set"
    args="--base $base --query $query"
    for tree in $trees; do
      commit=$(case $tree in build-ab) echo "${GRAFT_AB_COMMIT:-other}" ;; build-variant) echo "${GRAFT_COMMIT:-this} $GRAFT_AB_VARIANT" ;; *) echo "${GRAFT_COMMIT:-this}" ;; esac)
      stamp "$name: graft-bench of $commit" | tee -a "$log"
      ./$tree/bench/graft-bench --name $name --k 10 --batch 10000 --latency-queries 200 \
        --out /tmp/walk-ab-$tree --gt-cache /tmp/graft-bench-gt --commit "$commit" \
        --sweep "L=$sweep" $(fixed_sweep $tree) --index GraftGraph $args 2>&1 | grep -E "^graft|^GraftGraph|built in" | tee -a "$log"
      for omp in unset 1; do
        ( [ $omp = 1 ] && export OMP_NUM_THREADS=1; ./$tree/examples/search_loop $base $query GraftGraph $L 10 6 ) \
          2>&1 | grep -E "median|^search_loop" | sed "s/^/$commit: /" | tee -a "$log"
      done
    done
    for g in ${GRAFT_AB_LANES:-4 8 16 32}; do
      GRAFT_SEARCH_LANES=$g ./build-device/bench/graft-bench --name $name-lanes$g --k 10 --batch 10000 \
        --latency-queries 0 --out /tmp/walk-ab-lanes --gt-cache /tmp/graft-bench-gt \
        --sweep "L=$L" --refine 0 --index GraftGraph $args 2>&1 | grep -E "^graft" | sed "s/^/lanes $g: /" | tee -a "$log"
    done
  done
  cat /tmp/walk-ab-build-ab/graft-bench.jsonl /tmp/walk-ab-build-device/graft-bench.jsonl >"$OUT/walk-ab.jsonl" 2>/dev/null
  # Warp instructions a query (ncu's inst_executed over the chunk's 2.5k queries), both walks.
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n1)
  for tree in $trees; do
    "$ncu" --clock-control none -k regex:graph_search_kernel --launch-skip 4 --launch-count 1 \
      --metrics smsp__inst_executed.sum,gpu__time_duration.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      ./$tree/bench/graft-bench --name dense-sift1m --k 10 --batch 10000 --latency-queries 0 \
      --out /tmp/walk-ab-ncu --gt-cache /tmp/graft-bench-gt --min-time 0 --sweep "L=48" $(fixed_sweep $tree) --index GraftGraph \
      --base $dense/base.u8bin --query $dense/query.u8bin 2>&1 | grep -E "smsp__inst|gpu__time|registers|warps_active|dram__" | sed "s/^/ncu $tree: /" | tee -a "$log"
  done
  # This walk's instructions and stall samples by SASS line (ncu's source page), for the notes.
  "$ncu" --clock-control none -k regex:graph_search_kernel --launch-skip 4 --launch-count 1 \
    --section SourceCounters --section WarpStateStats -o /tmp/walk-ab-src -f \
    ./build-device/bench/graft-bench --name dense-sift1m --k 10 --batch 10000 --latency-queries 0 \
    --out /tmp/walk-ab-ncu --gt-cache /tmp/graft-bench-gt --min-time 0 --sweep "L=48" --index GraftGraph \
    --base $dense/base.u8bin --query $dense/query.u8bin >/dev/null 2>&1
  "$ncu" -i /tmp/walk-ab-src.ncu-rep --page source --csv --print-source sass 2>&1 | gzip >"$OUT/walk-sass.csv.gz"
  "$ncu" -i /tmp/walk-ab-src.ncu-rep --page details --section WarpStateStats 2>&1 | grep -E "Stall|Warp Cycles" >>"$log"
fi

if [ $search_ncu = 1 ]; then
  # One walk kernel per index: the fifth launch (a pass of 10k queries is a pipeline of three or
  # four chunks, and the sweep runs the beam twice, so that there are five). --clock-control
  # none: the clocks as they run.
  # GRAFT_NCU_SECTIONS replaces the sections (e.g. "WarpStateStats SourceCounters": stall
  # reasons and the source lines they fall on).
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -n1)
  sections=()
  for sec in ${GRAFT_NCU_SECTIONS:-SpeedOfLight LaunchStats Occupancy WarpStateStats SchedulerStats ComputeWorkloadAnalysis MemoryWorkloadAnalysis InstructionStats}; do
    sections+=(--section $sec)
  done
  indexes=(${GRAFT_NCU_INDEXES:-GraftGraph GraftGraph,FP16 GraftGraph,SQ8})
  idx=(); for index in "${indexes[@]}"; do idx+=(--index $index); done
  wait_dense_sift
  fm=$root/.deps/data/fashion-mnist
  # Each set at its recall-0.95 beam (15a7b3e's walk); KDE-patches when its images were carried.
  sets=("dense-sift1m 40 --base $dense/base.u8bin --query $dense/query.u8bin"
        "fashion-mnist 16 --base $fm/train-images-idx3-ubyte.gz --query $fm/t10k-images-idx3-ubyte.gz")
  while pgrep -f "make_patches.py $patches" >/dev/null; do sleep 2; done
  [ -f $patches/query.u8bin ] && sets+=("kde-patches1m 160 --base $patches/base.u8bin --query $patches/query.u8bin")
  for set in "${sets[@]}"; do
    read -r name L args <<<"$set"
    for index in "${indexes[@]}"; do
      [ $(seconds_left) -ge 40 ] || { stamp "ncu $name $index: skipped"; continue; }
      stamp "ncu: $name $index L=$L"
      OMP_NUM_THREADS=16 timeout $(( $(seconds_left) - 10 )) "$ncu" --clock-control none \
        -k regex:graph_search_kernel --launch-skip 4 --launch-count 1 "${sections[@]}" --print-details all \
        ./build-device/bench/graft-bench --name $name --k 10 --batch 10000 \
        --latency-queries 0 --out /tmp/graft-ncu --gt-cache /tmp/graft-bench-gt --min-time 0 \
        --sweep "L=$L,$L" --refine 0 --index $index $args >>"$OUT/search-ncu.log" 2>&1
    done
    # The same indexes with at most B blocks (4 warps each) a multiprocessor
    # (GRAFT_SEARCH_BLOCKS_PER_SM): how QPS follows the resident warps. 0: no limit.
    for b in ${GRAFT_OCCUPANCY_BLOCKS:-}; do
      [ $(seconds_left) -ge 40 ] || { stamp "occupancy $name B=$b: skipped"; continue; }
      stamp "occupancy: $name, at most $b blocks a multiprocessor"
      GRAFT_SEARCH_BLOCKS_PER_SM=$b OMP_NUM_THREADS=16 timeout $(( $(seconds_left) - 10 )) \
        ./build-device/bench/graft-bench --name $name-blocks$b --k 10 --batch 10000 --latency-queries 0 \
        --out /tmp/graft-occupancy --gt-cache /tmp/graft-bench-gt --sweep "L=$L" --refine 0 "${idx[@]}" $args \
        2>&1 | grep -E "^graft " | sed "s/^/blocks $b: /" | tee -a "$OUT/search-ncu.log"
    done
  done
fi

if [ $storage_bench = 1 ]; then
  # The storages of one graph index against each other in one run (issue 21's targets: QPS at
  # recall@10 >= 0.95, SQ8 >= 2x and FP16 >= 1.6x FP32's, GPU bytes per vector); the first index
  # is the one the summary's ratios are to.
  wait_dense_sift
  gbs() {  # NAME SECONDS ARGS...
    local name=$1 secs=$2; shift 2
    stamp "graft-bench (storages) on $name (${secs}s at most)"
    GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=16 OPENBLAS_NUM_THREADS=1 \
      timeout $secs ./build-device/bench/graft-bench --name $name --k 10 --batch 10000 --latency-queries 0 \
      --out "$OUT" --gt-cache /tmp/graft-bench-gt --commit "${GRAFT_COMMIT:-unknown}" \
      --sweep "L=16,24,32,48,64,96,128,256" --deadline $(( secs - 20 )) "$@" 2>&1 | tee -a "$OUT/graft-bench-storage.log"
  }
  left=$(seconds_left)
  if [ -f $dense/query.u8bin ] && [ $left -ge 60 ]; then
    gbs dense-sift1m $(( left > 180 ? left - 60 : left )) --base $dense/base.u8bin --query $dense/query.u8bin \
      --index GraftGraph --index GraftGraph,FP16 --index GraftGraph,SQ8 --index GraftGraph,PQ32 \
      --index GraftGraph,OPQ32,PQ32
  else
    stamp "graft-bench (storages) on dense-sift1m skipped: no set (setup.log) or ${left}s left"
  fi
  left=$(seconds_left)
  fm=$root/.deps/data/fashion-mnist
  if [ $left -ge 40 ]; then
    gbs fashion-mnist $left --base $fm/train-images-idx3-ubyte.gz --query $fm/t10k-images-idx3-ubyte.gz \
      --index GraftGraph --index GraftGraph,FP16 --index GraftGraph,SQ8 --index GraftGraph,PQ28 \
      --index GraftGraph,OPQ28,PQ28
  else
    stamp "graft-bench (storages) on fashion-mnist skipped: ${left}s left before GRAFT_DEADLINE"
  fi
  # The compressed rows are 2-4x shorter: fewer lanes a distance (GRAFT_SEARCH_LANES, here 4 at
  # d = 128 against the default 8) may suit them; console only (records under /tmp).
  left=$(seconds_left)
  if [ -f $dense/query.u8bin ] && [ $left -ge 60 ]; then
    stamp "lanes: FP16 and SQ8 with 4 lanes a distance on dense-sift1m (${left}s at most)"
    GRAFT_SEARCH_LANES=4 GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=16 timeout $left \
      ./build-device/bench/graft-bench --name dense-sift1m-lanes4 --k 10 --batch 10000 \
      --latency-queries 0 --out /tmp/graft-lanes --gt-cache /tmp/graft-bench-gt \
      --sweep "L=32,48,64,96" --refine 0 --deadline $(( left - 10 )) --base $dense/base.u8bin \
      --query $dense/query.u8bin --index GraftGraph --index GraftGraph,FP16 --index GraftGraph,SQ8 \
      2>&1 | tee -a "$OUT/graft-bench-storage.log"
  fi
  stamp "graft-bench (storages) done"
fi

if [ $bench_shards = 1 ]; then
  # Issue 33 in one call (docs/multi-gpu.md, "Measuring"): graft-bench on the 1M dense-SIFT set
  # grown by --scale (cell-permuted copies, each value jittered so that no two are equal; recall
  # counts ties at the k-th distance), batch 10k, k = 10, one run id for every step:
  #   1. 10M: GraftGraph on one GPU, sharded over the N GPUs ("gpus=0-(N-1)") and replicated on
  #      them (",replicas"): build time (every device's graph, before the first search returns)
  #      and QPS by recall;
  #   2. FAISS's IVF16384,Flat at 10M (GRAFT_SHARDS_FAISS_SCALES, e.g. "10 40") on one GPU,
  #      sharded (@gpus=N) and replicated (@gpus=N,replicas), one k-means for the three at each
  #      size, once the FAISS GPU build is done
  #      (background, started at the top; graft-bench is relinked against it in the background
  #      while the GPUs run step 1 on a copy of the graft-only binary);
  #   3. step 1 at the sizes of GRAFT_SHARDS_SCALES (default "40" with 2 GPUs: 40M, the largest
  #      whose one-GPU build is one GRNND piece; none with 4, whose large size is step 4) -- before
  #      step 2 when FAISS is not built yet;
  #   4. with 4+ GPUs: an index larger than one GPU, GraftGraph sharded in memory over the GPUs
  #      against GraftGraph,PQ32,ooc (out-of-core) on one GPU, at the size C (millions) whose FP32
  #      graph index (768 B a vector) needs 1.1x one device's memory (GRAFT_SHARDS_BIG=C
  #      overrides, 0 skips; skipped when the host has under 1.6 KB a vector).
  # A step starts only when GRAFT_DEADLINE leaves it its time (graft-bench's --deadline and a
  # timeout end it inside that). NCCL is not used (graft's devices share nothing; FAISS 1.7.3's
  # multi-GPU indexes run one thread a GPU); NCCL_NVLS_ENABLE=0 all the same. Then
  # scripts/shards_summary.py: ratios to one GPU (same L, and at equal recall), the targets,
  # per-device memory. Into $OUT: shards.log, shards.jsonl, recall-qps-multi-gpu-*.svg.
  export NCCL_NVLS_ENABLE=0
  wait_dense_sift
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU")
  gpu_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2>/dev/null | head -n1)
  host_mib=$(awk '/MemTotal/ {print int($2 / 1024)}' /proc/meminfo)
  stamp "sharded benchmark: $ngpu GPU(s) of ${gpu_mib:-?} MiB, ${host_mib} MiB host memory, $(nproc) cores: $(nvidia-smi --query-gpu=index,name --format=csv,noheader | tr '\n' ';')" | tee -a "$OUT/shards.log"
  last=$(( ngpu >= 4 ? 3 : ngpu >= 2 ? 1 : 0 )) N=$(( ngpu >= 4 ? 4 : ngpu >= 2 ? 2 : 1 ))
  spread=$([ $ngpu -ge 2 ] && echo "gpus=0-$last" || echo "gpus=0,0")
  [ $ngpu -ge 2 ] || stamp "one GPU: its rows and two shards / replicas on it (the ratios need nvidia-h100-x2 or larger)"
  gidx=${GRAFT_SHARDS_INDEX:-GraftGraph}
  rid=shards-$(date -u +%Y%m%dT%H%M%SZ)
  # Records straight into $OUT (a call cut short by the tool keeps what it measured).
  sdir="$OUT/shards"
  rm -rf "$sdir" && mkdir -p "$sdir"
  gbin=/tmp/graft-bench-graft
  cp build-device/bench/graft-bench $gbin
  faiss_ready=/tmp/graft-shards-faiss
  rm -f $faiss_ready.ok $faiss_ready.failed
  steps=" ${GRAFT_SHARDS_STEPS:-10 faiss scales big} "
  [[ $steps == *" faiss "* ]] || GRAFT_SHARDS_FAISS=0
  if [ "${GRAFT_SHARDS_FAISS:-1}" = 1 ] && [ $faiss115 = 1 ]; then
    touch $faiss_ready.ok  # graft-bench already links FAISS 1.15 with its GPU part
  elif [ "${GRAFT_SHARDS_FAISS:-1}" = 1 ]; then
    ( while pgrep -f device_faiss_gpu.sh >/dev/null; do sleep 3; done
      if [ -f $fgpu/faiss/libfaiss.a ] &&
         cmake -S . -B build-device "${cfg[@]}" -DGRAFT_FAISS_GPU_DIR=$fgpu -DGRAFT_FAISS_GPU_SRC=$fgpu-src >>"$OUT/build.log" 2>&1 &&
         nice -n 10 ninja -C build-device -j4 graft-bench >>"$OUT/build.log" 2>&1; then
        touch $faiss_ready.ok
      else
        touch $faiss_ready.failed
      fi ) &
  else
    touch $faiss_ready.failed
  fi
  gbs() {  # WHAT SECONDS BINARY ARGS...: one graft-bench run into $sdir, logged
    local what=$1 secs=$2 bin=$3; shift 3
    stamp "$what (${secs}s at most)" | tee -a "$OUT/shards.log"
    GRAFT_DEVICE_NAME="$gpu_name x$ngpu" OMP_NUM_THREADS=$(nproc) OPENBLAS_NUM_THREADS=1 \
      timeout $secs $bin --base $dense/base.u8bin --query $dense/query.u8bin --name dense-sift1m --k 10 \
      --batch ${GRAFT_SHARDS_BATCHES:-10000} --latency-queries 0 --min-time 0.3 --out "$sdir" \
      --gt-cache /tmp/graft-bench-gt --commit "${GRAFT_COMMIT:-unknown}" --run-id $rid \
      --deadline $(( secs - 30 )) "$@" 2>&1 | tee -a "$OUT/shards.log"
    nvidia-smi --query-gpu=index,memory.used --format=csv,noheader >>"$OUT/shards.log" 2>&1
  }
  sweep_L=(--sweep L=24,32,48,64,96,128,192,256)
  graft_step() {  # C NEED_SECONDS: step 1 / 3 at C million vectors
    local left=$(seconds_left)
    [ $left -ge $2 ] || { stamp "--scale $1 (graft) skipped: ${left}s left, it needs ~$2" | tee -a "$OUT/shards.log"; return; }
    gbs "graft at ${1}M: 1 GPU, $spread, $spread,replicas" $(( left - 20 )) $gbin --scale $1 "${sweep_L[@]}" \
      --index "$gidx" --index "$gidx,$spread" --index "$gidx,$spread,replicas"
  }
  scales=${GRAFT_SHARDS_SCALES-$([ $ngpu -eq 2 ] && echo 40)}
  scales_done=0
  scale_steps() { for c in $scales; do graft_step $c $(( 60 + 5 * c )); done; scales_done=1; }
  faiss_step() {
    if [ ! -f $faiss_ready.ok ] && [ ! -f $faiss_ready.failed ]; then
      stamp "waiting for FAISS GPU and graft-bench linked with it" | tee -a "$OUT/shards.log"
      while [ ! -f $faiss_ready.ok ] && [ ! -f $faiss_ready.failed ] && [ $(seconds_left) -gt 100 ]; do sleep 3; done
    fi
    setup_log "FAISS GPU build" $faiss_log 3
    local left=$(seconds_left)
    if [ ! -f $faiss_ready.ok ]; then
      stamp "no FAISS GPU peer: its build or graft-bench's link failed or is not done (setup.log, build.log)" | tee -a "$OUT/shards.log"
    else
      local f=(--index IVF16384,Flat@gpu) c
      [ $N -ge 2 ] && f+=(--index IVF16384,Flat@gpus=$N --index IVF16384,Flat@gpus=$N,replicas)
      for c in ${GRAFT_SHARDS_FAISS_SCALES:-10}; do
        left=$(seconds_left)
        [ $left -ge 100 ] || { stamp "FAISS at ${c}M skipped: ${left}s left" | tee -a "$OUT/shards.log"; continue; }
        gbs "FAISS IVF16384,Flat at ${c}M: 1 GPU, @gpus=$N, @gpus=$N,replicas" $(( left - 20 )) ./build-device/bench/graft-bench \
          --scale $c --sweep nprobe=16,32,64,128,256 "${f[@]}"
      done
    fi
  }
  big_step() {
    local c=${GRAFT_SHARDS_BIG-$([ $ngpu -ge 4 ] && [ -n "$gpu_mib" ] && echo $(( (gpu_mib * 1048576 / 768 * 11 / 10 + 999999) / 1000000 )) || echo 0)}
    [ "$c" -gt 0 ] 2>/dev/null || return 0
    # ~2 s a million (measured rates: GRNND in pieces and the host's merges for the out-of-core
    # build dominate) and ~1.6 KB a vector of host memory at its peak (the base, the out-of-core
    # index while it builds).
    local left=$(seconds_left) need_mib=$(( c * 1600 )) need_s=$(( 2 * c + 30 ))
    if [ $need_mib -gt $host_mib ]; then
      stamp "${c}M (larger than one GPU) skipped: ~${need_mib} MiB of host memory needed, ${host_mib} here" | tee -a "$OUT/shards.log"
    elif [ $left -lt $need_s ]; then
      stamp "${c}M (larger than one GPU) skipped: ${left}s left, it needs ~${need_s}" | tee -a "$OUT/shards.log"
    else
      gbs "${c}M, larger than one GPU: GraftGraph over gpus=0-$last in memory vs GraftGraph,PQ32,ooc on one GPU" \
        $(( left - 20 )) $gbin --scale $c --sweep L=32,48,64,96,128,192,256 \
        --index "GraftGraph,gpus=0-$last" --index "GraftGraph,PQ32,ooc"
    fi
  }
  # The FAISS GPU build (every core, in the background) is paused while graft is timed: a
  # compile on every core beside a timed search measures the compile.
  faiss_build_pause() {  # STOP / CONT
    local pid
    for pid in $(pgrep -f device_faiss_gpu.sh); do kill -$1 -- -$pid 2>/dev/null; done
  }
  timed() { faiss_build_pause STOP; "$@"; faiss_build_pause CONT; }
  [[ $steps == *" 10 "* ]] && timed graft_step 10 90
  [[ $steps == *" scales "* ]] || scales_done=1
  [ -f $faiss_ready.ok ] || [ -f $faiss_ready.failed ] || [ $scales_done = 1 ] || timed scale_steps
  [[ $steps == *" faiss "* ]] && faiss_step
  [ $scales_done = 1 ] || timed scale_steps
  [[ $steps == *" big "* ]] && timed big_step
  mv "$sdir/graft-bench.jsonl" "$OUT/shards.jsonl" 2>/dev/null && rmdir "$sdir"
  python3 scripts/shards_summary.py "$OUT/shards.jsonl" --run-id $rid --charts "$OUT" ${gpu_mib:+--gpu-mib $gpu_mib} \
    2>&1 | tee -a "$OUT/shards.log"
  stamp "sharded benchmark done"
fi

if [ $bench_living = 1 ]; then
  ninja -C build-device bench_living >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  wait_dense_sift
  for c in ${GRAFT_LIVING_SCALES:-1 10}; do
    left=$(seconds_left)
    [ $left -ge 120 ] || { stamp "bench_living --scale $c skipped: ${left}s left before GRAFT_DEADLINE"; continue; }
    stamp "living-index benchmark, dense-SIFT x$c (${left}s at most)"
    GRAFT_DEVICE_NAME="$gpu_name" OMP_NUM_THREADS=$(nproc) OPENBLAS_NUM_THREADS=1 timeout $left \
      ./build-device/bench/studies/bench_living --base $dense/base.u8bin --query $dense/query.u8bin \
      --name dense-sift1m --scale $c --nq 10000 --hnsw-threads 16 --out "$OUT/living.jsonl" \
      --commit "${GRAFT_COMMIT:-unknown}" --deadline $(( left - 30 )) \
      $([ $c = 1 ] && [ -n "${GRAFT_LIVING_INSERT_L:-}" ] && echo --insert-L $GRAFT_LIVING_INSERT_L) 2>&1 | tee -a "$OUT/bench_living.log"
  done
  stamp "living-index benchmark done"
fi

if [ $bench = 1 ]; then
  link_faiss_gpu
  ninja -C build-device bench_exact >>"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  stamp "benchmark"
  args=(--out "$OUT/exact.jsonl" --commit "${GRAFT_COMMIT:-unknown}" --run-id "exact-$(date -u +%Y%m%dT%H%M%SZ)")
  [ $quick = 1 ] && args+=(--quick)
  [ $focus = 1 ] && args+=(--focus)
  if [ $quick = 0 ]; then
    wait_dense_sift
    [ -f $dense/query.u8bin ] && args+=(--dense-sift $dense)
    if pgrep -f "make_dense_sift.py $smooth" >/dev/null; then
      stamp "waiting for the smooth-SIFT set"
      while pgrep -f "make_dense_sift.py $smooth" >/dev/null; do sleep 2; done
    fi
    setup_log "smooth-SIFT generation" $smooth_log 2
    [ -f $smooth/query.u8bin ] && args+=(--smooth-sift $smooth)
  fi
  OMP_NUM_THREADS=$(nproc) timeout $(seconds_left) ./build-device/bench/studies/bench_exact "${args[@]}" 2>&1 | tee "$OUT/bench_exact.log"
  rid=$(head -n1 "$OUT/exact.jsonl" | sed 's/.*"run_id":"\([^"]*\)".*/\1/')
  PYTHONUNBUFFERED=1 python3 bench/studies/torch_exact.py --out "$OUT/exact.jsonl" --run-id "$rid" \
    --commit "${GRAFT_COMMIT:-unknown}" $([ $quick = 1 ] && echo --quick) $([ $focus = 1 ] && echo --focus) \
    2>&1 | tee "$OUT/torch_exact.log"
  stamp "done"
fi
[ $test_status = 0 ] || stamp "FAILED: $failed test(s) failed (see above)"
exit $test_status
