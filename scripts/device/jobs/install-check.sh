#!/usr/bin/env bash
# install-check: the package build. build-fat is configured like build-device but without
# CMAKE_CUDA_ARCHITECTURES, so with CMake's default list (80, 86, 89, 90 + PTX, CMakeLists.txt);
# the shipped targets are built (timed against the build job's sm_90-only figure), installed into
# /tmp/graft-prefix, its cubins and PTX listed, and tests/consumer built against the prefix and run
# on the GPU.
# Writes to $OUT: install.log.
# Time: ~2 min on nvidia-h100 (16 cores: the default architectures 102 s against 32 s for sm_90,
# bench/logs/install-108da3f-h100.log); nvidia-h200 kinds not measured.
# targets: graft_core graft_faiss faiss_c faiss_swap graph_build graft-bench
. "$(dirname "$0")/../lib.sh"
device_cfg
fat=(); for c in "${cfg[@]}"; do [[ $c == -DCMAKE_CUDA_ARCHITECTURES=* ]] || fat+=("$c"); done
cmake -S . -B build-fat "${fat[@]}" >"$OUT/install.log" 2>&1 || { tail -30 "$OUT/install.log"; exit 1; }
jobs=$(build_jobs) s0=$(date +%s.%N)
ninja -C build-fat -j"$jobs" graft_core graft_faiss faiss_c faiss_swap graph_build graft-bench \
  >>"$OUT/install.log" 2>&1 || build_failed "$OUT/install.log"
stamp "shipped targets, default architectures: $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $s0 }") s on $jobs jobs"
rm -rf /tmp/graft-prefix
cmake --install build-fat --prefix /tmp/graft-prefix >>"$OUT/install.log" 2>&1 || { tail -30 "$OUT/install.log"; exit 1; }
so=/tmp/graft-prefix/lib/libgraft_core.so
cuobjdump --list-elf $so | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c | tee -a "$OUT/install.log"
cuobjdump --list-ptx $so | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/PTX \1/' | sort | uniq -c | tee -a "$OUT/install.log"
ls -la /tmp/graft-prefix/lib/*.so.*.* | tee -a "$OUT/install.log"
bash tests/consumer/check.sh /tmp/graft-prefix "$root/.deps/data" /tmp/graft-consumer 2>&1 | tee -a "$OUT/install.log"
rc=${PIPESTATUS[0]}
stamp "install check: exit $rc"
exit "$rc"
