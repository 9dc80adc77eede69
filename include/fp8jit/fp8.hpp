// Host reference conversions between fp32/bf16/fp16 and the FP8 formats.
//
// They reproduce the GPU's conversion instructions bit for bit, so that tests can demand
// bit-exact equality with device results:
//  - fp32 -> FP8 is `cvt.rn.satfinite.{e4m3,e5m2}x2.f32`: round to nearest even; magnitudes
//    above the largest finite value (inf included) saturate to it, keeping the sign; NaN becomes
//    the canonical NaN 0x7F.
//  - fp32 -> bf16 / fp16 is `cvt.rn.{bf16,f16}.f32`: round to nearest even, overflow to inf,
//    NaN becomes the canonical NaN 0x7FFF (bf16 and fp16 alike).
//  - Narrow -> fp32 is exact (E4M3 0x7F/0xFF -> NaN; E5M2 0x7C/0xFC -> inf).
#pragma once

#include <cstdint>

#include "fp8jit/export.hpp"
#include "fp8jit/types.hpp"

namespace fp8jit::fp8 {

FP8JIT_API std::uint8_t from_float(float x, Fp8Format f);
FP8JIT_API float to_float(std::uint8_t code, Fp8Format f);

FP8JIT_API std::uint16_t float_to_bf16(float x);
FP8JIT_API float bf16_to_float(std::uint16_t bits);
FP8JIT_API std::uint16_t float_to_fp16(float x);
FP8JIT_API float fp16_to_float(std::uint16_t bits);

// Reads one element of a high-precision tensor stored as `dtype` (bf16/fp16 bits or fp32).
FP8JIT_API float load_as_float(const void* base, std::size_t index, DType dtype);
// Writes `x` rounded as the GPU rounds it (see above) into element `index` of `base`; an fp32
// NaN is written as the canonical 0x7FFFFFFF that GPU arithmetic produces.
FP8JIT_API void store_from_float(void* base, std::size_t index, DType dtype, float x);

}  // namespace fp8jit::fp8
