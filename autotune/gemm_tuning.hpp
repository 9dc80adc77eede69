// Tuning one gemm shape on the GPU.
#pragma once

#include "fp8jit/runtime.hpp"
#include "fp8jit/tuning.hpp"

namespace fp8jit {

// Sweeps the ranked candidates for `args` (device operands; D is overwritten many times) and
// verifies each against the float64 reference of the dequantized operands.
TuneResult tune_gemm(Runtime& runtime, const GemmArgs& args, const TuneOptions& options);

// The accuracy bound a gemm result must meet: 1e-3 relative Frobenius error for fp32 output with
// promoted accumulation, 4e-3 otherwise (bf16/fp16 output, fast accumulation).
double gemm_tolerance(const GemmArgs& args);

}  // namespace fp8jit
