// Argument checks and the launch of grouped (mixture-of-experts) GEMMs: the gemm family's kernels
// with a grouped layout (GroupedTileScheduler).
#pragma once

#include <cuda.h>

#include "fp8jit/runtime.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "runtime/ops/gemm.hpp"

namespace fp8jit::ops {

// Fills defaults (ld = 0 -> dense, expected_m = 0 -> its default) and throws
// Error(invalid_argument) naming the first bad argument. Touches no GPU.
GroupedGemmArgs normalize(const GroupedGemmArgs& a);
// The layout, the group count and the row counts it implies (no pointers read): what a grouped
// GEMM's shape must satisfy, with or without operands.
void check_group_shape(const GroupedGemmArgs& a);
GemmProblem problem_of(const GroupedGemmArgs& a);
void check_matches(const KernelSpec& spec, const GroupedGemmArgs& a);
// Rows of A and D: contiguous m, masked groups * m.
std::int64_t total_rows(const GroupedGemmArgs& a);

// Encodes the tensor maps and sizes the persistent grid on `sm_count` multiprocessors; `pdl` as
// for dense GEMMs (LaunchConfig::pdl).
GemmLaunch prepare(const LoadedKernel& k, const GroupedGemmArgs& a, int sm_count, CUstream stream, bool pdl = false);
void launch(const LoadedKernel& k, const GroupedGemmArgs& a, int sm_count, CUstream stream, bool pdl = false);

}  // namespace fp8jit::ops
