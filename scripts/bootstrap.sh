#!/usr/bin/env bash
# Set-up on a fresh Debian machine: installs the missing build dependencies (apt-get), then
# configures and builds fp8jit into ./build. Idempotent: a second run only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for pkg in cmake g++ make libfmt-dev nlohmann-json3-dev libsqlite3-dev libgtest-dev libbenchmark-dev libcli11-dev gnuplot-nox pkgconf; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "bootstrap: installing ${need[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if [ ! -x /usr/local/cuda/bin/nvcc ] && [ ! -f /usr/local/cuda/include/nvrtc.h ]; then
  echo "bootstrap: the CUDA 13 toolkit is expected at /usr/local/cuda (NVRTC and headers)" >&2
  exit 1
fi
# The Python package (python/) builds with nanobind and is tested with pytest: from PyPI when
# missing (without them the package is left out of the build, the rest builds and tests).
if command -v python3 >/dev/null && ! python3 -c "import nanobind, pytest" >/dev/null 2>&1; then
  echo "bootstrap: installing nanobind and pytest (pip)"
  python3 -m pip install --quiet --disable-pip-version-check nanobind pytest ||
    echo "bootstrap: pip could not install nanobind/pytest: the Python package is not built" >&2
fi
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCUDAToolkit_ROOT=/usr/local/cuda >/dev/null
cmake --build build -j"$jobs"
