// The two conversions a checkpoint cast needs, on 2-D weights with 128x128 block scales (the
// DeepSeek-V3 / Qwen3-FP8 layout: scales [ceil(N/128), ceil(K/128)] fp32, each the multiplier
// that dequantizes its block): on the GPU through the runtime's kernels, or on the host through
// the reference conversions, which produce the same bytes (the kernels are tested bit-exact
// against them) at a small fraction of the speed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "fp8jit/types.hpp"

namespace fp8jit {
class Runtime;
}

namespace fp8jit::checkpoint {

class Converter {
 public:
  virtual ~Converter() = default;
  // q [n, k] FP8 codes and scales -> y [n, k] bf16 (host memory in and out).
  virtual void dequantize(const std::uint8_t* q, Fp8Format format, std::int64_t n, std::int64_t k,
                          const float* scales, std::uint16_t* y) = 0;
  // x [n, k] (bf16, fp16 or fp32) -> q [n, k] FP8 and scales (host memory in and out);
  // `pow2` rounds every scale up to a power of two (ue8m0).
  virtual void quantize(const void* x, DType input, std::int64_t n, std::int64_t k,
                        Fp8Format format, bool pow2, std::uint8_t* q, float* scales) = 0;
  virtual std::string name() const = 0;  // "gpu (NVIDIA H100 ...)" or "host reference"
  // Seconds spent converting (copies to and from the GPU included), for the I/O-vs-kernel split.
  double seconds = 0;
};

std::unique_ptr<Converter> host_converter();
// Needs a GPU (Error(driver) otherwise); device buffers are kept and grown across calls.
std::unique_ptr<Converter> gpu_converter(Runtime& runtime);

}  // namespace fp8jit::checkpoint
