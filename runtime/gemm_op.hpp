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
// Encodes the tensor maps and launches the persistent grid on `sm_count` multiprocessors.
void launch(const LoadedKernel& k, const GemmArgs& a, int sm_count, CUstream stream);

}  // namespace fp8jit::ops
