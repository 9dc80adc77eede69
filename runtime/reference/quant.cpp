#include "fp8jit/reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "runtime/ops/elementwise.hpp"

namespace fp8jit::reference {
namespace {

constexpr float kAmaxFloor = 1e-12f;  // templates/fp8jit/common/scale.cuh
constexpr std::int64_t kGroup = 128;

std::uint32_t bits_of(float f) {
  std::uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
float float_of(std::uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// fmaxf semantics: a NaN operand is ignored.
float max_abs(float acc, float x) { return std::isnan(x) ? acc : std::max(acc, std::fabs(x)); }

struct ScaleIndex {
  std::int64_t rs = 0, cs = 0;
  std::int64_t at(std::int64_t i, std::int64_t j) const { return i * rs + j * cs; }
};

ScaleIndex index_for(Granularity g, ScaleLayout layout, std::int64_t m, std::int64_t k) {
  const std::int64_t groups = (k + kGroup - 1) / kGroup;
  const std::int64_t rows = g == Granularity::block128 ? (m + kGroup - 1) / kGroup : m;
  if (g == Granularity::tensor) return {0, 0};
  if (g == Granularity::row) return {1, 0};
  if (layout == ScaleLayout::row_major) return {groups, 1};
  return {1, (rows + 3) / 4 * 4};
}

// QuantizeArgs::column_sums in the kernels' order (templates/fp8jit/quant/column_sums.cuh), which
// no config changes: per 128-row tile the halving fold of its rows (rows past m as 0: a[r] +=
// a[r + 64] for r < 64, then + 32, ..., + 1), the tiles' sums added to 0 in tile order.
template <class X>
void column_sums(const QuantizeArgs& a, X x) {
  for (std::int64_t c = 0; c < a.k; ++c) {
    float sum = 0.0f;
    for (std::int64_t r0 = 0; r0 < a.m; r0 += kGroup) {
      float fold[kGroup];
      for (std::int64_t r = 0; r < kGroup; ++r) fold[r] = r0 + r < a.m ? x(r0 + r, c) : 0.0f;
      for (std::int64_t h = kGroup / 2; h >= 1; h /= 2)
        for (std::int64_t r = 0; r < h; ++r) fold[r] += fold[r + h];
      sum += fold[0];
    }
    a.column_sums[c] = sum;
  }
}

}  // namespace

ScalePair scale_from_amax(float amax, Fp8Format format, bool pow2) {
  const float fmax = fp8_max(format);
  const float a = std::min(std::max(amax, kAmaxFloor), std::numeric_limits<float>::max());
  if (!pow2) return {a / fmax, fmax / a};
  std::uint32_t b = bits_of(a / fmax);
  if (b & 0x7FFFFFu) b = (b & 0xFF800000u) + 0x800000u;
  return {float_of(b), float_of((254u - (b >> 23)) << 23)};
}

ScalePair scale_from_static(float scale) { return {scale, 1.0f / scale}; }

void quantize(const QuantizeArgs& in) {
  const QuantizeArgs a = ops::normalize(in);
  // The GPU's approximate division and log2/exp2 (div.full, lg2.approx, ex2.approx) have no
  // bit-exact host model: a result here would only look like the kernel's bytes.
  if (a.deepseek_arithmetic)
    throw_invalid("deepseek_arithmetic", "true",
                  "the host reference computes IEEE arithmetic only; compare DeepSeek's arithmetic "
                  "with kernel.py's act_quant on the GPU");
  const std::int64_t m = a.m, k = a.k;
  auto x = [&](std::int64_t r, std::int64_t c) { return fp8::load_as_float(a.x, r * a.ldx + c, a.input); };
  auto* q = static_cast<std::uint8_t*>(a.q);
  auto* qt = static_cast<std::uint8_t*>(a.qt);
  if (a.column_sums) column_sums(a, x);
  float total = 0;
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c) total = max_abs(total, x(r, c));
  if (a.amax) *a.amax = total;

  // inv(r, c): reciprocal used for element (r, c) of q; scales written on the way.
  const ScaleIndex si = index_for(a.granularity, a.scale_layout, m, k);
  const std::int64_t groups = (k + kGroup - 1) / kGroup;
  std::vector<float> inv_of;  // per scale unit (i, j) in row-major order
  auto unit_amax = [&](std::int64_t r0, std::int64_t r1, std::int64_t c0, std::int64_t c1) {
    float am = 0;
    for (std::int64_t r = r0; r < std::min(r1, m); ++r)
      for (std::int64_t c = c0; c < std::min(c1, k); ++c) am = max_abs(am, x(r, c));
    return am;
  };
  ScalePair tensor_sp{};
  if (a.granularity == Granularity::tensor) {
    tensor_sp = a.static_scale ? scale_from_static(*a.static_scale) : scale_from_amax(total, a.format, a.pow2_scale);
    a.scales[0] = tensor_sp.scale;
  }
  const std::int64_t unit_rows = a.granularity == Granularity::row ? m
                                 : a.granularity == Granularity::block128 ? (m + kGroup - 1) / kGroup
                                                                           : m;
  const std::int64_t unit_cols = a.granularity == Granularity::row ? 1 : groups;
  if (a.granularity != Granularity::tensor) {
    inv_of.resize(unit_rows * unit_cols);
    for (std::int64_t i = 0; i < unit_rows; ++i)
      for (std::int64_t j = 0; j < unit_cols; ++j) {
        const std::int64_t rh = a.granularity == Granularity::block128 ? kGroup : 1;
        const std::int64_t cw = a.granularity == Granularity::row ? k : kGroup;
        const ScalePair sp = scale_from_amax(unit_amax(i * rh, (i + 1) * rh, j * cw, (j + 1) * cw),
                                             a.format, a.pow2_scale);
        a.scales[si.at(i, j)] = sp.scale;
        inv_of[i * unit_cols + j] = sp.inv;
      }
  }
  auto inv = [&](std::int64_t r, std::int64_t c) {
    switch (a.granularity) {
      case Granularity::tensor: return tensor_sp.inv;
      case Granularity::row: return inv_of[r];
      case Granularity::group128: return inv_of[r * unit_cols + c / kGroup];
      case Granularity::block128: return inv_of[(r / kGroup) * unit_cols + c / kGroup];
    }
    return 0.0f;
  };
  for (std::int64_t r = 0; r < m; ++r)
    for (std::int64_t c = 0; c < k; ++c) q[r * a.ldq + c] = fp8::from_float(x(r, c) * inv(r, c), a.format);
  if (!qt) return;
  if (a.granularity == Granularity::row) {  // per row of the transpose: per column of x
    const ScaleIndex st = index_for(Granularity::row, a.scale_layout, k, m);
    for (std::int64_t c = 0; c < k; ++c) {
      const ScalePair sp = scale_from_amax(unit_amax(0, m, c, c + 1), a.format, a.pow2_scale);
      a.scales_t[st.at(c, 0)] = sp.scale;
      for (std::int64_t r = 0; r < m; ++r) qt[c * a.ldqt + r] = fp8::from_float(x(r, c) * sp.inv, a.format);
    }
    return;
  }
  if (a.granularity != Granularity::group128) {
    for (std::int64_t r = 0; r < m; ++r)
      for (std::int64_t c = 0; c < k; ++c) qt[c * a.ldqt + r] = q[r * a.ldq + c];
    return;
  }
  // 1x128 groups of the transpose: 128 rows of one column of x share a scale.
  const ScaleIndex st = index_for(Granularity::group128, a.scale_layout, k, m);
  for (std::int64_t c = 0; c < k; ++c)
    for (std::int64_t g = 0; g < (m + kGroup - 1) / kGroup; ++g) {
      const ScalePair sp = scale_from_amax(unit_amax(g * kGroup, (g + 1) * kGroup, c, c + 1), a.format, a.pow2_scale);
      a.scales_t[st.at(c, g)] = sp.scale;
      for (std::int64_t r = g * kGroup; r < std::min(m, (g + 1) * kGroup); ++r)
        qt[c * a.ldqt + r] = fp8::from_float(x(r, c) * sp.inv, a.format);
    }
}

void dequantize(const DequantizeArgs& in) {
  const DequantizeArgs a = ops::normalize(in);
  const ScaleIndex si = index_for(a.granularity, a.scale_layout, a.m, a.k);
  const auto* q = static_cast<const std::uint8_t*>(a.q);
  for (std::int64_t r = 0; r < a.m; ++r)
    for (std::int64_t c = 0; c < a.k; ++c) {
      const std::int64_t i = a.granularity == Granularity::block128 ? r / kGroup : r;
      const float s = a.scales[si.at(i, c / kGroup)];
      fp8::store_from_float(a.y, r * a.ldy + c, a.output, fp8::to_float(q[r * a.ldq + c], a.format) * s);
    }
}

}  // namespace fp8jit::reference
