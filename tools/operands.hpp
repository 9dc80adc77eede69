// GEMM operands for the CLI's GPU commands: random activations and weights quantized on the GPU
// with the granularities each scale mode reads, as a model would feed the GEMM.
#pragma once

#include <memory>

#include "autotune/timer.hpp"
#include "fp8jit/runtime.hpp"

namespace fp8jit::cli {

struct GemmOperands {
  std::unique_ptr<DeviceBuffer> a, b, scale_a, scale_b, d;
};

// Fills g's operand pointers, scale layouts and sizes and D (g.m, n, k, formats, d_dtype and
// scale_mode must be set). The buffers live as long as the returned object.
GemmOperands make_gemm_operands(Runtime& rt, GemmArgs& g);

}  // namespace fp8jit::cli
