// FP8 GEMM operands for GPU tests: random bf16 data quantized on the GPU by the quantize family,
// as a model would feed the GEMM.
#pragma once

#include <cstdint>

#include "fp8jit/types.hpp"

namespace fp8jit::test {

// rows x k random bf16 values quantized into q (rows x k bytes) and s (scale_count floats);
// synchronous.
void quantize_into(std::int64_t rows, std::int64_t k, Fp8Format f, Granularity g, ScaleLayout layout, void* q,
                   float* s, unsigned seed);

}  // namespace fp8jit::test
