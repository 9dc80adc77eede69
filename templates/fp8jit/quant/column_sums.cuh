// Column sums of the quantize family's tile strategy (QuantizeProblem::column_sums): the fp32 sum
// over the rows of every column of x, from the values the cast loads anyway.
//
// The order is fixed and the same for every config, so that the sums (a bias gradient) have the
// same bits on every run, from every tuned kernel and from the host reference
// (reference::quantize), without float atomics:
//  - a 128-row tile's sum of column c is the halving fold of its 128 values (rows past M count as
//    0): a[r] += a[r + 64] for r < 64, then a[r] += a[r + 32] for r < 32, ..., a[0] += a[1];
//  - fp8jit_colsum adds the tiles' sums from 0.0f in tile order: ((0 + T0) + T1) + ...
// A thread of the tile strategy holds the rows rt + j * R of its columns (R rows a pass, P = 128 /
// R passes), so the fold's first levels (strides 64 down to R) pair rows of one thread, and its
// last ones (R / 2 down to 1) pair threads: each thread folds its P values, the R threads' folds
// are folded through shared memory.
#pragma once

#include "fp8jit/common/defs.cuh"
#include "fp8jit/quant/params.cuh"

namespace fp8jit {
namespace dev {

constexpr int log2_exact(int n) {
  return n <= 1 ? 0 : 1 + log2_exact(n / 2);
}

// t's lowest `bits` bits in reverse order.
constexpr int bit_reverse(int t, int bits) {
  int r = 0;
  for (int i = 0; i < bits; ++i) r |= ((t >> i) & 1) << (bits - 1 - i);
  return r;
}

constexpr int trailing_ones(int t) {
  int n = 0;
  while ((t >> n) & 1) ++n;
  return n;
}

// The halving fold of N values (a power of two) of W columns, fed one value at a time. Fed in the
// order t = 0, 1, ..., N - 1 with value index(t) (bit-reversed t), pairwise sums of consecutive
// feeds are exactly the fold's pairs (index(2i + 1) = index(2i) + N / 2), so a binary counter of
// log2(N) pending sums computes it without holding all N values. Callers unroll their loop over t,
// so that every level index is a constant and the sums stay in registers.
template <int N, int W>
struct HalvingFold {
  static_assert(N >= 1 && (N & (N - 1)) == 0, "HalvingFold: N must be a power of two");
  static constexpr int kLevels = log2_exact(N);
  float level[kLevels + 1][W];  // level[l]: the pending sum of 2^l feeds

  static FP8JIT_DEVICE int index(int t) { return bit_reverse(t, kLevels); }

  // Feed number t (value index(t) of the fold). Float addition commutes exactly, so only the
  // pairing decides the bits.
  FP8JIT_DEVICE void feed(int t, const float (&v)[W]) {
    const int carries = trailing_ones(t);
    float s[W];
#pragma unroll
    for (int i = 0; i < W; ++i) s[i] = v[i];
#pragma unroll
    for (int l = 0; l < kLevels; ++l)
      if (l < carries)
#pragma unroll
        for (int i = 0; i < W; ++i) s[i] += level[l][i];
#pragma unroll
    for (int l = 0; l <= kLevels; ++l)
      if (l == carries)
#pragma unroll
        for (int i = 0; i < W; ++i) level[l][i] = s[i];
  }

  // After all N feeds.
  FP8JIT_DEVICE const float (&result() const)[W] {
    return level[kLevels];
  }
};

// The tile's column sums from its R row slots: thread (rt, c) holds in `fold` the fold of its rows
// of columns c..c+VEC; `buf` (R * 128 floats of shared memory) must be free for all threads.
// Writes p.col_partials[tile row, column] for the tile's columns below K.
template <int R, int VEC, int THREADS>
FP8JIT_DEVICE void fold_column_partials(const QuantParams& p, float* buf, const float (&fold)[VEC],
                                        int rt, int c, int c0) {
  constexpr int kTile = 128;
#pragma unroll
  for (int i = 0; i < VEC; ++i) buf[rt * kTile + c + i] = fold[i];
  __syncthreads();
  for (int col = threadIdx.x; col < kTile; col += THREADS) {
    HalvingFold<R, 1> f;
#pragma unroll
    for (int t = 0; t < R; ++t) {
      const float v[1] = {buf[f.index(t) * kTile + col]};
      f.feed(t, v);
    }
    if (c0 + col < p.K)
      p.col_partials[static_cast<i64>(blockIdx.y) * p.K + c0 + col] = f.result()[0];
  }
}

// The float-staged tile (pitch floats a row) holds all 128 rows: a thread per column folds them.
template <int THREADS>
FP8JIT_DEVICE void fold_staged_column_partials(const QuantParams& p, const float* tile, int pitch,
                                               int c0) {
  constexpr int kTile = 128;
  for (int col = threadIdx.x; col < kTile; col += THREADS) {
    HalvingFold<kTile, 1> f;
#pragma unroll
    for (int t = 0; t < kTile; ++t) {
      const float v[1] = {tile[f.index(t) * pitch + col]};
      f.feed(t, v);
    }
    if (c0 + col < p.K)
      p.col_partials[static_cast<i64>(blockIdx.y) * p.K + c0 + col] = f.result()[0];
  }
}

// fp8jit_colsum: col_sums[k] = the tiles' partial sums of column k, added in tile order.
FP8JIT_DEVICE void add_column_partials(const QuantParams& p) {
  const int k = blockIdx.x * blockDim.x + threadIdx.x;
  if (k >= p.K) return;
  const int tiles = (p.M + 127) / 128;
  float sum = 0.0f;
#pragma unroll 8
  for (int i = 0; i < tiles; ++i) sum += p.col_partials[static_cast<i64>(i) * p.K + k];
  p.col_sums[k] = sum;
}

}  // namespace dev
}  // namespace fp8jit
