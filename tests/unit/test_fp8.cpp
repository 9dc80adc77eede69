// Exhaustive checks of the host reference conversions in fp8.hpp and the helpers in types.hpp.
//
// Expected values come from formulas that share nothing with the implementation (std::ldexp
// over the code's bit fields, rounding done in double), so one mistake cannot hide in both.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/types.hpp"

namespace fp8jit {
namespace {

constexpr float k_inf = std::numeric_limits<float>::infinity();

// Field layout of a binary format, as the OCP FP8 / IEEE specs define it.
struct Layout {
  int exp_bits;
  int man_bits;
  int bias;
};

constexpr Layout k_e4m3{4, 3, 7};
constexpr Layout k_e5m2{5, 2, 15};
constexpr Layout k_fp16{5, 10, 15};
constexpr Layout k_bf16{8, 7, 127};

// Value of a finite code from its sign/exponent/mantissa fields.
double field_value(std::uint32_t code, Layout l) {
  const bool neg = ((code >> (l.exp_bits + l.man_bits)) & 1) != 0;
  const int e = static_cast<int>((code >> l.man_bits) & ((1u << l.exp_bits) - 1));
  const int m = static_cast<int>(code & ((1u << l.man_bits) - 1));
  const double mag = e == 0 ? std::ldexp(m, 1 - l.bias - l.man_bits)
                            : std::ldexp((1 << l.man_bits) + m, e - l.bias - l.man_bits);
  return neg ? -mag : mag;
}

// Correct rounding to nearest even of x in double arithmetic, for a format with `man_bits`
// fraction bits, smallest normal exponent `emin` and largest finite value `max`. Results past
// `max` are returned as inf; callers wanting satfinite clamp afterwards.
double round_ref(double x, int man_bits, int emin, double max) {
  const double ax = std::fabs(x);
  if (ax == 0) return x;
  int e = 0;
  std::frexp(ax, &e);  // ax in [2^(e-1), 2^e)
  const int q_exp = std::max(e - 1, emin) - man_bits;
  const double n = std::ldexp(ax, -q_exp);  // exact: only the exponent changes
  double r = std::floor(n);
  const double frac = n - r;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(r, 2.0) != 0)) r += 1;
  double y = std::ldexp(r, q_exp);
  if (y > max) y = std::numeric_limits<double>::infinity();
  return std::copysign(y, x);
}

struct Fp8Case {
  Fp8Format f;
  Layout l;
  std::uint8_t max_code;
  double max;
  const char* name;
};

const Fp8Case k_fp8_cases[] = {
    {Fp8Format::e4m3, k_e4m3, 0x7E, 448.0, "e4m3"},
    {Fp8Format::e5m2, k_e5m2, 0x7B, 57344.0, "e5m2"},
};

bool fp8_is_nan_code(std::uint8_t c, Fp8Format f) {
  const unsigned mag = c & 0x7Fu;
  return f == Fp8Format::e4m3 ? mag == 0x7F : mag > 0x7C;
}

bool fp8_is_inf_code(std::uint8_t c, Fp8Format f) {
  return f == Fp8Format::e5m2 && (c & 0x7Fu) == 0x7C;
}

// Bits compared as hex make failures readable.
std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%02X", v);
  return buf;
}

float neg_if(bool neg, float v) { return neg ? -v : v; }

// ---- FP8 ------------------------------------------------------------------------------------

TEST(Fp8HostFp8, AnchorValues) {
  using fp8::to_float;
  EXPECT_EQ(to_float(0x7E, Fp8Format::e4m3), 448.0f);
  EXPECT_EQ(to_float(0x01, Fp8Format::e4m3), std::ldexp(1.0f, -9));
  EXPECT_EQ(to_float(0x08, Fp8Format::e4m3), std::ldexp(1.0f, -6));
  EXPECT_EQ(to_float(0x38, Fp8Format::e4m3), 1.0f);
  EXPECT_EQ(to_float(0xFE, Fp8Format::e4m3), -448.0f);
  EXPECT_EQ(to_float(0x7B, Fp8Format::e5m2), 57344.0f);
  EXPECT_EQ(to_float(0x01, Fp8Format::e5m2), std::ldexp(1.0f, -16));
  EXPECT_EQ(to_float(0x3C, Fp8Format::e5m2), 1.0f);
  EXPECT_EQ(to_float(0x7C, Fp8Format::e5m2), k_inf);
  EXPECT_EQ(to_float(0xFC, Fp8Format::e5m2), -k_inf);
  EXPECT_TRUE(std::isnan(to_float(0x7F, Fp8Format::e4m3)));
  EXPECT_TRUE(std::isnan(to_float(0xFF, Fp8Format::e4m3)));
  for (unsigned c : {0x7Du, 0x7Eu, 0x7Fu, 0xFDu, 0xFEu, 0xFFu})
    EXPECT_TRUE(std::isnan(to_float(static_cast<std::uint8_t>(c), Fp8Format::e5m2))) << hex(c);
  EXPECT_EQ(fp8_max(Fp8Format::e4m3), to_float(0x7E, Fp8Format::e4m3));
  EXPECT_EQ(fp8_max(Fp8Format::e5m2), to_float(0x7B, Fp8Format::e5m2));
}

