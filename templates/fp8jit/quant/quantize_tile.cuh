// TileQuantizer: one CTA per 128x128 tile. The transposed output's FP8 codes are staged in shared
// memory; the values themselves stay in registers, or, with fewer than 256 threads for a tile whose
// scales come from the tile itself, are staged as floats. With COLSUM it also writes the tile's
// column sums (column_sums.cuh).
#pragma once

#include "fp8jit/quant/column_sums.cuh"
#include "fp8jit/quant/quantize.cuh"

namespace fp8jit {
namespace dev {

template <int E, int F, int G, bool TRANSPOSE, int VEC, int THREADS, bool COLSUM = false>
struct TileQuantizer {
  static constexpr int kTile = kScaleGroup;
  // One float of padding per row: the rows 16 apart that a warp's transposed reads take
  // (transposed_slot) fall in different banks.
  static constexpr int kPitch = kTile + 1;
  static constexpr int kWarps = THREADS / kWarpSize;
  static constexpr int kTransposeBytes = 16;  // rows of the tile packed into one qt store
  static_assert(G != kGroup128 || TRANSPOSE, "TileQuantizer: 1x128 without transpose streams");
  // Per-tensor scaling, and per-row scaling with a transposed output (scaled per row of the
  // transpose, i.e. per column of x), know their scales before the tile is read (an amax pass
  // ran, or the scale is static), so the tile is quantized as it is loaded: q goes out straight
  // from registers and only qt's FP8 codes are staged. 16 KiB of shared memory instead of 66 KiB
  // lets four times as many CTAs overlap their loads and stores (the float-staged per-tensor cast
  // ran at 0.58 of the copy bandwidth).
  static constexpr bool kStageBytes = G == kTensor || G == kRow;
  static_assert(!kStageBytes || TRANSPOSE,
                "TileQuantizer: per-tensor or per-row without transpose streams");
  // 1x128 and 128x128 scaling take their scales from the tile itself: with 256 threads or more a
  // thread keeps its 64 values or fewer in registers while the row, column or tile amaxes are
  // reduced, and only qt's codes are staged (the float tile held the 1x128 transposed cast at half
  // the copy bandwidth).
  static constexpr bool kRegisterTile = (G == kGroup128 || G == kBlock128) && THREADS >= 256;
  // A thread covers VEC columns of the rows rt + j * kSlotRows (j < kSlots): every path loads the
  // tile so (stage, run_staging_bytes, run_registers). Column sums fold over both
  // (column_sums.cuh).
  static constexpr int kTeam = kTile / VEC;  // threads covering one tile row
  static constexpr int kSlotRows = THREADS / kTeam, kSlots = kTile / kSlotRows;
  static_assert(!COLSUM || TRANSPOSE, "TileQuantizer: column sums come with the transposed cast");
  static_assert(!COLSUM ||
                    (THREADS % kTeam == 0 && kSlots >= 1 && (kSlotRows & (kSlotRows - 1)) == 0),
                "TileQuantizer: column sums need a power-of-two number of rows a pass");
  // Shared memory the threads' column folds pass through, reused from the tile's once its codes
  // are written; the float-staged path sums the float tile instead.
  static constexpr int kColumnSumBytes =
      COLSUM && (kStageBytes || kRegisterTile) ? kSlotRows * kTile * 4 : 0;

  // Dynamic shared memory: the tile (bytes, or floats with per-row and per-column reciprocals and
  // reduction scratch).
  // Staged code rows are 4 bytes longer than the tile, so that rows 16 apart (read by the two
  // lanes writing one 32-byte sector of qt) fall in different banks.
  static constexpr int kBytePitch = kTile + 4;
  static constexpr int smem_bytes() {
    const int tile = kStageBytes     ? kTile * kBytePitch + 2 * kTile * 4
                     : kRegisterTile ? kTile * kBytePitch + (kTile + kWarpSize) * 4
                                     : (kTile * kPitch + 2 * kTile + kWarpSize) * 4;
    return tile > kColumnSumBytes ? tile : kColumnSumBytes;
  }

