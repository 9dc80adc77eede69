// Host reference implementations of quantize and dequantize.
//
// They take the same argument structs as the GPU operations, with HOST pointers, and produce the
// bytes the GPU kernels must produce bit for bit (same IEEE operations, same rounding). Slow and
// simple on purpose: tests and `fp8jit` demos check the kernels against them.
#pragma once

#include "fp8jit/runtime.hpp"

namespace fp8jit::reference {

// Scale and reciprocal for a group's amax, as the kernels compute them.
struct ScalePair {
  float scale;
  float inv;
};
ScalePair scale_from_amax(float amax, Fp8Format format, bool pow2);
ScalePair scale_from_static(float scale);

void quantize(const QuantizeArgs& host_args);
void dequantize(const DequantizeArgs& host_args);

}  // namespace fp8jit::reference
