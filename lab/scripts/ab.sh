#!/usr/bin/env bash
# A/B timing of template experiments on a Hopper machine: builds fp8jit_bench once per variant
# (the tree as it is, then a copy with each patch applied; templates are embedded at build time)
# and runs the GEMM benchmark on the same shapes, printing each variant's table. Results are
# what lab/NOTES-log.md cites for an experiment; the patches stay in lab/patches/ as record.
#
# Usage (repo root): bash lab/scripts/ab.sh SHAPES.csv SCALES [PATCH...]
#   e.g. bash lab/scripts/ab.sh lab/shapes/tune_sample.csv block lab/patches/*.patch
# Logs: $OUT (default /tmp/fp8jit-ab)/<variant>.txt; AB_BASE_BUILD=DIR reuses that build tree for the base.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.." || exit 1
[ $# -ge 2 ] || { echo "usage: bash lab/scripts/ab.sh SHAPES.csv SCALES [PATCH...]" >&2; exit 2; }
shapes=$(realpath "$1"); scales=$2; shift 2
OUT=${OUT:-/tmp/fp8jit-ab}
mkdir -p "$OUT"
source lab/scripts/ab_common.sh
measure() { ab_gemm_table "$1" "$2" "$shapes" "$scales"; }  # name, build tree
ab_all fp8jit_bench "$@"