  static FP8JIT_DEVICE float stage(const QuantParams& p, float* tile, int r0, int c0) {
    float amax = 0.0f;
    for (int idx = threadIdx.x; idx < kTile * (kTile / VEC); idx += THREADS) {
      const int r = idx / (kTile / VEC), c = (idx % (kTile / VEC)) * VEC;
      float v[VEC];
      if (r0 + r < p.M)
        load_elems<E, VEC>(p.x, p.ldx, r0 + r, c0 + c, p.K, p.vector_ok, v);
      else
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[i] = 0.0f;
      amax = abs_max(v, amax);
#pragma unroll
      for (int i = 0; i < VEC; ++i) tile[r * kPitch + c + i] = v[i];
    }
    return amax;
  }

  // 1x128 groups along rows (for q) and along columns (for qt): reciprocals into smem, scales out.
  static FP8JIT_DEVICE void group_scales(const QuantParams& p, const float* tile, float* row_inv,
                                         float* col_inv, int r0, int c0) {
    const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
    const bool pow2 = p.pow2 != 0;
    for (int r = warp; r < kTile; r += kWarps) {
      float a = 0.0f;
#pragma unroll
      for (int i = 0; i < kTile / kWarpSize; ++i)
        a = fmaxf(a, fabsf(tile[r * kPitch + lane + i * kWarpSize]));
      const ScalePair sp = scale_from_amax(group_max<kWarpSize>(a), Fp8Max<F>::value, pow2);
      if (lane == 0) {
        row_inv[r] = sp.inv;
        if (r0 + r < p.M) p.scales[(r0 + r) * p.scale_rs + blockIdx.x * p.scale_cs] = sp.scale;
      }
    }
    for (int c = warp; c < kTile; c += kWarps) {
      float a = 0.0f;
#pragma unroll
      for (int i = 0; i < kTile / kWarpSize; ++i)
        a = fmaxf(a, fabsf(tile[(lane + i * kWarpSize) * kPitch + c]));
      const ScalePair sp = scale_from_amax(group_max<kWarpSize>(a), Fp8Max<F>::value, pow2);
      if (lane == 0) {
        col_inv[c] = sp.inv;
        if (c0 + c < p.K)
          p.scales_t[(c0 + c) * p.scale_t_rs + blockIdx.y * p.scale_t_cs] = sp.scale;
      }
    }
  }

  static FP8JIT_DEVICE void write_rows(const QuantParams& p, const float* tile,
                                       const float* row_inv, float inv, int r0, int c0) {
    for (int idx = threadIdx.x; idx < kTile * (kTile / VEC); idx += THREADS) {
      const int r = idx / (kTile / VEC), c = (idx % (kTile / VEC)) * VEC;
      if (r0 + r >= p.M) continue;
      float v[VEC];
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[i] = tile[r * kPitch + c + i];
      u32 w[VEC / 4];
      quantize_pack<F, VEC>(v, G == kGroup128 ? row_inv[r] : inv, w);
      store_fp8<VEC>(p.q, p.ldq, r0 + r, c0 + c, p.K, p.vector_ok, w);
    }
  }

  // Thread slot idx of the transposed write: column c of the tile and the first of its 16 rows.
  // Lanes 2j and 2j+1 take the two 16-row halves of one 32-row run of a column, so that a warp's
  // store writes whole 32-byte sectors of 16 qt rows rather than half sectors of 32 (the
  // per-tensor cast went from 0.67 to 1.05 of the copy bandwidth with it); 16 columns a warp.
  static FP8JIT_DEVICE void transposed_slot(int idx, int& c, int& r) {
    c = (idx >> 1) % kTile;
    r = ((idx >> 1) / kTile) * 2 * kTransposeBytes + (idx & 1) * kTransposeBytes;
  }