TEST(Fp8HostFp8, DecodeMatchesFieldFormula) {
  for (const auto& fc : k_fp8_cases) {
    for (unsigned u = 0; u < 256; ++u) {
      const auto c = static_cast<std::uint8_t>(u);
      const float v = fp8::to_float(c, fc.f);
      SCOPED_TRACE(std::string(fc.name) + " code " + hex(u));
      if (fp8_is_nan_code(c, fc.f)) {
        EXPECT_TRUE(std::isnan(v));
      } else if (fp8_is_inf_code(c, fc.f)) {
        EXPECT_EQ(v, (u & 0x80) ? -k_inf : k_inf);
      } else {
        EXPECT_EQ(static_cast<double>(v), field_value(u, fc.l));
        EXPECT_EQ(std::signbit(v), (u & 0x80) != 0);  // also pins -0 for 0x80
      }
    }
  }
}

TEST(Fp8HostFp8, EncodeOfDecodeRoundTrips) {
  for (const auto& fc : k_fp8_cases) {
    for (unsigned u = 0; u < 256; ++u) {
      const auto c = static_cast<std::uint8_t>(u);
      unsigned want = u;
      if (fp8_is_nan_code(c, fc.f)) want = 0x7F;
      if (fp8_is_inf_code(c, fc.f)) want = (u & 0x80) | fc.max_code;  // satfinite
      EXPECT_EQ(hex(fp8::from_float(fp8::to_float(c, fc.f), fc.f)), hex(want))
          << fc.name << " code " << hex(u);
    }
  }
}

// For each pair of adjacent non-negative codes, the exact midpoint and its two fp32 neighbours.
TEST(Fp8HostFp8, RoundingBoundaries) {
  for (const auto& fc : k_fp8_cases) {
    for (unsigned c = 0; c <= fc.max_code; ++c) {
      const bool top = c == fc.max_code;
      const double a = field_value(c, fc.l);
      // Past the top, b is where the next code would be if the format continued.
      const double b = top ? 2 * a - field_value(c - 1, fc.l) : field_value(c + 1, fc.l);
      const double mid = (a + b) / 2;
      const auto m = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(m), mid);
      const unsigned even = (c % 2 == 0) ? c : c + 1;
      // satfinite: at the top everything rounds (or clamps) to the largest finite code.
      const unsigned at_mid = top ? c : even;
      const unsigned above = top ? c : c + 1;
      for (bool neg : {false, true}) {
        const unsigned s = neg ? 0x80 : 0;
        SCOPED_TRACE(std::string(fc.name) + " between " + hex(s | c) + " and next");
        EXPECT_EQ(hex(fp8::from_float(neg_if(neg, m), fc.f)), hex(s | at_mid));
        EXPECT_EQ(hex(fp8::from_float(neg_if(neg, std::nextafter(m, -k_inf)), fc.f)),
                  hex(s | c));
        EXPECT_EQ(hex(fp8::from_float(neg_if(neg, std::nextafter(m, k_inf)), fc.f)),
                  hex(s | above));
        EXPECT_EQ(hex(fp8::from_float(neg_if(neg, static_cast<float>(a)), fc.f)), hex(s | c));
      }
    }
  }
}

TEST(Fp8HostFp8, ZeroSignAndUnderflow) {
  const float tiny = std::numeric_limits<float>::denorm_min();
  for (const auto& fc : k_fp8_cases) {
    EXPECT_EQ(fp8::from_float(0.0f, fc.f), 0x00) << fc.name;
    EXPECT_EQ(fp8::from_float(-0.0f, fc.f), 0x80) << fc.name;
    EXPECT_EQ(fp8::from_float(tiny, fc.f), 0x00) << fc.name;
    EXPECT_EQ(fp8::from_float(-tiny, fc.f), 0x80) << fc.name;
    EXPECT_EQ(fp8::from_float(std::numeric_limits<float>::min(), fc.f), 0x00) << fc.name;
  }
}

