// GEMM operands for the CLI's GPU commands: random activations and weights quantized on the GPU
// with the granularities each scale mode reads, as a model would feed the GEMM.
#pragma once

#include <memory>

#include "autotune/timer.hpp"
#include "fp8jit/runtime.hpp"

namespace fp8jit::cli {

struct GemmOperands {
  std::unique_ptr<DeviceBuffer> a, b, scale_a, scale_b, d, bias;
};

// rows x k normal values with a few outliers, quantized on the GPU into q (rows x k bytes) and
// scales (scale_count(g, layout, rows, k) floats); device pointers, synchronous.
void quantize_random(Runtime& rt, std::int64_t rows, std::int64_t k, Fp8Format f, Granularity g,
                     ScaleLayout layout, void* q, float* scales, unsigned seed);

// Fills g's operand pointers, B's scale layout, the scale sizes and D (g.m, n, k, formats,
// d_dtype, scale_mode and scale_a_layout must be set), with `bias` also g.bias (n values ~N(0, 1)
// in d_dtype). The buffers live as long as the returned object.
GemmOperands make_gemm_operands(Runtime& rt, GemmArgs& g, bool bias = false);

}  // namespace fp8jit::cli
