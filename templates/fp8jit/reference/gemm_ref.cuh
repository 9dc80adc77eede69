// A float64 reference GEMM of the dequantized operands: one thread per output element, the
// exact FP8 values (via fp16) times their scales, summed in double. Slow and obviously right;
// it checks the fast kernels on shapes far too large for a CPU reference.
#pragma once

#include "fp8jit/common/convert.cuh"
#include "fp8jit/common/memory.cuh"
#include "fp8jit/reference/gemm_ref_params.cuh"

namespace fp8jit {
namespace dev {


FP8JIT_DEVICE double fp8_to_double(unsigned char code, int format) {
  float lo, hi;
  if (format == kE4M3) fp8x2_to_f32x2<kE4M3>(code, lo, hi);
  else fp8x2_to_f32x2<kE5M2>(code, lo, hi);
  return lo;
}

FP8JIT_DEVICE void gemm_reference(const GemmRefParams& p) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int m = blockIdx.y;
  if (n >= p.N || m >= p.M) return;
  double total = 0.0;
  for (int k0 = 0; k0 < p.K; k0 += 128) {
    double part = 0.0;
    for (int k = k0; k < min(k0 + 128, p.K); ++k)
      part += fp8_to_double(p.a[m * p.lda + k], p.a_format) * fp8_to_double(p.b[n * p.ldb + k], p.b_format);
    const int kb = k0 / 128;
    double s = 1.0;
    if (p.mode == 1) s = double(p.scale_a[m]) * double(p.scale_b[n]);
    if (p.mode == 2) s = double(p.scale_a[m * p.sa_rs + kb * p.sa_cs]) * double(p.scale_b[(n / 128) * p.sb_rs + kb * p.sb_cs]);
    if (p.mode == 3) s = double(p.scale_a[m * p.sa_rs + kb * p.sa_cs]) * double(p.scale_b[n * p.sb_rs + kb * p.sb_cs]);
    total += part * s;
  }
  if (p.mode == 0) total *= double(p.scale_a[0]) * double(p.scale_b[0]);
  if (p.bias) {
    const u32 bits = p.bias_elem == kFP32 ? load_bits<4>(p.bias, n) : load_bits<2>(p.bias, n);
    total += p.bias_elem == kBF16 ? elem_to_f32<kBF16>(bits) : p.bias_elem == kFP16 ? elem_to_f32<kFP16>(bits) : elem_to_f32<kFP32>(bits);
  }
  p.out[static_cast<long long>(m) * p.N + n] = total;
}

}  // namespace dev
}  // namespace fp8jit
