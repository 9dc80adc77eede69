#!/usr/bin/env bash
# Builds DeepGEMM 2.6.1's torch extension in place (DIR/deep_gemm/_C*.so), once: it is g++ only
# (csrc/python_api.cpp; the kernels are JIT-compiled with nvcc at run time). Used by run.sh and
# lab/scripts/grouped_session.sh on the GPU machine.
# Usage: bash bench/peers/build_deepgemm2.sh [DIR]   (default .carry/deepgemm2, laid out by
#        setup_deepgemm2.py). Exit status 0 when the extension is there, 1 otherwise (said why).
set -uo pipefail
dg2=${1:-.carry/deepgemm2}
if [ ! -f "$dg2/setup.py" ]; then
  echo "DeepGEMM 2.6.1: no tree at $dg2 (python3 bench/peers/setup_deepgemm2.py lays it out): unavailable"
  exit 1
fi
if compgen -G "$dg2/deep_gemm/_C*.so" >/dev/null; then
  echo "DeepGEMM 2.6.1: extension already built: $(ls "$dg2"/deep_gemm/_C*.so)"
  exit 0
fi
t0=$(date +%s)
dg2_env=(DG_USE_LOCAL_VERSION=0) stubs=  # DG_USE_LOCAL_VERSION=0: the version from __init__.py, not git
# The g++ torch was built with: an extension from another g++ (the machine's default /opt/gcc)
# imports but segfaults in its first call (H100 machine, 2026-11-24).
[ -x /usr/bin/g++-13 ] && dg2_env+=(CXX=/usr/bin/g++-13)
if ! python3 -c "import wheel.bdist_wheel, packaging.version" 2>/dev/null; then
  # setup.py imports both at the top for its wheel command only; build_ext never uses them.
  stubs=$(mktemp -d)
  mkdir -p "$stubs/wheel" "$stubs/packaging"
  : > "$stubs/wheel/__init__.py"; : > "$stubs/packaging/__init__.py"
  echo "from setuptools import Command as bdist_wheel" > "$stubs/wheel/bdist_wheel.py"
  echo "def parse(v): raise NotImplementedError" > "$stubs/packaging/version.py"
  dg2_env+=(PYTHONPATH="$stubs${PYTHONPATH:+:$PYTHONPATH}")
  echo "(no wheel or packaging module: stand-ins in $stubs)"
fi
rc=0
if (cd "$dg2" && env "${dg2_env[@]}" python3 setup.py build_ext --inplace 2>&1); then
  echo "DeepGEMM 2.6.1 built in $(( $(date +%s) - t0 )) s: $(ls "$dg2"/deep_gemm/_C*.so)"
else
  echo "DeepGEMM 2.6.1 build failed after $(( $(date +%s) - t0 )) s: it is reported unavailable"
  rc=1
fi
[ -n "$stubs" ] && rm -rf "$stubs"
exit $rc