  // qt[c, r] = q(x[r, c]): each thread packs 16 consecutive rows of a column into one 16-byte
  // store when qt's rows allow it (the padded pitch keeps the two halves' smem reads apart).
  static FP8JIT_DEVICE void write_transposed(const QuantParams& p, const float* tile,
                                             const float* col_inv, float inv, int r0, int c0) {
    constexpr int TV = kTransposeBytes;
    const bool aligned = ((p.ldqt | reinterpret_cast<i64>(p.qt)) & (TV - 1)) == 0;
    for (int idx = threadIdx.x; idx < kTile * (kTile / TV); idx += THREADS) {
      int c, r;
      transposed_slot(idx, c, r);
      if (c0 + c >= p.K || r0 + r >= p.M) continue;
      float v[TV];
#pragma unroll
      for (int i = 0; i < TV; ++i) v[i] = tile[(r + i) * kPitch + c];
      u32 w[TV / 4];
      quantize_pack<F, TV>(v, G == kGroup128 ? col_inv[c] : inv, w);
      store_transposed(p, w, c0 + c, r0 + r, aligned);
    }
  }

  // 16 FP8 codes of qt's row `row` from column `col` on, cut at M.
  static FP8JIT_DEVICE void store_transposed(const QuantParams& p,
                                             const u32 (&w)[kTransposeBytes / 4], int row, int col,
                                             bool aligned) {
    if (aligned) {
      store_fp8<kTransposeBytes>(p.qt, p.ldqt, row, col, p.M, true, w);
    } else {  // qt rows not 16-byte aligned (e.g. odd M): byte stores
      const i64 first = static_cast<i64>(row) * p.ldqt + col;
#pragma unroll
      for (int i = 0; i < kTransposeBytes; ++i)
        if (col + i < p.M) store_bits<1>(p.qt, first + i, (w[i / 4] >> (8 * (i % 4))) & 0xFFu);
    }
  }

  // Per-row scaling with a transposed output, pass 1: the amax of every row of x into `scales`
  // and of every column into `scales_t` (both zeroed by the host), by atomics: one per row and
  // column of each tile, the columns reduced in shared memory first.
  static FP8JIT_DEVICE void row_col_amax(const QuantParams& p) {
    static_assert(G == kRow, "row_col_amax: per-row scaling's pass");
    static_assert(kTeam <= kWarpSize && THREADS % kTeam == 0,
                  "row_col_amax: a row's team within a warp");
    __shared__ float col_amax[kTile];
    const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile, c = (threadIdx.x % kTeam) * VEC;
    for (int i = threadIdx.x; i < kTile; i += THREADS) col_amax[i] = 0.0f;
    float cmax[VEC];
#pragma unroll
    for (int i = 0; i < VEC; ++i) cmax[i] = 0.0f;
    for (int r = threadIdx.x / kTeam; r < kTile; r += THREADS / kTeam) {
      float v[VEC];
      if (r0 + r < p.M)
        load_elems<E, VEC>(p.x, p.ldx, r0 + r, c0 + c, p.K, p.vector_ok, v);
      else
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[i] = 0.0f;
#pragma unroll
      for (int i = 0; i < VEC; ++i) cmax[i] = fmaxf(cmax[i], fabsf(v[i]));
      const float rmax = group_max<kTeam>(abs_max(v, 0.0f));
      if (threadIdx.x % kTeam == 0 && r0 + r < p.M)
        atomic_max_nonneg(p.scales + (r0 + r) * p.scale_rs, rmax);
    }
    __syncthreads();  // col_amax zeroed
#pragma unroll
    for (int i = 0; i < VEC; ++i) atomic_max_nonneg(col_amax + c + i, cmax[i]);
    __syncthreads();
    for (int i = threadIdx.x; i < kTile; i += THREADS)
      if (c0 + i < p.K) atomic_max_nonneg(p.scales_t + (c0 + i) * p.scale_t_rs, col_amax[i]);
  }

