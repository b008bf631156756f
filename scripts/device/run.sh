#!/usr/bin/env bash
# The GPU machine's door. Runs the jobs named on the command line (scripts/device/jobs/NAME.sh)
# in the order of the list below, after starting, in the background, the data sets and peer
# builds they need, so that those overlap the build; prints each job's time and a SUMMARY line.
#   bash scripts/device/run.sh --help                     # the jobs, one line each
#   bash scripts/device/run.sh build tests graft-bench    # GRAFT_DRY_RUN=1: the steps, nothing run
# A job's header says what it does, what it writes to $OUT, how long it takes, and what it
# needs: "# targets:" (build-device targets; all: every one), "# needs:" (background jobs it
# waits for), "# requires:" (environment variables it cannot run without). Adding a job: the file
# jobs/NAME.sh and its line in JOBS. scripts/device/lib.sh holds what the jobs share.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# NAME | what it does. Jobs run in this order whatever the command line's; the background jobs
# (data sets and peer builds: "# background: yes") start before the build, and their own turn,
# last, waits for them and copies their logs into setup.log.
JOBS="
build               | configure + build for sm_90 (named: every target; else only the named jobs' targets)
install-check       | the package build (CMake's default architectures), installed, tests/consumer run on the GPU
tests               | every CTest label, gpu included (GRAFT_TESTS=REGEX: those tests alone)
sanitize            | compute-sanitizer memcheck + racecheck on the quick GPU tests (GRAFT_SANITIZE_TESTS)
study-build         | bench_build: GRNND against RNN-Descent, HNSW, NSG builds
study-pieces        | bench_build with GRNND in pieces, against the whole GRNND and CPU builds
study-search        | bench_search: the walk against its floor, its ablations, the HNSW export
study-search-quick  | study-search on sift5k only
walk-floor          | bench_search --replay-only: the walk's kernel time against its memory floor, three 1M sets
study-bang          | bench_bang: graph + PQ, in-memory vs out-of-core (GRAFT_BANG_*: scale, A/B, repeat)
study-bang-quick    | study-bang on sift5k only
graft-bench         | graft-bench on dense-SIFT 1M + Fashion-MNIST, FAISS GPU and GGNN beside graft
filter-bench        | filtered search by selectivity (50% .. 0.01%), dense-SIFT 1M + Fashion-MNIST
filter-bench-quick  | filter-bench on sift5k + Fashion-MNIST
walk-ab             | the walk against another commit's tree in one call (GRAFT_AB, GRAFT_AB_COMMIT)
search-ncu          | Nsight Compute on one walk kernel of GraftGraph, ,FP16, ,SQ8 on three sets
graft-bench-storage | graft-bench of the graph index's storages (FP32, FP16, SQ8, PQ, OPQ+PQ)
graph-quality       | GRNND build variants on three 1M sets: graph recall, rounds, QPS (GRAFT_GQ_*)
cagra               | CAGRA (cuVS, carried in .deps/cagra) beside graft and FAISS on three 1M sets, batch 10k / 100 / 1
shards              | several GPUs: sharded and replicated graft and FAISS at 10M+ (docs/multi-gpu.md)
living              | bench_living: inserts, removals, consolidation at 1M and 10M
mpi                 | 2 MPI ranks with a GPU each against one process on gpus=0-1 (docs/mpi.md; a 2-GPU kind)
study-exact         | bench_exact + torch: exact k-NN on every path, all sets
study-exact-quick   | study-exact, small sets only
study-exact-focus   | study-exact at its targets only, FAISS GPU beside it
dense-sift          | the 1M dense-SIFT set, made in the background into /tmp (~1 min)
smooth-sift         | the 1M smooth-image SIFT set (duplicates kept), made in the background
kde-patches         | the 1M KDE-patches set (d = 192), made in the background
photo-sift          | the real photo-sift10m set and its 1M subset (d = 128), made in the background
photo-sift40m       | photo-sift40m (grid step 2) and its 10M and 1M subsets, made in the background
faiss115            | FAISS 1.15 with its GPU part, built first; graft and its peers then use it
faiss-gpu           | stock FAISS 1.7.3 with its GPU part, built in the background (~5 min)
ggnn                | GGNN 0.9.1, built in the background (~30 s)
cuvs                | cuVS trimmed to CAGRA, built in the background when .deps/cagra is not carried
"
usage() {
  cat <<EOF
usage: bash scripts/device/run.sh [--no-tests] [--no-faiss-gpu] [--dry-run] JOB...
Jobs (they run in this order; the header of scripts/device/jobs/JOB.sh says more):
$(awk -F' *[|] *' 'NF == 2 { printf "  %-20s %s\n", $1, $2 }' <<<"$JOBS")
Options: --no-tests drops the tests job; --no-faiss-gpu the FAISS GPU build the jobs would start;
--dry-run (or GRAFT_DRY_RUN=1) prints the steps and runs nothing.
Environment: OUT (outputs, default device-out/), GRAFT_COMMIT (the commit's hash, for the
records), GRAFT_DEADLINE (seconds: benchmarks stop so that the call ends by then), GRAFT_TESTS,
GRAFT_BUILD_TARGETS (build these instead), GRAFT_PREBUILT=1 (no build: lib.sh); each job's own.
EOF
}
names=$(sed -n 's/^\([a-z0-9-]*\) *|.*/\1/p' <<<"$JOBS")
field() { sed -n "s/^# $2: *//p" "$here/jobs/$1.sh" | head -n1; }   # JOB KEY: its header field

named=" " no_tests=0 no_fgpu=0 dry=${GRAFT_DRY_RUN:-0}
for a in "$@"; do
  case $a in
    -h|--help) usage; exit 0 ;;
    --no-tests) no_tests=1 ;;
    --no-faiss-gpu) no_fgpu=1 ;;
    --dry-run) dry=1 ;;
    *) grep -qx -- "$a" <<<"$names" && [ -f "$here/jobs/$a.sh" ] ||
         { echo "unknown job or option: $a (bash scripts/device/run.sh --help)" >&2; exit 2; }
       named+="$a " ;;
  esac
