// Argument checks and the launch of the gemm family.
#pragma once

#include <cuda.h>

#include "fp8jit/runtime.hpp"
#include "runtime/kernel_cache.hpp"

namespace fp8jit::ops {

// Fills defaults (ld = 0 -> dense) and throws Error(invalid_argument) naming the first bad
// argument. Touches no GPU.
GemmArgs normalize(const GemmArgs& a);
GemmProblem problem_of(const GemmArgs& a);
void check_matches(const KernelSpec& spec, const GemmArgs& a);
// Split-K ranges a launch will use, and the FP32 workspace bytes they need (0 when 1).
int split_count(const LoadedKernel& k, const GemmArgs& a, int sm_count);
std::size_t workspace_bytes(const GemmArgs& a, int splits);

// Encodes the tensor maps and launches the persistent grid on `sm_count` multiprocessors (and,
// with splits > 1, the reduction). `workspace` must hold workspace_bytes(a, splits).
void launch(const LoadedKernel& k, const GemmArgs& a, int sm_count, int splits, float* workspace, CUstream stream);

}  // namespace fp8jit::ops