  // kStageBytes: quantize while loading, q from registers, qt's codes staged. Per row: the
  // reciprocals of this tile's rows and columns from the amaxes of pass 1.
  static FP8JIT_DEVICE void run_staging_bytes(const QuantParams& p, u8* codes) {
    const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
    float* row_inv = reinterpret_cast<float*>(codes + kTile * kBytePitch);
    float* col_inv = row_inv + kTile;
    ScalePair sp;
    sp.inv = 0.0f;
    if constexpr (G == kTensor) {
      sp = tensor_scale<F>(p);
    } else {
      for (int i = threadIdx.x; i < kTile; i += THREADS) {
        const bool pow2 = p.pow2 != 0;
        row_inv[i] =
            r0 + i < p.M
                ? scale_from_amax(p.scales[(r0 + i) * p.scale_rs], Fp8Max<F>::value, pow2).inv
                : 0.0f;
        col_inv[i] =
            c0 + i < p.K
                ? scale_from_amax(p.scales_t[(c0 + i) * p.scale_t_rs], Fp8Max<F>::value, pow2).inv
                : 0.0f;
      }
      __syncthreads();
    }
    float amax = 0.0f;
    if constexpr (COLSUM) {
      // The thread's slots in bit-reversed order, so that its column fold needs no more than
      // log2(kSlots) pending sums (HalvingFold).
      const int rt = threadIdx.x / kTeam, c = (threadIdx.x % kTeam) * VEC;
      HalvingFold<kSlots, VEC> fold;
#pragma unroll
      for (int t = 0; t < kSlots; ++t) {
        float v[VEC];
        cast_staged(p, codes, rt + fold.index(t) * kSlotRows, c, sp.inv, row_inv, col_inv, v);
        amax = abs_max(v, amax);
        fold.feed(t, v);
      }
      publish_amax(p, amax);
      __syncthreads();
      write_staged_codes(p, codes, r0, c0);
      __syncthreads();  // the codes are read: their memory takes the folds
      fold_column_partials<kSlotRows, VEC, THREADS>(p, reinterpret_cast<float*>(codes),
                                                    fold.result(), rt, c, c0);
    } else {
      for (int idx = threadIdx.x; idx < kTile * kTeam; idx += THREADS) {
        float v[VEC];
        cast_staged(p, codes, idx / kTeam, (idx % kTeam) * VEC, sp.inv, row_inv, col_inv, v);
        amax = abs_max(v, amax);
      }
      publish_amax(p, amax);
      __syncthreads();
      write_staged_codes(p, codes, r0, c0);
    }
  }

  // kStageBytes: row r, columns c..c+VEC of the tile loaded into v (0 past M), q written and qt's
  // codes staged. inv: the per-tensor reciprocal; per row: row_inv and col_inv.
  static FP8JIT_DEVICE void cast_staged(const QuantParams& p, u8* codes, int r, int c, float inv,
                                        const float* row_inv, const float* col_inv,
                                        float (&v)[VEC]) {
    const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
    const bool in = r0 + r < p.M;
    if (in)
      load_elems<E, VEC>(p.x, p.ldx, r0 + r, c0 + c, p.K, p.vector_ok, v);
    else
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[i] = 0.0f;
    u32 w[VEC / 4];
    quantize_pack<F, VEC>(v, G == kTensor ? inv : row_inv[r], w);
    if (in) store_fp8<VEC>(p.q, p.ldq, r0 + r, c0 + c, p.K, p.vector_ok, w);
    if constexpr (G == kRow)
      quantize_pack_each<F, VEC>(v, col_inv + c, w);  // qt's codes: per column
#pragma unroll
    for (int j = 0; j < VEC / 4; ++j) reinterpret_cast<u32*>(codes + r * kBytePitch + c)[j] = w[j];
  }

