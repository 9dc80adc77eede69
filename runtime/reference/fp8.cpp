// Host reference conversions (see fp8.hpp for the contract).
//
// Everything is integer arithmetic on IEEE bit patterns: the results must match the GPU's cvt
// instructions bit for bit, so they may not depend on the host FPU rounding mode, on x87 excess
// precision or on flags such as -ffast-math.
#include "fp8jit/fp8.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "fp8jit/error.hpp"

namespace fp8jit::fp8 {
namespace {

// A binary format narrower than fp32. The exponent width is not needed here: what lies above
// the largest finite code (saturation, inf, NaN) is decided by each public entry point.
struct Narrow {
  int bias;
  int mantissa_bits;
};

constexpr Narrow k_e4m3{7, 3};
constexpr Narrow k_e5m2{15, 2};
constexpr Narrow k_fp16{15, 10};
constexpr Narrow k_bf16{127, 7};

constexpr std::uint32_t k_f32_inf = 0x7F800000u;

// v >> shift, rounded to nearest with ties to even.
std::uint64_t shift_right_rne(std::uint64_t v, int shift) {
  if (shift <= 0) return v;
  // Callers pass v < 2^32, so for such shifts v is below half a unit: the result is zero.
  if (shift >= 40) return 0;
  const std::uint64_t q = v >> shift;
  const std::uint64_t rem = v & ((std::uint64_t{1} << shift) - 1);
  const std::uint64_t half = std::uint64_t{1} << (shift - 1);
  return (rem > half || (rem == half && (q & 1) != 0)) ? q + 1 : q;
}

// Rounds a finite fp32 magnitude (sign bit clear) to the narrow format and returns the magnitude
// code, exponent field << mantissa_bits | mantissa. A result past the largest finite code is
// returned unclamped; codes are monotonic in value, so callers clamp with std::min.
std::uint32_t round_magnitude(std::uint32_t mag, Narrow f) {
  const int exp_field = static_cast<int>(mag >> 23);
  const std::uint32_t mant = mag & 0x7FFFFFu;
  const int drop = 23 - f.mantissa_bits;
  // fp32 subnormals use the exponent of exp_field 1, without the implicit bit.
  const int target_exp = std::max(exp_field, 1) - 127 + f.bias;
  if (target_exp > 1) {
    // Rebias and round in one go: a carry out of the mantissa bumps the exponent field, which
    // is exactly the binade change that rounding up to a power of two needs.
    const std::uint64_t v = (static_cast<std::uint64_t>(target_exp) << 23) | mant;
    return static_cast<std::uint32_t>(shift_right_rne(v, drop));
  }
  // Target subnormals and the lowest normal binade share the quantum 2^(1-bias-mantissa_bits),
  // and there the code is just the value counted in that quantum.
  const std::uint64_t sig = exp_field == 0 ? mant : (mant | 0x800000u);
  return static_cast<std::uint32_t>(shift_right_rne(sig, drop + (1 - target_exp)));
}

// Exact fp32 bits of a finite narrow magnitude code. Only for formats whose subnormals are
// normal in fp32 (FP8, fp16); bf16 shares fp32's exponent range and is a plain shift.
std::uint32_t widen_magnitude(std::uint32_t mag, Narrow f) {
  if (mag == 0) return 0;
  const int m = f.mantissa_bits;
  const std::uint32_t implicit = 1u << m;
  int exp_field = static_cast<int>(mag >> m);
  std::uint32_t mant = mag & (implicit - 1);
  if (exp_field == 0) {
    // Normalise: fp32 has the range to hold every subnormal of these formats as a normal.
    exp_field = 1;
    while ((mant & implicit) == 0) {
      mant <<= 1;
      --exp_field;
    }
    mant &= implicit - 1;
  }
  const auto f32_exp = static_cast<std::uint32_t>(exp_field - f.bias + 127);
  return (f32_exp << 23) | (mant << (23 - m));
}

float quiet_nan(std::uint32_t sign) { return std::bit_cast<float>(sign | 0x7FC00000u); }

[[noreturn]] void bad_format(Fp8Format f) {
  throw_invalid("fp8 format", std::to_string(static_cast<int>(f)), "expected e4m3 or e5m2");
}

[[noreturn]] void bad_dtype(DType d) {
  throw_invalid("dtype", std::to_string(static_cast<int>(d)), "expected bf16, fp16 or fp32");
}

}  // namespace

std::uint8_t from_float(float x, Fp8Format f) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (bits >> 24) & 0x80u;
  const std::uint32_t mag = bits & 0x7FFFFFFFu;
  Narrow fmt{};
  std::uint32_t max_code = 0;
  switch (f) {
    case Fp8Format::e4m3: fmt = k_e4m3; max_code = 0x7E; break;
    case Fp8Format::e5m2: fmt = k_e5m2; max_code = 0x7B; break;
    default: bad_format(f);
  }
  // The GPU returns the positive canonical NaN whatever the input's sign and payload.
  if (mag > k_f32_inf) return 0x7F;
  // satfinite: inf and everything that rounds past the largest finite value clamp to it.
  const std::uint32_t code =
      mag == k_f32_inf ? max_code : std::min(round_magnitude(mag, fmt), max_code);
  return static_cast<std::uint8_t>(sign | code);
}

