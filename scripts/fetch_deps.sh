#!/usr/bin/env bash
# Run on a build machine (Debian bookworm, network to Debian's mirrors) before a GPU-machine run:
# fills the git-ignored .deps/ with what the GPU machine lacks (it has no FAISS and no network):
#   .deps/debs/libfaiss-dev_*.deb   FAISS 1.7.3 (static libfaiss.a + headers, C API headers)
#   .deps/faiss-src/                the FAISS source package (C API sources; GPU build for benchmarks)
#   .deps/data/sift5k/              the real test data (../shared/data does not travel)
# The GPU machine then gets it with the device tool's carry: [".deps"].
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
mkdir -p .deps/debs .deps/data
if [ ! -d .deps/faiss-src/c_api ]; then
  GRAFT_SKIP_BUILD=1 bash scripts/setup.sh
fi
ls .deps/debs/libfaiss-dev_*.deb >/dev/null 2>&1 || (cd .deps/debs && apt-get download -qq libfaiss-dev)
data=${GRAFT_DATA_DIR:-$root/../shared/data}
rm -rf .deps/data/sift5k && cp -r "$data/sift5k" .deps/data/
du -sh .deps
