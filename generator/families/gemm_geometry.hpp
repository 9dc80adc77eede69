// The host's view of the gemm kernel's geometry: the constexpr functions the kernel itself is
// built from (fp8jit/gemm/geometry.cuh), applied to a problem and config. The family's rules,
// the heuristic, the tuner and the launch code read shared memory, threads, chunks, clusters and
// the register limits from here.
#pragma once

#include <cstdint>
#include <utility>

#include "fp8jit/gemm/geometry.cuh"
#include "fp8jit/kernel_spec.hpp"

namespace fp8jit {

using GemmGeometry = dev::GemmGeometry;

// The most rows of A (M) for which the heuristic swaps the operands (GemmConfig::swap_ab): measured
// faster at 1 and 16 rows, no faster at 37 (G64); the tuner tries swapped tiles up to twice this.
inline constexpr int kGemmSwapMaxM = 16;

// The narrowest swapped tile width that holds M rows of A: M rounded up to a multiple of 8.
inline int gemm_swap_block_n(std::int64_t m) {
  return static_cast<int>((m + 7) / 8 * 8);
}

// Output tiles of an M x N problem under config c; swapped operands put N along the tile's rows.
inline std::int64_t gemm_tile_count(const GemmConfig& c, std::int64_t m, std::int64_t n) {
  if (c.swap_ab) std::swap(m, n);
  return ((m + c.block_m - 1) / c.block_m) * ((n + c.block_n - 1) / c.block_n);
}

// Opt-in shared memory per block on H100/H200: the most a gemm variant may use.
inline constexpr int kGemmSmemLimit = dev::kGemmSmemLimit;

static_assert(static_cast<int>(ScaleMode::tensor) == dev::kPerTensor &&
                  static_cast<int>(ScaleMode::rowwise) == dev::kPerRow &&
                  static_cast<int>(ScaleMode::block) == dev::kBlockScale &&
                  static_cast<int>(ScaleMode::group) == dev::kGroupScale,
              "dev::GemmScale mirrors ScaleMode");

// The kernel's scale mode: block scaling with swapped operands stages scales of its own kind.
inline int gemm_kernel_scale(const GemmProblem& p, const GemmConfig& c) {
  return c.swap_ab && p.scale == ScaleMode::block ? dev::kSwappedBlockScale
                                                  : static_cast<int>(p.scale);
}

inline dev::GemmTile gemm_tile(const GemmProblem& p, const GemmConfig& c) {
  return {c.block_m,
          c.block_n,
          c.stages,
          gemm_kernel_scale(p, c),
          static_cast<int>(dtype_size(p.out)),
          p.fast_accum,
          p.bias,
          c.cluster_m,
          c.cluster_n,
          p.layout != GemmLayout::dense,
          c.epilogue == GemmEpilogue::tma};
}

inline GemmGeometry gemm_geometry(const GemmProblem& p, const GemmConfig& c) {
  return dev::gemm_geometry(gemm_tile(p, c));
}

// Whether split-K ranges of a config can be summed inside a cluster (the problem does not enter).
inline bool gemm_sums_splits_in_smem(const GemmConfig& c) {
  return dev::gemm_sums_splits_in_cluster(c.block_m, c.block_n, c.stages, c.cluster_m * c.cluster_n);
}

// The widest block_n whose registers fit for the problem with block_m rows and no cluster, in
// at most max_chunks column chunks (1: no column halves).
inline int gemm_widest_block_n(const GemmProblem& p, int block_m, int max_chunks = 2) {
  return dev::gemm_widest_block_n(gemm_tile(p, GemmConfig{block_m, 8, 2, 1, 1, 1}), max_chunks);
}

// Whether the problem's A has a 1x128 scale per row and K block (block and group scaling), which
// callers may give row-major: its modules then hold fp8jit_gemm_scale_columns
// (fp8jit/gemm/scale_columns.cuh), which the runtime runs first to give the kernel TMA's layout.
inline bool gemm_reads_row_scales_a(const GemmProblem& p) {
  return p.scale == ScaleMode::block || p.scale == ScaleMode::group;
}
inline constexpr const char* kGemmScaleColumnsEntry = "fp8jit_gemm_scale_columns";

}  // namespace fp8jit
