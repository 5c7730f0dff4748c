#!/bin/sh
# The board side on a 32-bit ARM Python, as a PYNQ-Z2 (armv7l) runs it: Debian's armhf python3 and
# python3-numpy, unpacked into build/armhf/root (no chroot, no binfmt), run by qemu-user; the digests of
# tests/board_bits.py (the kernels' numpy references, an exported policy, the drivers' stream codecs)
# must equal this host's. `make test-armhf`; not part of make test (it downloads about 20 MB of packages).
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
out="$here/build/armhf"
root="$out/root"
py="${PYTHON:-$here/.venv/bin/python}"

arm_python() { ls "$root"/usr/bin/python3.* 2>/dev/null | grep -E '/python3\.[0-9]+$' | head -n 1; }

if ! command -v qemu-arm >/dev/null || [ -z "$(arm_python)" ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "test-armhf: SKIPPED: needs qemu-user and Debian's armhf packages (run as root with apt-get)"
    exit 0
  fi
  dpkg --add-architecture armhf
  apt-get update -qq >/dev/null 2>&1 || echo "test-armhf: apt-get update reported errors (continuing with the indexes it got)"
  command -v qemu-arm >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user >/dev/null
  mkdir -p "$out/debs" "$root"
  # python3 and numpy with their armhf libraries, one BLAS (OpenBLAS, pthread) of the alternatives
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
      --no-enhances --no-pre-depends python3-numpy:armhf python3:armhf 2>/dev/null \
    | grep -E '^[a-z0-9.+-]+:armhf$' | sort -u \
    | grep -vE '^(libopenblas0-openmp|libopenblas0-serial|libblis4-[a-z]+|libatlas3-base|dpkg|install-info|perl[a-z-]*|debconf|tar):' \
    > "$out/packages.txt"
  (cd "$out/debs" && apt-get download $(cat "$out/packages.txt") >/dev/null 2>&1)
  for deb in "$out"/debs/*.deb; do dpkg-deb -x "$deb" "$root"; done
  lib="$root/usr/lib/arm-linux-gnueabihf"
  ln -sf blas/libblas.so.3 "$lib/libblas.so.3"            # what update-alternatives would link
  ln -sf lapack/liblapack.so.3 "$lib/liblapack.so.3"
fi

run_arm() { QEMU_LD_PREFIX="$root" PYTHONPATH="$here" PYTHONDONTWRITEBYTECODE=1 qemu-arm "$(arm_python)" "$@"; }
echo "test-armhf: $(run_arm -c 'import platform, numpy; print(platform.machine(), "numpy", numpy.__version__, "int", numpy.dtype(numpy.int_))')"
PYTHONPATH="$here" "$py" "$here/tests/board_bits.py" > "$out/host.json"
run_arm "$here/tests/board_bits.py" > "$out/armhf.json"
if diff "$out/host.json" "$out/armhf.json"; then
  echo "test-armhf: $(grep -c '": "' "$out/host.json") digests equal on armhf and this host"
else
  echo "test-armhf: FAILED: the board side gives other bits on armhf (diff above)" >&2
  exit 1
fi
