#!/usr/bin/env bash
# sanitize: compute-sanitizer memcheck and racecheck on the quick GPU cases (GRAFT_TEST_QUICK=1):
# out-of-bounds / misaligned accesses and shared-memory races. test_concurrency: 16 host threads on
# one GPU index of each type (2 s of mixing per index); test_gpu_oom: every allocation failed once,
# with memcheck's leak check on the device. GRAFT_SANITIZE_TESTS="test_gpu_bang ..." picks the
# tests; each run gets what is left before GRAFT_DEADLINE (none under 30 s).
# Writes to $OUT: sanitize.log (every run's output and exit status).
# Time: 20-60 s a test on nvidia-h100; racecheck on test_concurrency and test_gpu_storage takes
# 4-5 min (bench/logs/sanitize-*.log, device-5e689ee-h100.log); nvidia-h200 kinds not measured.
# targets: all
. "$(dirname "$0")/../lib.sh"
status=0
quick="test_gpu_exact test_gpu_exact_int8 test_gpu_grnnd test_gpu_search test_gpu_bang test_gpu_filter
       test_concurrency test_gpu_oom"
for t in ${GRAFT_SANITIZE_TESTS:-$quick}; do
  bin=$(find ./build-device/tests -name "$t" -type f -perm -u+x | head -n1)
  if [ -z "$bin" ]; then
    echo "=== $t: not built" >>"$OUT/sanitize.log"
    stamp "compute-sanitizer $t: not built"
    continue
  fi
  for tool in memcheck racecheck; do
    left=$(seconds_left)
    if [ "$left" -lt 30 ]; then
      stamp "compute-sanitizer $tool $t: skipped, ${left}s left before GRAFT_DEADLINE"
      continue
    fi
    leak=()
    [ $tool = memcheck ] && [ "$t" = test_gpu_oom ] && leak=(--leak-check=full)
    GRAFT_TEST_QUICK=1 GRAFT_STRESS_SECONDS=2 OPENBLAS_NUM_THREADS=1 timeout "$left" \
      compute-sanitizer --tool $tool "${leak[@]}" --error-exitcode 9 "$bin" >/tmp/sanitize.log 2>&1
    rc=$?
    [ $rc = 0 ] || status=1
    { echo "=== $tool $t: exit $rc"; cat /tmp/sanitize.log; } >>"$OUT/sanitize.log"
    stamp "compute-sanitizer $tool $t: exit $rc ($(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" /tmp/sanitize.log | tail -n1))"
  done
done
exit $status
