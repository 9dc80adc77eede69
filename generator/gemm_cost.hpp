// The gemm cost model: one estimate of a config's time on a shape, behind both the heuristic
// (default_gemm_spec takes the cheapest of the tiles its rules allow) and the tuner's ranking of
// the whole config space (gemm_candidates).
#pragma once

#include <cstdint>

#include "fp8jit/kernel_spec.hpp"

namespace fp8jit {

// Predicted relative time of an m x n x k GEMM with config c on `sm_count` multiprocessors, its
// K cut into `splits` ranges: waves of work units (tile x K range) on a persistent grid, times
// the K blocks of a range, times one tile's time per K block. Only ratios between configs mean
// anything. The problem decides whether the kernel pipelines its promotion
// (GemmGeometry::pipelined), which makes a K block cheaper.
double gemm_cost(const GemmProblem& p, const GemmConfig& c, std::int64_t m, std::int64_t n,
                 std::int64_t k, int sm_count, int splits);

// The most rows per group for which grouped tiles are 64 rows tall (taller ones would compute
// mostly rows past the group's end): the heuristic's choice, and the tuner's bound on the
// candidates it ranks. Masked groups take 128-row tiles from 17 expected rows on: per expert
// their tiles stream all of B either way, and two math warpgroups hide more of it (H100, masked
// 32 experts x 32 and 64 rows, gate-up and down, two routings: 128 rows 0-5 % faster; at 16
// rows 64-row tiles 0.6-1 % faster at gate-up, mixed at down).
std::int64_t grouped_short_tile_max_rows(GemmLayout layout);

}  // namespace fp8jit
