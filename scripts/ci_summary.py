#!/usr/bin/env python3
"""The end of .ci/run's log: its stages' times as one table, and the slowest tests.

  ci_summary.py STAGES_FILE TREE...

STAGES_FILE: one "seconds<TAB>stage" line a stage, as .ci/run's stage() appends them. TREE: a
build folder whose CTest ran (build/, build-faiss1.15/); its Testing/Temporary/LastTest.log holds
every test's time and output, passed or not. The asan tests run the sanitizer tree's own CTest
(tests/sanitize/run_tree.sh), whose per-test lines are in their output: those tests are listed
too, as asan_unit/test_graph_cpu. A tree without a log is left out (a run stopped before it)."""
import os
import re
import sys

stages_file, trees = sys.argv[1], sys.argv[2:]

print("== ci: stage times")
total = 0
rows = []
if os.path.exists(stages_file):
    for line in open(stages_file):
        secs, _, name = line.rstrip("\n").partition("\t")
        rows.append((int(secs), name))
        total += int(secs)
width = max([len(n) for _, n in rows] + [5])
for secs, name in rows:
    print(f"  {name:<{width}}  {secs:>6} s  {secs / 60:5.1f} min")
print(f"  {'total':<{width}}  {total:>6} s  {total / 60:5.1f} min")

# LastTest.log: "N/M Test: NAME" opens a test, "Test time =  X sec" closes it; between them its
# output, where the inner CTest of an asan test prints "N/M Test  #K: NAME ....   Passed  X sec".
inner = re.compile(r"^\s*\d+/\d+ Test +#\d+: (\S+) \.+\**\s*(\S.*?)\s+([\d.]+) sec")
tests = []
for tree in trees:
    log = os.path.join(tree, "Testing", "Temporary", "LastTest.log")
    if not os.path.exists(log):
        continue
    where = os.path.basename(os.path.normpath(tree))
    name = None
    for line in open(log, errors="replace"):
        m = re.match(r"^\d+/\d+ Test: (\S+)", line)
        if m:
            name = m.group(1)
            continue
        m = re.match(r"^Test time = +([\d.]+) sec", line)
        if m and name:
            tests.append((float(m.group(1)), f"{where}: {name}"))
            name = None
            continue
        m = inner.match(line)
        if m and name and name.startswith("asan_"):
            tests.append((float(m.group(3)), f"{where}: {name}/{m.group(1)} ({m.group(2).lower()})"))

print("== ci: the 10 slowest tests (CTest's wall time; an asan test's own tests listed beside it)")
for secs, what in sorted(tests, reverse=True)[:10]:
    print(f"  {secs:8.1f} s  {what}")
if not tests:
    print("  (no test log)")
