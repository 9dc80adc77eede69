// Scale arithmetic of the FP8 recipes. The host reference (tests/common) performs exactly these
// IEEE operations, so scales and FP8 codes can be compared bit for bit.
#pragma once

#include "fp8jit/common/convert.cuh"

namespace fp8jit {
namespace dev {

// NOTE: an all-zero group would give scale 0 and an infinite reciprocal; the floor keeps both
// finite (as torchao's EPS does) while staying far below any real activation's amax.
constexpr float kAmaxFloor = 1e-12f;
constexpr float kFloatMax = 3.40282346638528859812e+38f;

template <int F> struct Fp8Max;
template <> struct Fp8Max<kE4M3> { static constexpr float value = 448.0f; };
template <> struct Fp8Max<kE5M2> { static constexpr float value = 57344.0f; };

struct ScalePair {
  float scale;  // dequantisation factor: x ~= fp8 * scale
  float inv;    // quantisation factor: fp8 = cvt(x * inv)
};

// scale = amax / fp8_max, amax clamped to [floor, FLT_MAX] (so inf inputs give a finite scale).
// With pow2, the scale is rounded up to a power of two (DeepSeek-V3.1, TransformerEngine's block
// recipe) and its reciprocal is exact.
FP8JIT_DEVICE ScalePair scale_from_amax(float amax, float fmax, bool pow2) {
  const float a = fminf(fmaxf(amax, kAmaxFloor), kFloatMax);
  ScalePair sp;
  if (pow2) {
    u32 bits = __float_as_uint(div_rn(a, fmax));
    if (bits & 0x7FFFFFu) bits = (bits & 0xFF800000u) + 0x800000u;
    sp.scale = __uint_as_float(bits);
    sp.inv = __uint_as_float((254u - (bits >> 23)) << 23);
  } else {
    sp.scale = div_rn(a, fmax);
    sp.inv = div_rn(fmax, a);
  }
  return sp;
}

// DeepSeek-V3's act_quant (inference/kernel.py): s = max(amax, 1e-4) / 448 with Triton's
// div.full.f32, ue8m0 as exp2(ceil(log2(s))); the codes are then x / s, not x * inv. Triton's
// log2 is libdevice's log2f (its PTX has no lg2), which is exact at powers of two; lg2.approx is
// not: for amax 3.5 (s = 2^-7) it rounded 10 of 3584 scales of a randn tensor up to 2^-6.
FP8JIT_DEVICE float scale_deepseek(float amax, bool pow2) {
  float s = div_full(fmaxf(amax, 1e-4f), 448.0f);
  if (pow2) s = ex2_approx(ceilf(log2f(s)));
  return s;
}

FP8JIT_DEVICE ScalePair scale_from_static(float scale) {
  ScalePair sp;
  sp.scale = scale;
  sp.inv = div_rn(1.0f, scale);
  return sp;
}

}  // namespace dev
}  // namespace fp8jit
