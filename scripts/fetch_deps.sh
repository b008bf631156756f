#!/usr/bin/env bash
# Run on a build machine (Debian bookworm, network to Debian's mirrors) before a GPU-machine run:
# fills the git-ignored .deps/ with what the GPU machine lacks (it has no FAISS and no network):
#   .deps/debs/libfaiss-dev_*.deb   FAISS 1.7.3 (static libfaiss.a + headers, C API headers)
#   .deps/faiss-src/                the FAISS source package (C API sources; GPU build for benchmarks)
#   .deps/data/sift5k/              the real test data (../shared/data does not travel)
#   .deps/data/fashion-mnist/       Fashion-MNIST images (graph-build benchmark)
#   .deps/peers/                    GGNN's source tarball and the glog/gflags .debs it builds with
#                                   (graft-bench's GGNN peer; /work/shared/peers/README.md), and
#                                   FAISS 1.15's source tarball (device_run.sh --faiss115)
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
# Fashion-MNIST images (Debian's dataset-fashion-mnist, installed by setup.sh), for bench_build.
mkdir -p .deps/data/fashion-mnist
cp /usr/share/datasets/fashion-mnist/*-images-idx3-ubyte.gz .deps/data/fashion-mnist/
# The 14 mate-backgrounds JPEGs that scripts/make_dense_sift.py uses (8 MB), when installed
# (GRAFT_BENCH_DATA=1 bash scripts/setup.sh): the GPU machine makes the 1M set itself.
if [ -d /usr/share/backgrounds/mate ]; then
  /usr/bin/python3 - <<'PY'
import os, runpy, shutil
m = runpy.run_path("scripts/make_dense_sift.py")
for rel in m["BASE_IMAGES"] + m["QUERY_IMAGES"]:
    dst = os.path.join(".deps/data/mate-images", rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy(os.path.join(m["IMAGES_DIR"], rel), dst)
PY
fi
# GGNN (a graft-bench peer, built on the GPU machine by device_run.sh --graft-bench) and the
# Debian .debs of glog/gflags it needs there.
peers=${GRAFT_PEERS_DIR:-$root/../shared/peers}
if [ -f "$peers"/ggnn-0.9.1-4f8088f.tar.gz ]; then
  mkdir -p .deps/peers
  cp "$peers"/ggnn-0.9.1-4f8088f.tar.gz .deps/peers/
  (cd .deps/peers && for p in libgoogle-glog-dev libgoogle-glog0v6 libgflags-dev libgflags2.2 libunwind-dev libunwind8; do
     ls ${p}_*.deb >/dev/null 2>&1 || apt-get download -qq $p; done)
fi
if [ -f "$peers"/faiss-1.15.0.tar.gz ]; then
  mkdir -p .deps/peers
  cp "$peers"/faiss-1.15.0.tar.gz .deps/peers/
fi
du -sh .deps
