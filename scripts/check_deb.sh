#!/usr/bin/env bash
# Makes graft's .deb from build/ (cpack), shows what it holds and needs, installs it with apt as a
# user would, builds tests/consumer against the installed package (find_package and pkg-config),
# runs it on sift5k, and removes the package again. Needs root and a built build/ (setup.sh).
#   bash scripts/check_deb.sh            # CI runs this after the tests
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/build"
data=${GRAFT_DATA_DIR:-$root/../shared/data}
export DEBIAN_FRONTEND=noninteractive

rm -f graft_*.deb
cpack -G DEB >cpack.log 2>&1 || { cat cpack.log; exit 1; }
deb=$(ls graft_*.deb)
echo "== $deb"
dpkg-deb -I "$deb"
dpkg-deb -c "$deb" | awk '{print $6}' | grep -v '/$'

# NVIDIA's CUDA packages are what the .deb depends on. Where CUDA came from NVIDIA's runfile (CI's
# machines), dpkg does not know it: a local stand-in package says those libraries are present.
shim=""
for dep in $(dpkg-deb -f "$deb" Depends | tr ',' '\n' | grep -oE '(cuda-cudart|libcublas)-[0-9-]+'); do
  apt-get install -s -qq "$dep" >/dev/null 2>&1 || shim="$shim${shim:+, }$dep"
done
if [ -n "$shim" ]; then
  [ -e /usr/local/cuda/lib64/libcublas.so ] || { echo "no CUDA libraries for: $shim"; exit 1; }
  command -v equivs-build >/dev/null || apt-get install -y -qq --no-install-recommends equivs >/dev/null
  rm -rf cuda-shim && mkdir cuda-shim && cd cuda-shim
  printf 'Package: graft-ci-cuda-runfile\nVersion: 1.0\nProvides: %s\nDescription: CUDA from NVIDIA'"'"'s runfile in /usr/local/cuda (not known to dpkg)\n' "$shim" >shim.ctl
  equivs-build shim.ctl >/dev/null 2>&1
  dpkg -i graft-ci-cuda-runfile_1.0_all.deb >/dev/null
  cd ..
  echo "== stand-in for runfile CUDA: $shim"
fi

apt-get install -y -qq "./$deb" >apt.log 2>&1 || { cat apt.log; exit 1; }
echo "== installed: $(dpkg -s graft | grep -E '^(Status|Version)' | tr '\n' ' ')"
status=0
bash "$root/tests/consumer/check.sh" /usr "$data" "$root/build/deb-consumer" || status=$?
apt-get remove -y -qq graft >/dev/null
[ -z "$shim" ] || dpkg -r graft-ci-cuda-runfile >/dev/null
[ $status = 0 ] && echo "check_deb: OK" || echo "check_deb: FAILED"
exit $status