done
[ $no_tests = 1 ] && named=${named/ tests / }
[ "$named" != " " ] || { usage >&2; exit 2; }

# What the named jobs need: background jobs, build targets, environment.
bg=" " targets=" " all=0
[[ $named == *" build "* ]] && all=1
for j in $named; do
  [ "$(field "$j" background)" = yes ] && bg+="$j "
  for b in $(field "$j" needs); do [[ $bg == *" $b "* ]] || bg+="$b "; done
  for t in $(field "$j" targets); do [ "$t" = all ] && all=1; [[ $targets == *" $t "* ]] || targets+="$t "; done
  for v in $(field "$j" requires); do
    [ -n "${!v:-}" ] || { echo "$j needs $v set (scripts/device/jobs/$j.sh)" >&2; exit 2; }
  done
done
# FAISS 1.15 replaces the 1.7.3 GPU build as the peers' FAISS.
if [ $no_fgpu = 1 ] || [[ $bg == *" faiss115 "* ]]; then bg=${bg/ faiss-gpu / }; fi
[ $all = 1 ] && targets=""; [ -n "${GRAFT_BUILD_TARGETS:-}" ] && targets=" $GRAFT_BUILD_TARGETS "
[ "$targets" != " " ] && [ -z "${GRAFT_PREBUILT:-}" ] && named+="build "
run=() starts=()
for j in $names; do
  [[ $named == *" $j "* ]] && run+=("$j")
  [[ $bg == *" $j "* ]] && starts+=("$j")
done
export GRAFT_JOBS=" ${run[*]} " GRAFT_BG="$bg" GRAFT_TARGETS="$targets"

if [ "$dry" = 1 ]; then
  echo "dry run: jobs: ${run[*]}"
  for j in "${starts[@]}"; do echo "start $j (background: bash scripts/device/jobs/$j.sh start)"; done
  for j in "${run[@]}"; do
    case $j in
      build) echo "run build (targets: $([ -z "$targets" ] && echo all || xargs <<<"$targets"))" ;;
      *) echo "run $j$([[ $bg == *" $j "* ]] && echo " (waits for it)")" ;;
    esac
  done
  exit 0
fi

export GRAFT_T0=${GRAFT_T0:-$(date +%s)}
# The carry takes 8 paths: a call may bring its .deps parts in one folder, .deps/carry; parts
# xz-compressed to fit 64 MiB: FOLDER.tar.xz unpacks into .deps/FOLDER, a file F.xz becomes F.gz.
[ -d "$here/../../.deps/carry" ] && cp -rlf "$here/../../.deps/carry/." "$here/../../.deps/"
for t in "$here"/../../.deps/*.tar.xz; do [ -f "$t" ] && mkdir -p "${t%.tar.xz}" && tar -C "${t%.tar.xz}" -xJf "$t"; done
find "$here/../../.deps/data" -name '*.xz' | while read -r f; do [ -f "${f%.xz}.gz" ] || xz -dc "$f" | gzip -1 >"${f%.xz}.gz"; done
# shellcheck source=lib.sh
. "$here/lib.sh"
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1)
stamp "GPU: ${gpu:-none}; $(nvcc --version | tail -n1); $(cmake --version | head -n1)"
faiss_deb || exit 1
if wanted mpi; then mpi_env || exit 1; fi   # before the build: CMake finds MPI then
stamp "BLAS: $GRAFT_BLAS"
# A background job that cannot start (faiss115 builds in the foreground) ends the call.
for j in "${starts[@]}"; do bash "$here/jobs/$j.sh" start || { stamp "$j did not start"; exit 1; }; done

times=() status=0
for j in "${run[@]}"; do
  s=$(date +%s)
  stamp "== $j"
  bash "$here/jobs/$j.sh"
  rc=$?
  times+=("$j $(( $(date +%s) - s ))s$([ $rc = 0 ] || echo " (exit $rc)")")
  if [ $rc != 0 ]; then
    status=1
    # Nothing runs without the build; any other failure leaves the later jobs their turn
    # (device time is too scarce to spend a call on one failure).
    [ "$j" = build ] && break
  fi
done
stamp "SUMMARY: GPU ${gpu:-none} | tests: $(cat "$GRAFT_STATE/tests" 2>/dev/null || echo not run)"
list=$(IFS=,; echo "${times[*]}")
stamp "times: ${list//,/, }"
[ $status = 0 ] || stamp "FAILED: $(printf '%s\n' "${times[@]}" | grep -c exit) job(s) (see above)"
exit $status
