#!/usr/bin/env bash
# Runs part of the sanitizer tree (GRAFT_SANITIZE_TREE) for the main tree's CTest:
#   run_tree.sh suite LABEL            that tree's CTest suite LABEL under ASan + UBSan + LSan
#   run_tree.sh fuzz TARGET SECONDS    the regression inputs of TARGET once, then libFuzzer for
#                                      SECONDS from its seed corpus; any crash fails the test
# Exit 77 (SKIPPED) where the tree or the program was not built.
set -uo pipefail
tree=${GRAFT_SANITIZE_TREE:?}
src=${GRAFT_SOURCE_DIR:?}
here=$src/tests/sanitize
if [ ! -f "$tree/CMakeCache.txt" ]; then
  echo "no sanitizer tree at $tree (scripts/setup.sh builds it where clang-14 is installed): skipped"
  exit 77
fi
export GRAFT_DATA_DIR=${GRAFT_DATA_DIR:-$GRAFT_DATA_DIR_DEFAULT}
# Leaks are errors; lsan.supp names the uninstrumented libraries' own, each explained there.
# intercept_tls_get_addr=0: up to LLVM 16 (clang-14 here) the runtime's __tls_get_addr interceptor
# takes a dynamic TLS block whose start falls at a certain offset in its page for a pre-2.25 glibc
# header and reads past it, and the leak check's stop-the-world tracer dies at exit ("Tracer caught
# signal 11", after test_living had passed every check; google/sanitizers#1353, Mudlet#9930).
# Off, the check does not scan dynamic TLS as roots: memory held only there would be reported as
# a leak, never hidden (graft's thread-locals are message buffers, no pointers).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1:intercept_tls_get_addr=0}
export LSAN_OPTIONS=suppressions=$here/lsan.supp:print_suppressions=0:intercept_tls_get_addr=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OPENBLAS_NUM_THREADS=1
# Instrumented code is slower between barriers: threads that spin waiting there take the cores
# the working ones need (clang's libomp: KMP_BLOCKTIME).
export OMP_WAIT_POLICY=PASSIVE KMP_BLOCKTIME=0
# The tests' largest data sets are left out where they offer it (test_graph_cpu's 20k x 784 build).
export GRAFT_TEST_QUICK=1

case $1 in
suite)
  exec ctest --test-dir "$tree" -L "^$2\$" --output-on-failure ;;
fuzz)
  target=$2 secs=$3
  bin=$tree/tests/fuzz/$target
  [ -x "$bin" ] || { echo "$bin not built: skipped"; exit 77; }
  short=${target#fuzz_}
  corpus=$tree/fuzz-corpus/$short
  seeds=$tree/fuzz-seeds
  if [ ! -d "$seeds/$short" ]; then
    rm -rf "$seeds" && "$tree/tests/fuzz/make_seeds" "$seeds" || exit 1
  fi
  mkdir -p "$corpus" "$tree/fuzz-artifacts"
  cp -n "$seeds/$short"/* "$corpus"/
  reg=$src/tests/fuzz/regressions/$short
  if [ -d "$reg" ] && [ -n "$(ls -A "$reg")" ]; then
    echo "== $target: regression inputs"
    "$bin" -rss_limit_mb=2048 "$reg"/* || exit 1
  fi
  echo "== $target: fuzzing ${secs}s"
  log=$tree/fuzz-artifacts/$target.log
  # -max_len covers the largest seed (a graph + PQ record of 300 x 8); -timeout flags a hang.
  "$bin" -max_total_time="$secs" -max_len=65536 -timeout=20 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$tree/fuzz-artifacts/$target-" "$corpus" 2>&1 |
    tee "$log" | grep -E '^(#[0-9]+ *(INITED|DONE)|Done|stat::|==[0-9]+==ERROR|SUMMARY)|^ *#[0-9]+ in '
  rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { tail -n 60 "$log"; exit "$rc"; }
  exit 0 ;;
*)
  echo "usage: run_tree.sh suite LABEL | fuzz TARGET SECONDS" >&2; exit 2 ;;
esac
