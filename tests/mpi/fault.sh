#!/usr/bin/env bash
# The fault test (label mpi): test_mpi_fault under mpirun with 2 ranks, a rank stalled and a rank
# killed, each run bounded by an outer timeout: a hang fails the test, never stalls CI.
#   fault.sh PROGRAM MPIEXEC [mpirun flags...]
# stall: rank 0 must get a FAISS error within the index's timeout (2 s) and the next call at once;
# stall4: the same with the search pipelined in 4 chunks.
# die:   rank 0 gets an error within the timeout, or mpirun ends the job saying which rank died
#        (Open MPI's runtime kills the job when a process dies), within the timeout + 5 s.
set -uo pipefail
prog=$1; shift
timeout_s=2
fail=0
for mode in stall stall4 die; do
  out=$(timeout 60 "$@" -np 2 "$prog" "$mode" 2>&1)
  rc=$?
  end=$(date +%s.%N)
  if [ "$rc" = 124 ]; then
    echo "FAIL $mode: the job hung (killed after 60 s)"; echo "$out"; fail=1; continue
  fi
  case $mode in
  stall|stall4)
    line=$(grep '^EVENT error .* rank 0 ' <<<"$out")
    again=$(grep '^EVENT again .* rank 0 ' <<<"$out")
    after=$(sed -nE 's/.* after ([0-9.]+) s:.*/\1/p' <<<"$line")
    if [ -z "$after" ] || grep -q ' rc 0 ' <<<"$line" || grep -q ' rc 0 ' <<<"$again" ||
       ! awk -v a="$after" -v t=$timeout_s 'BEGIN { exit !(a >= 0.9 * t && a <= t + 3) }'; then
      echo "FAIL $mode: rank 0 got no error within ${timeout_s} s (+3), or a later call passed"
      echo "$out"; fail=1; continue
    fi
    echo "$mode: rank 0's error after $after s (timeout $timeout_s s): $(sed -E 's/.*: (GraftIndexMPI::search:)/\1/' <<<"$line")"
    echo "$mode: the next call failed after $(sed -nE 's/.* after ([0-9.]+) s:.*/\1/p' <<<"$again") s"
    ;;
  die)
    died=$(sed -nE 's/^EVENT died ([0-9.]+) rank 1/\1/p' <<<"$out")
    [ -n "$died" ] || { echo "FAIL die: rank 1 did not die"; echo "$out"; fail=1; continue; }
    took=$(awk -v a="$died" -v b="$end" 'BEGIN { printf "%.2f", b - a }')
    err=$(grep '^EVENT error .* rank 0 ' <<<"$out")
    said=$(grep -m1 'exited on signal' <<<"$out" || grep -m1 'unexpectedly disconnected' <<<"$out")
    if ! awk -v a="$took" -v t=$timeout_s 'BEGIN { exit !(a <= t + 5) }' ||
       { [ -z "$said" ] && { [ -z "$err" ] || grep -q ' rc 0 ' <<<"$err"; }; }; then
      echo "FAIL die: no error and no message from mpirun, or the job took $took s to end"
      echo "$out"; fail=1; continue
    fi
    if [ -n "$err" ]; then echo "die: rank 0's error: $err"; fi
    echo "die: the job ended $took s after rank 1 died (exit $rc); mpirun: ${said:-nothing}"
    ;;
  esac
done
exit $fail
