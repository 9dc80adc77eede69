// Conversions between fp32, bf16, fp16 and the FP8 formats, as single PTX instructions so that
// the host reference (fp8jit/fp8.hpp) can reproduce them bit for bit.
#pragma once

#include "fp8jit/common/defs.cuh"

namespace fp8jit {
namespace dev {

// NOTE: explicit .rn arithmetic keeps the compiler from contracting a multiply into an FMA or
// using an approximate division; the host reference performs the same IEEE operations.
FP8JIT_DEVICE float mul_rn(float a, float b) {
  float r;
  asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
FP8JIT_DEVICE float div_rn(float a, float b) {
  float r;
  asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}

// The approximate instructions Triton emits for fp32 `a / b` and `tl.math.exp2`:
// only for reproducing kernels written in Triton (QuantizeProblem::deepseek_arithmetic).
FP8JIT_DEVICE float div_full(float a, float b) {
  float r;
  asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
FP8JIT_DEVICE float ex2_approx(float a) {
  float r;
  asm("ex2.approx.f32 %0, %1;" : "=f"(r) : "f"(a));
  return r;
}

// Two floats -> two FP8 codes, `lo` in the low byte. satfinite: |x| > max and inf -> +-max, NaN -> NaN.
template <int F> FP8JIT_DEVICE u16 f32x2_to_fp8x2(float lo, float hi);
template <> FP8JIT_DEVICE u16 f32x2_to_fp8x2<kE4M3>(float lo, float hi) {
  u16 r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
template <> FP8JIT_DEVICE u16 f32x2_to_fp8x2<kE5M2>(float lo, float hi) {
  u16 r;
  asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}

FP8JIT_DEVICE float f16_bits_to_f32(u16 h) {
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(h));
  return r;
}

// Two FP8 codes (low byte first) -> two floats. Exact: every FP8 value is an fp16 value.
template <int F> FP8JIT_DEVICE void fp8x2_to_f32x2(u16 codes, float& lo, float& hi);
template <> FP8JIT_DEVICE void fp8x2_to_f32x2<kE4M3>(u16 codes, float& lo, float& hi) {
  u32 h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(codes));
  lo = f16_bits_to_f32(static_cast<u16>(h2 & 0xFFFFu));
  hi = f16_bits_to_f32(static_cast<u16>(h2 >> 16));
}
template <> FP8JIT_DEVICE void fp8x2_to_f32x2<kE5M2>(u16 codes, float& lo, float& hi) {
  u32 h2;
  asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(h2) : "h"(codes));
  lo = f16_bits_to_f32(static_cast<u16>(h2 & 0xFFFFu));
  hi = f16_bits_to_f32(static_cast<u16>(h2 >> 16));
}

// One high-precision element, given as raw bits, to float (exact).
template <int E> FP8JIT_DEVICE float elem_to_f32(u32 bits);
template <> FP8JIT_DEVICE float elem_to_f32<kBF16>(u32 bits) { return __uint_as_float(bits << 16); }
template <> FP8JIT_DEVICE float elem_to_f32<kFP16>(u32 bits) {
  return f16_bits_to_f32(static_cast<u16>(bits));
}
template <> FP8JIT_DEVICE float elem_to_f32<kFP32>(u32 bits) { return __uint_as_float(bits); }

// Float to the raw bits of one output element, rounding to nearest even.
template <int E> FP8JIT_DEVICE u32 f32_to_elem(float x);
template <> FP8JIT_DEVICE u32 f32_to_elem<kBF16>(float x) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}
template <> FP8JIT_DEVICE u32 f32_to_elem<kFP16>(float x) {
  u16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}
template <> FP8JIT_DEVICE u32 f32_to_elem<kFP32>(float x) { return __float_as_uint(x); }

}  // namespace dev
}  // namespace fp8jit
