#!/usr/bin/env bash
# A/B timing of template experiments on a Hopper machine: builds fp8jit_bench once per variant
# (the tree as it is, then a copy with each patch applied; templates are embedded at build time)
# and runs the GEMM benchmark on the same shapes, printing each variant's table. Results are
# what bench/NOTES.md cites for an experiment; the patches stay in bench/experiments/ as record.
#
# Usage (repo root): bash bench/ab.sh SHAPES.csv SCALES [PATCH...]
#   e.g. bash bench/ab.sh bench/shapes/tune_sample.csv block bench/experiments/*.patch
# Logs: $OUT (default /tmp/fp8jit-ab)/<variant>.txt; AB_BASE_BUILD=DIR reuses that build tree for the base.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
[ $# -ge 2 ] || { echo "usage: bash bench/ab.sh SHAPES.csv SCALES [PATCH...]" >&2; exit 2; }
shapes=$(realpath "$1"); scales=$2; shift 2
OUT=${OUT:-/tmp/fp8jit-ab}
mkdir -p "$OUT"
source bench/ab_common.sh
measure() { ab_gemm_table "$1" "$2" "$shapes" "$scales"; }  # name, build tree
ab_all fp8jit_bench "$@"
