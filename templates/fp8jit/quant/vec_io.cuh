// Row-segment I/O for the quantize/dequantize kernels: VEC consecutive elements of one row,
// vectorised when the segment lies inside the row and the host found the tensors aligned for
// VEC (`vec_ok`, uniform across the launch); element by element otherwise (ragged tails, odd
// leading dimensions).
#pragma once

#include "fp8jit/common/convert.cuh"
#include "fp8jit/common/memory.cuh"

namespace fp8jit {
namespace dev {

// Loads x[row, col .. col+VEC) as floats; elements at or beyond K read as 0, which never raises
// an amax and is never stored.
template <int E, int VEC>
FP8JIT_DEVICE void load_elems(const void* x, i64 ld, int row, int col, int K, bool vec_ok,
                                float (&v)[VEC]) {
  constexpr int S = ElemSize<E>::value;
  constexpr int kWords = VEC * S / 4;
  const i64 first = static_cast<i64>(row) * ld + col;
  if (vec_ok && col + VEC <= K) {
    u32 w[kWords];
    load_words<kWords>(static_cast<const u8*>(x) + first * S, w);
#pragma unroll
    for (int i = 0; i < VEC; ++i) {
      if constexpr (S == 4) v[i] = elem_to_f32<E>(w[i]);
      else v[i] = elem_to_f32<E>((i % 2 == 0) ? (w[i / 2] & 0xFFFFu) : (w[i / 2] >> 16));
    }
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      v[i] = (col + i < K) ? elem_to_f32<E>(load_bits<S>(x, first + i)) : 0.0f;
  }
}

// Packs FP8 codes of v[i] * factor (IEEE), four to a word, low byte first; with DIV, of
// v[i] / factor by div.full.f32, as DeepSeek-V3's act_quant computes them
// (QuantizeProblem::deepseek_arithmetic).
template <int F, int VEC, bool DIV = false>
FP8JIT_DEVICE void quantize_pack(const float (&v)[VEC], float factor, u32 (&w)[VEC / 4]) {
  static_assert(VEC % 4 == 0, "quantize_pack: VEC must be a multiple of 4");
  auto scaled = [factor](float x) { return DIV ? div_full(x, factor) : mul_rn(x, factor); };
#pragma unroll
  for (int i = 0; i < VEC; i += 4) {
    const u32 lo = f32x2_to_fp8x2<F>(scaled(v[i]), scaled(v[i + 1]));
    const u32 hi = f32x2_to_fp8x2<F>(scaled(v[i + 2]), scaled(v[i + 3]));
    w[i / 4] = lo | (hi << 16);
  }
}

// As quantize_pack (IEEE), with a factor per element: FP8 codes of v[i] * factors[i].
template <int F, int VEC>
FP8JIT_DEVICE void quantize_pack_each(const float (&v)[VEC], const float* factors, u32 (&w)[VEC / 4]) {
  static_assert(VEC % 4 == 0, "quantize_pack_each: VEC must be a multiple of 4");
#pragma unroll
  for (int i = 0; i < VEC; i += 4) {
    const u32 lo = f32x2_to_fp8x2<F>(mul_rn(v[i], factors[i]), mul_rn(v[i + 1], factors[i + 1]));
    const u32 hi = f32x2_to_fp8x2<F>(mul_rn(v[i + 2], factors[i + 2]), mul_rn(v[i + 3], factors[i + 3]));
    w[i / 4] = lo | (hi << 16);
  }
}

// Stores FP8 words at q[row, col ..), cutting at K.
template <int VEC>
FP8JIT_DEVICE void store_fp8(void* q, i64 ld, int row, int col, int K, bool vec_ok,
                               const u32 (&w)[VEC / 4]) {
  const i64 first = static_cast<i64>(row) * ld + col;
  if (vec_ok && col + VEC <= K) {
    store_words<VEC / 4>(static_cast<u8*>(q) + first, w);
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      if (col + i < K) store_bits<1>(q, first + i, (w[i / 4] >> (8 * (i % 4))) & 0xFFu);
  }
}

// Loads q[row, col .. col+VEC) FP8 codes and converts them to floats (tail: zeros).
template <int F, int VEC>
FP8JIT_DEVICE void load_fp8(const void* q, i64 ld, int row, int col, int K, bool vec_ok,
                              float (&v)[VEC]) {
  const i64 first = static_cast<i64>(row) * ld + col;
  u32 w[VEC / 4];
  if (vec_ok && col + VEC <= K) {
    load_words<VEC / 4>(static_cast<const u8*>(q) + first, w);
  } else {
#pragma unroll
    for (int i = 0; i < VEC / 4; ++i) w[i] = 0;
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      if (col + i < K) w[i / 4] |= load_bits<1>(q, first + i) << (8 * (i % 4));
  }
#pragma unroll
  for (int i = 0; i < VEC; i += 2)
    fp8x2_to_f32x2<F>(static_cast<u16>(w[i / 4] >> (8 * (i % 4))), v[i], v[i + 1]);
}

// Stores v[i] rounded to element type E at y[row, col ..), cutting at K.
template <int E, int VEC>
FP8JIT_DEVICE void store_elems(void* y, i64 ld, int row, int col, int K, bool vec_ok,
                                 const float (&v)[VEC]) {
  constexpr int S = ElemSize<E>::value;
  const i64 first = static_cast<i64>(row) * ld + col;
  if (vec_ok && col + VEC <= K) {
    constexpr int kWords = VEC * S / 4;
    u32 w[kWords];
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
      if constexpr (S == 4) w[i] = f32_to_elem<E>(v[i]);
      else w[i] = f32_to_elem<E>(v[2 * i]) | (f32_to_elem<E>(v[2 * i + 1]) << 16);
    }
    store_words<kWords>(static_cast<u8*>(y) + first * S, w);
  } else {
#pragma unroll
    for (int i = 0; i < VEC; ++i)
      if (col + i < K) store_bits<S>(y, first + i, f32_to_elem<E>(v[i]));
  }
}

}  // namespace dev
}  // namespace fp8jit
