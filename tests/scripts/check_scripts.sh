#!/usr/bin/env bash
# The GPU machine's scripts, checked without a GPU (test_scripts, label unit): every
# scripts/**/*.sh parses (bash -n); every file under scripts/ has at most 250 lines and the driver
# (scripts/device/run.sh) at most 150; every job file is in the driver's list and has the header
# the docs rely on; --help lists every job; a dry run of the usual calls and of every job prints
# its steps (nothing is built or run: no nvidia-smi, no cmake), so that a broken job list fails CI;
# cuVS's trim puts its block in once.
#   bash tests/scripts/check_scripts.sh [SOURCE_DIR]
set -uo pipefail
src=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
cd "$src" || exit 1
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

while IFS= read -r f; do
  bash -n "$f" || fail "$f does not parse"
done < <(find scripts -name '*.sh' | sort)
while IFS= read -r f; do
  n=$(wc -l <"$f")
  [ "$n" -le 250 ] || fail "$f has $n lines (at most 250)"
done < <(find scripts -type f -not -path '*/__pycache__/*' | sort)
n=$(wc -l <scripts/device/run.sh)
[ "$n" -le 150 ] || fail "scripts/device/run.sh has $n lines (at most 150)"

help=$(bash scripts/device/run.sh --help) || fail "run.sh --help exits non-zero"
all=()
for f in scripts/device/jobs/*.sh; do
  job=$(basename "$f" .sh)
  all+=("$job")
  grep -q "^  $job  *[^ ]" <<<"$help" || fail "$job: not in run.sh's job list (--help)"
  grep -q "^# $job: " "$f" || fail "$f: its header does not start with '# $job: what it does'"
  grep -q "^# Writes to \$OUT: " "$f" || fail "$f: no '# Writes to \$OUT:' line"
  grep -q "^# Time: " "$f" || fail "$f: no '# Time:' line"
  # The lines the driver reads: one of each at most, and words of the right kind.
  for key in targets needs requires background; do
    [ "$(grep -c "^# $key:" "$f")" -le 1 ] || fail "$f: more than one '# $key:' line"
  done
  v=$(sed -n 's/^# targets: *//p' "$f")
  grep -qE '^[A-Za-z0-9_ -]*$' <<<"$v" || fail "$f: '# targets: $v' is not a list of build targets"
  for b in $(sed -n 's/^# needs: *//p' "$f"); do
    grep -q '^# background: yes' "scripts/device/jobs/$b.sh" 2>/dev/null || fail "$f needs $b, not a background job"
  done
  v=$(sed -n 's/^# requires: *//p' "$f")
  grep -qE '^[A-Z0-9_ ]*$' <<<"$v" || fail "$f: '# requires: $v' is not a list of variables"
  v=$(sed -n 's/^# background: *//p' "$f")
  [ -z "$v" ] || [ "$v" = yes ] || fail "$f: '# background: $v' (yes, or no such line)"
done
# Every job in the list has its file (run.sh refuses a name without one).
for job in $(sed -n 's/^  \([a-z0-9-]*\)  .*/\1/p' <<<"$help"); do
  [ -f "scripts/device/jobs/$job.sh" ] || fail "$job: listed but no scripts/device/jobs/$job.sh"
done

dry() {  # EXPECTED-LINE JOB...: a dry run must succeed and print that line
  local out
  out=$(GRAFT_DRY_RUN=1 GRAFT_AB=/nonexistent PATH="$fake:$PATH" bash scripts/device/run.sh "${@:2}" 2>&1) ||
    { fail "dry run of '${*:2}' exits non-zero: $out"; return; }
  grep -qx -- "$1" <<<"$out" || fail "dry run of '${*:2}' does not print '$1':"$'\n'"$out"
  ! grep -q "ran:" <<<"$out" || fail "dry run of '${*:2}' ran a program:"$'\n'"$out"
}
# nvidia-smi, cmake, ninja, nvcc and dpkg that say so when a dry run calls them.
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
for p in nvidia-smi cmake ninja nvcc dpkg ctest; do
  printf '#!/bin/sh\necho "ran: %s $*"\n' "$p" >"$fake/$p"
  chmod +x "$fake/$p"
done
dry "run build (targets: all)" build tests graft-bench
dry "start faiss-gpu (background: bash scripts/device/jobs/faiss-gpu.sh start)" build tests graft-bench
dry "run build (targets: graft-bench)" shards
dry "run build (targets: all)" tests shards
dry "dry run: jobs: build shards" --no-tests tests shards
dry "run faiss115 (waits for it)" faiss115 graft-bench
for job in "${all[@]}"; do
  case $job in
    build) dry "run build (targets: all)" build ;;
    *) dry "run $job$(grep -q '^# background: yes' "scripts/device/jobs/$job.sh" && echo " (waits for it)")" "$job" ;;
  esac
done
# Every job at once: in the list's order.
dry "dry run: jobs: $(sed -n 's/^  \([a-z0-9-]*\)  .*/\1/p' <<<"$help" | xargs)" "${all[@]}"
out=$(GRAFT_DRY_RUN=1 bash scripts/device/run.sh no-such-job 2>&1) && fail "an unknown job is accepted: $out"
out=$(GRAFT_DRY_RUN=1 GRAFT_AB= bash scripts/device/run.sh walk-ab 2>&1) && fail "walk-ab runs without GRAFT_AB: $out"

# cuVS's trim (scripts/device/cuvs_cagra_only.py) on a stand-in for cuVS's CMakeLists: its block
# goes in once after add_library(cuvs_objs), a second run leaves the file as it is.
tmp=$(mktemp -d)
printf '  add_library(\n    cuvs_objs OBJECT\n    a.cu\n  )\n\n  set_target_properties(\n    cuvs_objs\n    PROPERTIES X\n  )\n' >"$tmp/CMakeLists.txt"
python3 scripts/device/cuvs_cagra_only.py "$tmp/CMakeLists.txt" && cp "$tmp/CMakeLists.txt" "$tmp/once" &&
  python3 scripts/device/cuvs_cagra_only.py "$tmp/CMakeLists.txt" || fail "cuvs_cagra_only.py fails"
[ "$(grep -c 'graft: CAGRA_ONLY' "$tmp/CMakeLists.txt")" = 1 ] && cmp -s "$tmp/once" "$tmp/CMakeLists.txt" &&
  grep -q 'EXCLUDE REGEX "src/neighbors/(ivf_pq/' "$tmp/CMakeLists.txt" || fail "cuvs_cagra_only.py: its block is not there once"
rm -rf "$tmp"

[ $fails = 0 ] && echo "scripts: ok (${#all[@]} jobs)" && exit 0
echo "$fails check(s) failed"
exit 1
