#!/usr/bin/env bash
# tests: CTest on build-device, every label including gpu and soak (GRAFT_TESTS=REGEX: only the
# tests whose names match, ctest -R; GRAFT_SOAK_SECONDS, default 300 here: the soak's minutes).
# Four tests at a time, each with a quarter of the cores: OpenMP teams of nproc threads in four
# processes at once spin against each other (tests/CMakeLists.txt also sets passive waits).
# Prints the tests' lines and "tests: N passed, N failed, N skipped" (the driver's SUMMARY line);
# a failure shows its output and fails the job, and the later jobs still run.
# Writes to $OUT: ctest.log (ctest -V: every test's own output, passed or not).
# Time: ~2-5 min on nvidia-h100 (the soak's 300 s run beside the others; 39 tests, 100-300 s in
# bench/logs/ctest-*.log and device-*.log); nvidia-h200 kinds not measured.
# targets: all
. "$(dirname "$0")/../lib.sh"
OMP_NUM_THREADS=$(( $(nproc) / 4 > 0 ? $(nproc) / 4 : 1 )) GRAFT_SOAK_SECONDS=${GRAFT_SOAK_SECONDS:-300} \
  ctest --test-dir build-device --output-on-failure -V -j4 ${GRAFT_TESTS:+-R "$GRAFT_TESTS"} >"$OUT/ctest.log" 2>&1
grep -E "Test +#|tests passed|Skipped|Failed" "$OUT/ctest.log" | head -40
passed=$(grep -c " Passed " "$OUT/ctest.log")
failed=$(grep -cE "\*\*\*Failed|\*\*\*Exception|\*\*\*Timeout|Not Run" "$OUT/ctest.log")
skipped=$(grep -c "\*\*\*Skipped" "$OUT/ctest.log")
echo "$passed passed, $failed failed, $skipped skipped" >"$GRAFT_STATE/tests"
stamp "tests: $(cat "$GRAFT_STATE/tests")"
[ "$failed" = 0 ] && exit 0
grep -B5 -A40 "Failed\|failed" "$OUT/ctest.log" | tail -80
exit 1