  // kRegisterTile: each thread loads its rows' VEC columns into registers; the row (1x128) or tile
  // (128x128) amaxes by shuffles, the column amaxes (1x128 groups of qt) through shared memory;
  // then q from registers and qt's codes staged.
  static FP8JIT_DEVICE void run_registers(const QuantParams& p, u8* codes) {
    constexpr int kRowsPerPass = kSlotRows, kPasses = kSlots;
    static_assert(kTeam <= kWarpSize && THREADS % kTeam == 0,
                  "run_registers: a row's team within a warp");
    float* col =
        reinterpret_cast<float*>(codes + kTile * kBytePitch);  // column amaxes, then reciprocals
    float* scratch = col + kTile;
    const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
    const int rt = threadIdx.x / kTeam, c = (threadIdx.x % kTeam) * VEC;
    const bool pow2 = p.pow2 != 0;
    for (int i = threadIdx.x; i < kTile; i += THREADS) col[i] = 0.0f;
    float v[kPasses][VEC], cmax[VEC], amax = 0.0f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) cmax[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < kPasses; ++j) {
      const int r = j * kRowsPerPass + rt;
      if (r0 + r < p.M)
        load_elems<E, VEC>(p.x, p.ldx, r0 + r, c0 + c, p.K, p.vector_ok, v[j]);
      else
#pragma unroll
        for (int i = 0; i < VEC; ++i) v[j][i] = 0.0f;
      amax = abs_max(v[j], amax);
#pragma unroll
      for (int i = 0; i < VEC; ++i) cmax[i] = fmaxf(cmax[i], fabsf(v[j][i]));
    }
    // The column fold of the thread's rows, while all are loaded: VEC sums live on.
    float fold[COLSUM ? kPasses / 2 : 1][VEC];
    if constexpr (COLSUM) {
#pragma unroll
      for (int j = 0; j < kPasses / 2; ++j)
#pragma unroll
        for (int i = 0; i < VEC; ++i) fold[j][i] = v[j][i] + v[j + kPasses / 2][i];
#pragma unroll
      for (int h = kPasses / 4; h >= 1; h /= 2)
#pragma unroll
        for (int j = 0; j < h; ++j)
#pragma unroll
          for (int i = 0; i < VEC; ++i) fold[j][i] += fold[j + h][i];
    }
    publish_amax(p, amax);
    float inv[kPasses];  // q's reciprocal per pass: its row's (1x128) or the tile's (128x128)
    if constexpr (G == kGroup128) {
#pragma unroll
      for (int j = 0; j < kPasses; ++j) {
        const int r = j * kRowsPerPass + rt;
        const ScalePair sp =
            scale_from_amax(group_max<kTeam>(abs_max(v[j], 0.0f)), Fp8Max<F>::value, pow2);
        inv[j] = sp.inv;
        if (threadIdx.x % kTeam == 0 && r0 + r < p.M)
          p.scales[(r0 + r) * p.scale_rs + blockIdx.x * p.scale_cs] = sp.scale;
      }
      __syncthreads();  // col zeroed
#pragma unroll
      for (int i = 0; i < VEC; ++i) atomic_max_nonneg(col + c + i, cmax[i]);
      __syncthreads();
      for (int i = threadIdx.x; i < kTile;
           i += THREADS) {  // qt's 1x128 groups: scales out, reciprocals in
        const ScalePair sp = scale_from_amax(col[i], Fp8Max<F>::value, pow2);
        if (c0 + i < p.K)
          p.scales_t[(c0 + i) * p.scale_t_rs + blockIdx.y * p.scale_t_cs] = sp.scale;
        col[i] = sp.inv;
      }
      __syncthreads();
    } else {
      const ScalePair sp =
          scale_from_amax(block_max<THREADS>(amax, scratch), Fp8Max<F>::value, pow2);
      if (threadIdx.x == 0) p.scales[blockIdx.y * p.scale_rs + blockIdx.x * p.scale_cs] = sp.scale;
#pragma unroll
      for (int j = 0; j < kPasses; ++j) inv[j] = sp.inv;
    }
#pragma unroll
    for (int j = 0; j < kPasses; ++j) {
      const int r = j * kRowsPerPass + rt;
      u32 w[VEC / 4];
      quantize_pack<F, VEC>(v[j], inv[j], w);
      if (r0 + r < p.M) store_fp8<VEC>(p.q, p.ldq, r0 + r, c0 + c, p.K, p.vector_ok, w);
      if constexpr (TRANSPOSE) {
        if constexpr (G == kGroup128)
          quantize_pack_each<F, VEC>(v[j], col + c, w);  // per column group
#pragma unroll
        for (int i = 0; i < VEC / 4; ++i)
          reinterpret_cast<u32*>(codes + r * kBytePitch + c)[i] = w[i];
      }
    }
    if constexpr (TRANSPOSE) {
      __syncthreads();
      write_staged_codes(p, codes, r0, c0);
    }
    if constexpr (COLSUM) {
      __syncthreads();  // the codes are read: their memory takes the folds
      fold_column_partials<kRowsPerPass, VEC, THREADS>(p, reinterpret_cast<float*>(codes), fold[0],
                                                       rt, c, c0);
    }
  }

