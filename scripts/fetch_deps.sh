#!/usr/bin/env bash
# Run on a build machine (Debian bookworm, network to Debian's mirrors) before a GPU-machine run:
# fills the git-ignored .deps/ with what the GPU machine lacks (it has no FAISS and no network):
#   .deps/debs/libfaiss-dev_*.deb   FAISS 1.7.3 (static libfaiss.a + headers, C API headers)
#   .deps/faiss-src/                the FAISS source package (C API sources; GPU build for benchmarks)
#   .deps/data/sift5k/              the real test data (../shared/data does not travel)
#   .deps/data/fashion-mnist/       Fashion-MNIST images (graph-build benchmark)
#   .deps/data/kde-images/          7 photographs for scripts/make_patches.py (the d = 192 set)
#   .deps/data/photo-images/part1/  288 photographs for scripts/make_photo_sets.py (the 10M sets)
#   .deps/peers/                    GGNN's source tarball and the glog/gflags .debs it builds with
#                                   (graft-bench's GGNN peer; /work/shared/peers/README.md), and
#                                   FAISS 1.15's source tarball (the device/run.sh job faiss115)
#   .deps/mpi/                      Debian's Open MPI and the libraries it loads (7 MB of .debs),
#                                   for the device/run.sh job mpi where the GPU machine has no MPI
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
# (GRAFT_BENCH_DATA=1 bash scripts/setup.sh): the GPU machine makes the 1M set itself. The 9 PNGs
# of its --smooth set go as grayscale PNGs (4 MB instead of 11): the recipe reads them with
# cv2.IMREAD_GRAYSCALE, which gives the same pixels from either file (checked here).
if [ -d /usr/share/backgrounds/mate ]; then
  /usr/bin/python3 - <<'PY'
import os, runpy, shutil
import cv2
m = runpy.run_path("scripts/make_dense_sift.py")
for rel in m["BASE_IMAGES"] + m["QUERY_IMAGES"] + m["SMOOTH_BASE_IMAGES"] + m["SMOOTH_QUERY_IMAGES"]:
    src, dst = os.path.join(m["IMAGES_DIR"], rel), os.path.join(".deps/data/mate-images", rel)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if not rel.endswith(".png"):
        shutil.copy(src, dst)
        continue
    gray = cv2.imread(src, cv2.IMREAD_GRAYSCALE)
    cv2.imwrite(dst, gray, [cv2.IMWRITE_PNG_COMPRESSION, 9])
    if not (cv2.imread(dst, cv2.IMREAD_GRAYSCALE) == gray).all():
        raise SystemExit(f"fetch_deps: grayscale copy of {rel} reads back different")
PY
fi
# The 7 KDE Plasma photographs that scripts/make_patches.py uses (5 MB; Debian's
# plasma-workspace-wallpapers, 94 MB, is fetched as a .deb and unpacked here, not installed): the
# GPU machine makes the third benchmark set (8 x 8 colour patches, d = 192) itself.
if [ ! -d .deps/data/kde-images ]; then
  t=$(mktemp -d)
  (cd "$t" && apt-get download -qq plasma-workspace-wallpapers && dpkg -x plasma-workspace-wallpapers_*.deb x)
  /usr/bin/python3 - "$t/x/usr/share/wallpapers" <<'PY'
import os, runpy, shutil, sys
m = runpy.run_path("scripts/make_patches.py")
for name in m["BASE_IMAGES"] + m["QUERY_IMAGES"]:
    dst = os.path.join(".deps/data/kde-images", name, m["IMAGE_FILE"])
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy(os.path.join(sys.argv[1], name, m["IMAGE_FILE"]), dst)
PY
  rm -rf "$t"
fi
# The photographs that scripts/make_photo_sets.py makes the 10M-scale real sets from (photo-sift,
# photo-patches; 288 JPEGs, 40 MB, copied unchanged), laid out as it reads them:
# .deps/data/photo-images/part1/{base,query}/<source>/<file>. The .debs (lomiri-wallpapers-16.04
# and -20.04, endless-sky-data: 97 MB) are fetched and unpacked here, not installed. Carry
# .deps/data/photo-images/part1 alone for the generating call (docs/benchmarks.md).
if [ ! -f .deps/data/photo-images/part1/.complete ]; then
  t=$(mktemp -d)
  (cd "$t" && mkdir x && apt-get download -qq lomiri-wallpapers-16.04 lomiri-wallpapers-20.04 endless-sky-data &&
   for p in *.deb; do dpkg -x "$p" "x/${p%%_*}"; done)
  rm -rf .deps/data/photo-images/part1
  /usr/bin/python3 - "$t/x" <<'PY'
import os, runpy, shutil, sys
m = runpy.run_path("scripts/make_photo_sets.py")
roots = {pkg: os.path.join(sys.argv[1], pkg) for pkg in os.listdir(sys.argv[1])}
for src, what, folder, name in m["pick"](roots):
    dst = os.path.join(".deps/data/photo-images/part1", what, folder, name)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copy(src, dst)
PY
  (cd "$t" && ls *.deb) > .deps/data/photo-images/part1/debs.txt  # the versions the files came from
  touch .deps/data/photo-images/part1/.complete
  rm -rf "$t"
fi
# GGNN (a graft-bench peer, built on the GPU machine by the device/run.sh job ggnn) and the
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
# cuVS's sources (graft-bench's CAGRA peer: scripts/device/build_cuvs.sh, here or by the cuvs job).
if [ -f "$peers"/cuvs/README.md ]; then
  mkdir -p .deps/peers/cuvs
  cp "$peers"/cuvs/*.tar.gz "$peers"/cuvs/README.md .deps/peers/cuvs/
fi
# Open MPI (the device/run.sh job mpi unpacks it with dpkg -x when the GPU machine has no mpirun):
# its packages and the libraries they load that an Ubuntu machine lacks, not libc or libstdc++.
mkdir -p .deps/mpi
(cd .deps/mpi && for p in libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libhwloc15 \
   libhwloc-plugins libpmix2 libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 \
   libibverbs1 librdmacm1 libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200 libnuma1 \
   libmunge2 libxnvctrl0 libpciaccess0; do
   ls ${p}_*.deb >/dev/null 2>&1 || apt-get download -qq $p; done)
du -sh .deps
