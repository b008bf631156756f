#!/usr/bin/env bash
# build: configures build-device (sm_90, Ninja, Release; Debian's FAISS 1.7.3 from the carried
# .deb, or FAISS 1.15 with the faiss115 job) and builds what the call's jobs need: every target
# when build is named or a job needs them all (tests, sanitize), else the union of the jobs'
# "# targets:" (graft-bench alone, say), or GRAFT_BUILD_TARGETS. With install-check in the call,
# the shipped targets first, timed alone: the single-architecture figure.
# Writes to $OUT: build.log (configure + build).
# Time: every target ~45-65 s on nvidia-h100 (16 cores), ~20 s more beside the FAISS GPU build
# (then a quarter of the cores); nvidia-h200 kinds not measured.
. "$(dirname "$0")/../lib.sh"
device_cfg
cmake -S . -B build-device "${cfg[@]}" >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
jobs=$(build_jobs)
if wanted install-check; then
  # What a package ships (libraries and programs); install-check builds them again for CMake's
  # default architectures and compares.
  s0=$(date +%s.%N)
  ninja -C build-device -j"$jobs" graft_core graft_faiss faiss_c faiss_swap graph_build graft-bench \
    >>"$OUT/build.log" 2>&1 || build_failed "$OUT/build.log"
  stamp "shipped targets, sm_90 only: $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $s0 }") s on $jobs jobs"
fi
read -ra targets <<<"${GRAFT_TARGETS:-}"
ninja -C build-device -j"$jobs" "${targets[@]}" >>"$OUT/build.log" 2>&1 || build_failed "$OUT/build.log"
stamp "graft built${GRAFT_TARGETS:+ (${targets[*]})}"