  // qt[c, r..r+16) from the staged codes (transposed_slot).
  static FP8JIT_DEVICE void write_staged_codes(const QuantParams& p, const u8* codes, int r0,
                                               int c0) {
    const bool aligned = ((p.ldqt | reinterpret_cast<i64>(p.qt)) & (kTransposeBytes - 1)) == 0;
    for (int idx = threadIdx.x; idx < kTile * (kTile / kTransposeBytes); idx += THREADS) {
      int c, r;
      transposed_slot(idx, c, r);
      if (c0 + c >= p.K || r0 + r >= p.M) continue;
      u32 w[kTransposeBytes / 4] = {};
#pragma unroll
      for (int i = 0; i < kTransposeBytes; ++i)
        w[i / 4] |= u32(codes[(r + i) * kBytePitch + c]) << (8 * (i % 4));
      store_transposed(p, w, c0 + c, r0 + r, aligned);
    }
  }

  static FP8JIT_DEVICE void run(const QuantParams& p, float* smem) {
    if constexpr (kStageBytes) {
      run_staging_bytes(p, reinterpret_cast<u8*>(smem));
      return;
    }
    if constexpr (kRegisterTile) {
      run_registers(p, reinterpret_cast<u8*>(smem));
      return;
    }
    float* tile = smem;
    float* row_inv = tile + kTile * kPitch;
    float* col_inv = row_inv + kTile;
    float* scratch = col_inv + kTile;
    const int r0 = blockIdx.y * kTile, c0 = blockIdx.x * kTile;
    float amax = stage(p, tile, r0, c0);
    ScalePair sp;
    sp.inv = 0.0f;
    publish_amax(p, amax);
    amax = block_max<THREADS>(amax, scratch);  // also orders the tile writes before the reads
    if constexpr (G == kBlock128) {
      sp = scale_from_amax(amax, Fp8Max<F>::value, p.pow2 != 0);
      if (threadIdx.x == 0) p.scales[blockIdx.y * p.scale_rs + blockIdx.x * p.scale_cs] = sp.scale;
    }
    if constexpr (G == kGroup128) {
      group_scales(p, tile, row_inv, col_inv, r0, c0);
      __syncthreads();
    }
    write_rows(p, tile, row_inv, sp.inv, r0, c0);
    if constexpr (TRANSPOSE) write_transposed(p, tile, col_inv, sp.inv, r0, c0);
    // The tile was staged before the block_max barrier and is only read since.
    if constexpr (COLSUM) fold_staged_column_partials<THREADS>(p, tile, kPitch, c0);
  }
};

}  // namespace dev
}  // namespace fp8jit