float to_float(std::uint8_t code, Fp8Format f) {
  const std::uint32_t sign = static_cast<std::uint32_t>(code & 0x80u) << 24;
  const std::uint32_t mag = code & 0x7Fu;
  switch (f) {
    case Fp8Format::e4m3:
      if (mag == 0x7F) return quiet_nan(sign);
      return std::bit_cast<float>(sign | widen_magnitude(mag, k_e4m3));
    case Fp8Format::e5m2:
      if (mag == 0x7C) return std::bit_cast<float>(sign | k_f32_inf);
      if (mag > 0x7C) return quiet_nan(sign);
      return std::bit_cast<float>(sign | widen_magnitude(mag, k_e5m2));
  }
  bad_format(f);
}

std::uint16_t float_to_bf16(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > k_f32_inf) return 0x7FFF;
  if (mag == k_f32_inf) return static_cast<std::uint16_t>(sign | 0x7F80u);
  return static_cast<std::uint16_t>(sign | std::min(round_magnitude(mag, k_bf16), 0x7F80u));
}

float bf16_to_float(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_fp16(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > k_f32_inf) return 0x7FFF;
  // IEEE overflow: anything that rounds past 65504 (i.e. >= 65520) becomes inf.
  if (mag == k_f32_inf) return static_cast<std::uint16_t>(sign | 0x7C00u);
  return static_cast<std::uint16_t>(sign | std::min(round_magnitude(mag, k_fp16), 0x7C00u));
}

float fp16_to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t mag = bits & 0x7FFFu;
  if (mag == 0x7C00) return std::bit_cast<float>(sign | k_f32_inf);
  if (mag > 0x7C00) return quiet_nan(sign);
  return std::bit_cast<float>(sign | widen_magnitude(mag, k_fp16));
}

// memcpy rather than pointer casts: callers hand us raw byte buffers of unknown alignment and
// effective type.
float load_as_float(const void* base, std::size_t index, DType dtype) {
  const auto* p = static_cast<const unsigned char*>(base);
  switch (dtype) {
    case DType::bf16:
    case DType::fp16: {
      std::uint16_t b = 0;
      std::memcpy(&b, p + index * sizeof b, sizeof b);
      return dtype == DType::bf16 ? bf16_to_float(b) : fp16_to_float(b);
    }
    case DType::fp32: {
      float v = 0;
      std::memcpy(&v, p + index * sizeof v, sizeof v);
      return v;
    }
  }
  bad_dtype(dtype);
}

void store_from_float(void* base, std::size_t index, DType dtype, float x) {
  auto* p = static_cast<unsigned char*>(base);
  switch (dtype) {
    case DType::bf16:
    case DType::fp16: {
      const std::uint16_t b = dtype == DType::bf16 ? float_to_bf16(x) : float_to_fp16(x);
      std::memcpy(p + index * sizeof b, &b, sizeof b);
      return;
    }
    case DType::fp32: {
      // GPU arithmetic (mul.rn.f32) yields the canonical NaN 0x7FFFFFFF whatever the inputs'
      // payloads and signs; an fp32 result stored "as the GPU does" must too.
      const std::uint32_t nan = 0x7FFFFFFFu;
      if (std::isnan(x)) std::memcpy(p + index * sizeof x, &nan, sizeof nan);
      else std::memcpy(p + index * sizeof x, &x, sizeof x);
      return;
    }
  }
  bad_dtype(dtype);
}

}  // namespace fp8jit::fp8