TEST(Fp8HostFp8, SaturationAndNan) {
  const float big[] = {1000.0f, 60000.0f, 65536.0f, 1e10f, 1e30f,
                       std::numeric_limits<float>::max(), k_inf};
  for (const auto& fc : k_fp8_cases) {
    for (float v : big) {
      if (v <= fc.max) continue;
      EXPECT_EQ(hex(fp8::from_float(v, fc.f)), hex(fc.max_code)) << fc.name << " " << v;
      EXPECT_EQ(hex(fp8::from_float(-v, fc.f)), hex(0x80 | fc.max_code)) << fc.name << " " << -v;
    }
    for (std::uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu,
                               0xFFFFFFFFu, 0x7FA00000u}) {
      EXPECT_EQ(hex(fp8::from_float(std::bit_cast<float>(bits), fc.f)), hex(0x7F))
          << fc.name << " NaN bits " << bits;
    }
  }
}

// Decoded result against double-based correct rounding, over a strided sample of all fp32
// bit patterns (both signs, every binade).
TEST(Fp8HostFp8, StridedSampleMatchesReference) {
  for (const auto& fc : k_fp8_cases) {
    const int emin = 1 - fc.l.bias;
    std::size_t failures = 0;
    for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32) && failures < 10; bits += 1021) {
      const auto x = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
      if (std::isnan(x)) continue;
      double want = round_ref(x, fc.l.man_bits, emin, fc.max);
      if (std::isinf(want)) want = std::copysign(fc.max, want);
      const float got = fp8::to_float(fp8::from_float(x, fc.f), fc.f);
      if (static_cast<double>(got) != want || std::signbit(got) != std::signbit(want)) {
        ++failures;
        ADD_FAILURE() << fc.name << " x=" << x << " (bits " << bits << ") got " << got
                      << " want " << want;
      }
    }
  }
}

// ---- bf16 / fp16 ----------------------------------------------------------------------------

struct HalfCase {
  Layout l;
  std::uint16_t (*encode)(float);
  float (*decode)(std::uint16_t);
  std::uint16_t max_code;  // largest finite; max_code + 1 is +inf
  const char* name;
};

const HalfCase k_half_cases[] = {
    {k_bf16, fp8::float_to_bf16, fp8::bf16_to_float, 0x7F7F, "bf16"},
    {k_fp16, fp8::float_to_fp16, fp8::fp16_to_float, 0x7BFF, "fp16"},
};

TEST(Fp8HostHalf, DecodeMatchesFieldFormula) {
  for (const auto& hc : k_half_cases) {
    const std::uint32_t exp_all_ones = ((1u << hc.l.exp_bits) - 1) << hc.l.man_bits;
    for (std::uint32_t u = 0; u < 0x10000; ++u) {
      const float v = hc.decode(static_cast<std::uint16_t>(u));
      const std::uint32_t mag = u & 0x7FFF;
      if ((mag & exp_all_ones) == exp_all_ones) {
        if (mag == exp_all_ones)
          ASSERT_EQ(v, (u & 0x8000) ? -k_inf : k_inf) << hc.name << " " << u;
        else
          ASSERT_TRUE(std::isnan(v)) << hc.name << " " << u;
      } else {
        ASSERT_EQ(static_cast<double>(v), field_value(u, hc.l)) << hc.name << " " << u;
        ASSERT_EQ(std::signbit(v), (u & 0x8000) != 0) << hc.name << " " << u;
      }
    }
  }
}

TEST(Fp8HostHalf, EncodeOfDecodeRoundTrips) {
  for (const auto& hc : k_half_cases) {
    for (std::uint32_t u = 0; u < 0x10000; ++u) {
      const float v = hc.decode(static_cast<std::uint16_t>(u));
      const std::uint32_t want = std::isnan(v) ? 0x7FFF : u;
      ASSERT_EQ(hc.encode(v), want) << hc.name << " bits " << u;
    }
  }
}

