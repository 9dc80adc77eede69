// Row-major 1x128 scales of A turned column-major before a GEMM, so that its producer reads them
// by one TMA load a stage rather than by one cp.async a row (fp8jit/gemm/scale_columns.cuh says
// what that costs). Dense and grouped launches alike; the copy lives in the runtime's per-stream
// workspace, after the split-K partial sums.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "fp8jit/runtime.hpp"
#include "runtime/jit/kernel_cache.hpp"

namespace fp8jit::ops {

// Bytes of the column-major copy (a multiple of 256) a launch of k with A scales in `layout`
// for `rows` rows of A [rows, k] needs first; 0 where it needs none: scales already column-major,
// a scale mode without 1x128 scales of A, no rows, or a GEMM small enough that the producer's
// own row-by-row copy costs less than a second launch (scale_columns.cpp has the measurements).
std::size_t scale_columns_bytes(const LoadedKernel& k, ScaleMode mode, ScaleLayout layout,
                                std::int64_t rows, std::int64_t k_dim);

// Launches k.scale_columns: `src` row-major [rows][ceil(k_dim / 128)] into `dst` column-major,
// K block by K block, rows padded to 4 (ScaleLayout::col_major_tma). In-stream, no allocation;
// with `pdl` it may start under the previous kernel and waits for it before reading `src`.
void launch_scale_columns(const LoadedKernel& k, const float* src, std::int64_t rows,
                          std::int64_t k_dim, float* dst, CUstream stream, bool pdl);

// `a` with A's scales at `dst` (column-major), after launching their copy there. Args: GemmArgs
// or GroupedGemmArgs; `rows`: A's rows (all groups' for grouped layouts).
template <class Args>
Args scale_columns_first(const LoadedKernel& k, const Args& a, std::int64_t rows, float* dst,
                         CUstream stream, bool pdl) {
  launch_scale_columns(k, a.scale_a, rows, a.k, dst, stream, pdl);
  Args b = a;
  b.scale_a = dst;
  b.scale_a_layout = ScaleLayout::col_major_tma;
  return b;
}

}  // namespace fp8jit::ops