TEST(Fp8HostHalf, AnchorValues) {
  using fp8::float_to_bf16;
  using fp8::float_to_fp16;
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7C00);  // tie with 65536 rounds to even: inf
  EXPECT_EQ(float_to_fp16(-65520.0f), 0xFC00);
  EXPECT_EQ(float_to_fp16(1e9f), 0x7C00);
  EXPECT_EQ(float_to_fp16(-k_inf), 0xFC00);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_EQ(float_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(float_to_fp16(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -14) - std::ldexp(1.0f, -25)), 0x0400);
  EXPECT_EQ(float_to_fp16(-std::ldexp(1.0f, -26)), 0x8000);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(3.0f, -8)), 0x3F82);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_bf16(std::ldexp(1.0f, -133)), 0x0001);
  EXPECT_EQ(float_to_bf16(-k_inf), 0xFF80);
  for (std::uint32_t bits : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFFFFFFFFu}) {
    EXPECT_EQ(float_to_bf16(std::bit_cast<float>(bits)), 0x7FFF) << bits;
    EXPECT_EQ(float_to_fp16(std::bit_cast<float>(bits)), 0x7FFF) << bits;
  }
}

// Every midpoint between adjacent finite codes, including max and the would-be next value,
// where IEEE rounding overflows to inf.
TEST(Fp8HostHalf, RoundingBoundaries) {
  for (const auto& hc : k_half_cases) {
    for (std::uint32_t c = 0; c <= hc.max_code; ++c) {
      const bool top = c == hc.max_code;
      const double a = field_value(c, hc.l);
      const double b = top ? 2 * a - field_value(c - 1, hc.l) : field_value(c + 1, hc.l);
      const double mid = (a + b) / 2;
      const auto m = static_cast<float>(mid);
      ASSERT_EQ(static_cast<double>(m), mid) << hc.name << " " << c;
      const std::uint32_t even = (c % 2 == 0) ? c : c + 1;  // c + 1 past the top is inf: even
      for (bool neg : {false, true}) {
        const std::uint32_t s = neg ? 0x8000 : 0;
        ASSERT_EQ(hc.encode(neg_if(neg, m)), s | even) << hc.name << " mid above " << c;
        ASSERT_EQ(hc.encode(neg_if(neg, std::nextafter(m, -k_inf))), s | c)
            << hc.name << " below mid above " << c;
        ASSERT_EQ(hc.encode(neg_if(neg, std::nextafter(m, k_inf))), s | (c + 1))
            << hc.name << " above mid above " << c;
      }
    }
  }
}

TEST(Fp8HostHalf, StridedSampleMatchesReference) {
  for (const auto& hc : k_half_cases) {
    const int emin = 1 - hc.l.bias;
    const double max = field_value(hc.max_code, hc.l);
    std::size_t failures = 0;
    for (std::uint64_t bits = 0; bits < (std::uint64_t{1} << 32) && failures < 10; bits += 509) {
      const auto x = std::bit_cast<float>(static_cast<std::uint32_t>(bits));
      if (std::isnan(x)) continue;
      const double want = round_ref(x, hc.l.man_bits, emin, max);
      const float got = hc.decode(hc.encode(x));
      if (static_cast<double>(got) != want || std::signbit(got) != std::signbit(want)) {
        ++failures;
        ADD_FAILURE() << hc.name << " x=" << x << " (bits " << bits << ") got " << got
                      << " want " << want;
      }
    }
  }
}

// ---- element access -------------------------------------------------------------------------

TEST(Fp8HostAccess, StoreAndLoadEachDtype) {
  const float values[] = {1.0f, -2.25f, 3.0e38f, 1.0f + std::ldexp(1.0f, -9), 1e-30f};
  for (DType d : {DType::bf16, DType::fp16, DType::fp32}) {
    constexpr std::size_t n = std::size(values);
    std::vector<unsigned char> buf(n * dtype_size(d) + 8, 0xAB);
    for (std::size_t i = 0; i < n; ++i) fp8::store_from_float(buf.data(), i, d, values[i]);
    for (std::size_t i = n * dtype_size(d); i < buf.size(); ++i)
      ASSERT_EQ(buf[i], 0xAB) << "wrote past the last element";
    for (std::size_t i = 0; i < n; ++i) {
      const float got = fp8::load_as_float(buf.data(), i, d);
      std::uint16_t raw = 0;
      std::memcpy(&raw, buf.data() + 2 * i, 2);
      switch (d) {
        case DType::bf16:
          EXPECT_EQ(raw, fp8::float_to_bf16(values[i]));
          EXPECT_EQ(got, fp8::bf16_to_float(fp8::float_to_bf16(values[i])));
          break;
        case DType::fp16:
          EXPECT_EQ(raw, fp8::float_to_fp16(values[i]));
          EXPECT_EQ(got, fp8::fp16_to_float(fp8::float_to_fp16(values[i])));
          break;
        case DType::fp32: EXPECT_EQ(got, values[i]); break;
      }
    }
  }
  // Spot values so the above cannot pass with a consistently wrong encoder.
  std::uint16_t h[2] = {};
  fp8::store_from_float(h, 1, DType::bf16, 1.0f);
  EXPECT_EQ(h[0], 0);
  EXPECT_EQ(h[1], 0x3F80);
  fp8::store_from_float(h, 0, DType::fp16, -2.0f);
  EXPECT_EQ(h[0], 0xC000);
}

// ---- enums and errors -----------------------------------------------------------------------

TEST(Fp8HostTypes, EnumNamesRoundTrip) {
  const std::pair<DType, std::string_view> dtypes[] = {
      {DType::bf16, "bf16"}, {DType::fp16, "fp16"}, {DType::fp32, "fp32"}};
  for (auto [v, s] : dtypes) {
    EXPECT_EQ(to_string(v), s);
    EXPECT_EQ(parse_dtype(s), v);
  }
  const std::pair<Fp8Format, std::string_view> formats[] = {{Fp8Format::e4m3, "e4m3"},
                                                             {Fp8Format::e5m2, "e5m2"}};
  for (auto [v, s] : formats) {
    EXPECT_EQ(to_string(v), s);
    EXPECT_EQ(parse_fp8_format(s), v);
  }
  const std::pair<Granularity, std::string_view> grans[] = {{Granularity::tensor, "tensor"},
                                                           {Granularity::row, "row"},
                                                           {Granularity::group128, "1x128"},
                                                           {Granularity::block128, "128x128"}};
  for (auto [v, s] : grans) {
    EXPECT_EQ(to_string(v), s);
    EXPECT_EQ(parse_granularity(s), v);
  }
  const std::pair<ScaleLayout, std::string_view> layouts[] = {
      {ScaleLayout::row_major, "row_major"}, {ScaleLayout::col_major_tma, "col_major_tma"}};
  for (auto [v, s] : layouts) {
    EXPECT_EQ(to_string(v), s);
    EXPECT_EQ(parse_scale_layout(s), v);
  }
}

TEST(Fp8HostTypes, ParseRejectsUnknown) {
  for (std::string_view s : {"", "BF16", "bf16 ", "float", "e4m3", "fp8"})
    EXPECT_FALSE(parse_dtype(s).has_value()) << s;
  for (std::string_view s : {"", "E4M3", "e4m3fn", "e5m2fnuz", "fp32"})
    EXPECT_FALSE(parse_fp8_format(s).has_value()) << s;
  for (std::string_view s : {"", "group128", "block128", "128", "1x64", "Tensor", "128x128 "})
    EXPECT_FALSE(parse_granularity(s).has_value()) << s;
  for (std::string_view s : {"", "col_major", "row-major", "ROW_MAJOR", "tma"})
    EXPECT_FALSE(parse_scale_layout(s).has_value()) << s;
}

TEST(Fp8HostTypes, SizesAndMax) {
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
  EXPECT_EQ(dtype_size(DType::fp16), 2u);
  EXPECT_EQ(dtype_size(DType::fp32), 4u);
  EXPECT_EQ(fp8_max(Fp8Format::e4m3), 448.0f);
  EXPECT_EQ(fp8_max(Fp8Format::e5m2), 57344.0f);
}

TEST(Fp8HostTypes, ErrorHelpers) {
  try {
    throw_invalid("block_k", "96", "must be a multiple of 128");
    FAIL() << "throw_invalid returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_STREQ(e.what(), "invalid block_k = 96: must be a multiple of 128");
  }
  try {
    throw_unsupported("compute capability 8.0: FP8 GEMM needs sm_90");
    FAIL() << "throw_unsupported returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::unsupported);
    EXPECT_NE(std::string(e.what()).find("sm_90"), std::string::npos);
  }
  EXPECT_THROW(fp8::from_float(1.0f, static_cast<Fp8Format>(7)), Error);
  EXPECT_THROW(fp8::load_as_float(nullptr, 0, static_cast<DType>(9)), Error);
}

}  // namespace
}  // namespace fp8jit
