// The gemm epilogue: scales, bias, conversion, and the way out of a consumer warpgroup's slab
// of D (kRowsPerWG x BLOCK_N): FP32 partials to the split-K workspace, a TMA store from shared
// memory (async: the next tile's MMAs start while it drains), or direct stores where D's rows
// are not 16-byte aligned.
#pragma once

#include "fp8jit/common/bulk_store.cuh"
#include "fp8jit/common/convert.cuh"
#include "fp8jit/common/memory.cuh"
#include "fp8jit/gemm/params.cuh"

namespace fp8jit {
namespace dev {

// Where one consumer warpgroup's slab of a tile goes (the kernel's tile_out): rows of D below
// rows_end (its group's; dense: M), per-tensor or per-row scales of B from scale_b (its group's),
// and by a TMA store or by direct stores.
struct TileOut {
  int rows_end;
  const float* scale_b;
  bool tma;
  bool partials;  // split-K through the workspace: the scaled FP32 partial sums, not D
};

// kGrouped: slabs may run past their group's rows (grouped layouts' schedulers). kSwizzled: the
// slab in swizzled panels kPanel bytes wide (GemmGeometry::swizzled_slab, panel_bytes).
// kTransposed: the kernel's operands are the problem's swapped (config swap_ab): its element (row,
// col) is D[col][row], the bias indexed by row, and it goes out by direct stores only.
template <int BLOCK_N, int kMmaM, int kRowsPerWG, int SCALE, int OUT, bool kBias, bool kGrouped,
          bool kSwizzled, bool kTransposed = false, int kPanel = 128>
struct Sm90GemmEpilogue {
  static constexpr int kAccum = BLOCK_N / 2;
  static constexpr int S = ElemSize<OUT>::value;
  // The slab's layout: swizzled panels kPanel bytes (kPanelCols columns) wide, each kPanelBytes,
  // or rows of BLOCK_N. Panels start on 1024 bytes (slabs do, and a panel is a multiple of 1024
  // bytes), so the swizzle TMA applies follows from the offset within the panel: the 16-byte
  // chunk bits of an offset (log2(kPanel / 16) of them from bit 4) XORed with as many bits from
  // bit 7 (128 bytes: chunk c of row r at c ^ (r & 7); 64: at c ^ ((r >> 1) & 3); 32: at
  // c ^ ((r >> 2) & 1)).
  static_assert(kPanel == 128 || kPanel == 64 || kPanel == 32, "TMA's swizzle widths");
  static_assert(!kSwizzled || BLOCK_N * S % kPanel == 0, "whole panels");
  static constexpr int kPanelCols = kPanel / S;
  static constexpr int kPanels = kSwizzled ? BLOCK_N / kPanelCols : 1;
  static constexpr int kPanelBytes = kRowsPerWG * kPanel;
  // Row r's XOR on the chunk index, and on the byte offset.
  static constexpr int kSwizzleShift = kPanel == 128 ? 0 : kPanel == 64 ? 1 : 2;
  static constexpr FP8JIT_DEVICE int row_chunk_xor(int r) {
    return (r >> kSwizzleShift) & (kPanel / 16 - 1);
  }
  static constexpr FP8JIT_DEVICE int row_swizzle(int r) { return row_chunk_xor(r) << 4; }
  // A thread's pairs of D in the slab: (r, c) its first row and column there (its other rows
  // 8 h + 64 mm below, columns 8 j to the right). Swizzled slabs: the shared-memory address of
  // that first pair with the swizzle of row r applied; then the pair of (mm, h, j) sits at that
  // address with chunk bits XORed with j's chunk, plus a multiple of 8 rows (the thread's rows
  // agree in their swizzle). The XOR and the store are one asm statement, so that the 8 XORed
  // addresses are not hoisted into registers that the column-halves kernels (128x256) do not have.
  static FP8JIT_DEVICE u32 pair_base(u8* slab, int r, int c) {
    return barrier::smem_addr(slab) + (c / kPanelCols) * kPanelBytes + r * kPanel +
           (((c % kPanelCols) * S) ^ row_swizzle(r));
  }
  // Pair (mm, h, j)'s address: base with `flip` XORed into its chunk bits, plus `offset`.
  static constexpr FP8JIT_DEVICE u32 pair_flip(int j) { return ((8 * j % kPanelCols) * S) & ~15; }
  static constexpr FP8JIT_DEVICE u32 pair_offset(int mm, int h, int j) {
    return (8 * j / kPanelCols) * kPanelBytes + (64 * mm + 8 * h) * kPanel;
  }
  static FP8JIT_DEVICE void store_pair_at(u32 base, int mm, int h, int j, const float (&x)[2]) {
    if constexpr (S == 4) {
      asm volatile(
          "{\n.reg .b32 a;\nxor.b32 a, %0, %1;\nadd.u32 a, a, %2;\nst.shared.v2.f32 [a], {%3, %4};\n}" ::
              "r"(base), "r"(pair_flip(j)), "r"(pair_offset(mm, h, j)), "f"(x[0]), "f"(x[1])
          : "memory");
    } else {
      store_word_at(base, mm, h, j, f32_to_elem<OUT>(x[0]) | (f32_to_elem<OUT>(x[1]) << 16));
    }
  }
  // The same for a pair of 16-bit elements packed into one word.
  static FP8JIT_DEVICE void store_word_at(u32 base, int mm, int h, int j, u32 v) {
    asm volatile("{\n.reg .b32 a;\nxor.b32 a, %0, %1;\nadd.u32 a, a, %2;\nst.shared.b32 [a], %3;\n}" ::
                     "r"(base), "r"(pair_flip(j)), "r"(pair_offset(mm, h, j)), "r"(v)
                 : "memory");
  }

  // Calls f(mm, j, h, row, col, x) for each pair of the thread's values, scaled and biased: v
  // holds them in wgmma layout, element 4j + 2h + c of slab mm being row row0 + 64 mm + 8 h,
  // column col0 + 8 j + c. Column pairs outermost, both row halves inside: a pair's bias (and
  // rowwise scales of B) is loaded once and used at once, so it needs no registers across the
  // loop (hoisting them for all columns spilled 256-wide tiles with bias).
  // J0, J1: the range of column octets (j) to visit, for tiles written out a column half at a time.
  template <int J0 = 0, int J1 = BLOCK_N / 8, class F>
  static FP8JIT_DEVICE void for_each_pair(const GemmParams& p, const TileOut& o,
                                          const float (&v)[kMmaM][kAccum], int row0, int col0,
                                          F&& f) {
    float s_tensor = 1.0f;
    if constexpr (SCALE == kPerTensor) s_tensor = __ldg(p.scale_a) * __ldg(o.scale_b);
#pragma unroll
    for (int mm = 0; mm < kMmaM; ++mm) {
      float s_row[2] = {s_tensor, s_tensor}, b_row[2] = {0.0f, 0.0f};
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + mm * 64 + 8 * h;
        if constexpr (SCALE == kPerRow) s_row[h] = row < p.M ? __ldg(p.scale_a + row) : 0.0f;
        if constexpr (kBias && kTransposed)
          if (row < p.M) b_row[h] = elem_to_f32<OUT>(load_bits<S>(p.bias, row));
      }
#pragma unroll
      for (int j = J0; j < J1; ++j) {
        const int col = col0 + 8 * j;
        float s_col[2] = {1.0f, 1.0f}, b_col[2] = {0.0f, 0.0f};
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const bool in = col + c < p.N;
          if constexpr (SCALE == kPerRow) s_col[c] = in ? __ldg(o.scale_b + col + c) : 0.0f;
          if constexpr (kBias && !kTransposed)
            if (in) b_col[c] = elem_to_f32<OUT>(load_bits<S>(p.bias, col + c));
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float x[2] = {v[mm][4 * j + 2 * h], v[mm][4 * j + 2 * h + 1]};
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            if constexpr (SCALE == kPerTensor || SCALE == kPerRow) x[c] *= s_row[h] * s_col[c];
            if constexpr (kBias) x[c] += kTransposed ? b_row[h] : b_col[c];
          }
          f(mm, j, h, row0 + mm * 64 + 8 * h, col, x);
        }
      }
    }
  }

  // The slab is this warpgroup's once the previous tile's store has read it.
  static FP8JIT_DEVICE void slab_acquire(int wg) {
    if (threadIdx.x % 128 == 0) tma::store_wait_read();
    named_barrier_sync(1 + wg, 128);
  }
  // Publishes the written slab to the async proxy and stores it to D (slab_y, slab_x: D
  // coordinates of its first row and column) by TMA, which clips at row M and column N. A slab
  // that runs past rows_end (its group's last row, before M: grouped layouts) goes out a row at a
  // time up to there (store_rows, copy_rows): deciding per tile between TMA and direct stores from
  // registers instead made ptxas recompute shared-memory addresses in every K block (grouped
  // 128x256: 19 % more instructions than the dense kernel).
  // kWhole: the caller knows the slab's rows all belong to its group (no row-by-row path).
  template <bool kWhole = !kGrouped>
  static FP8JIT_DEVICE void slab_store(const GemmParams& p, u8* slab, int wg, int slab_y,
                                       int slab_x, int rows_end) {
    tma::fence_smem_for_async();
    named_barrier_sync(1 + wg, 128);
    // Uniform across the warpgroup: every thread holds the same slab_y and rows_end.
    if (kWhole || whole_slab(p, slab_y, rows_end)) {
      if (threadIdx.x % 128 == 0) {
        // A cluster partner's tile may lie wholly past the edge of D: nothing to store.
        if (slab_y < p.M)
#pragma unroll
          for (int i = 0; i < kPanels; ++i)
            if (slab_x + i * kPanelCols < p.N)
              tma::store_2d(&p.tma_d, slab + i * kPanelBytes, slab_x + i * kPanelCols, slab_y);
        tma::store_commit();
      }
    } else if constexpr (kSwizzled) {
      copy_rows(p, slab, slab_y, slab_x, rows_end - slab_y);
    } else if (threadIdx.x % 128 == 0) {
      store_rows(p, slab, slab_y, slab_x, rows_end - slab_y);
      tma::store_commit();
    }
  }
  // Whether a slab's rows all lie before its group's end (or D's last row clips it anyway).
  static FP8JIT_DEVICE bool whole_slab(const GemmParams& p, int slab_y, int rows_end) {
    return slab_y + kRowsPerWG <= rows_end || rows_end >= p.M;
  }
  // The slab's first `rows` rows to D by one thread (row-major slabs: grouped layouts): each
  // row's columns before N by a bulk copy of whole 16-byte pieces (D's rows and the slab's are
  // 16-byte aligned wherever slabs are used: GemmParams::tma_store), the last few elements by
  // plain stores.
  static FP8JIT_DEVICE void store_rows(const GemmParams& p, const u8* slab, int slab_y, int slab_x,
                                       int rows) {
    static_assert(!kSwizzled, "rows go out one by one from row-major slabs only");
    const int bytes = min(BLOCK_N, p.N - slab_x) * S, whole = bytes / 16 * 16;
#pragma unroll 1
    for (int r = 0; r < rows; ++r) {
      const u8* from = slab + static_cast<i64>(r) * BLOCK_N * S;
      u8* to = static_cast<u8*>(p.d) + ((slab_y + r) * p.ldd + slab_x) * S;
      if (whole > 0) tma::store_bytes(to, from, whole);
#pragma unroll 1
      for (int b = whole; b < bytes; ++b) to[b] = from[b];
    }
  }

  // The slab's first `rows` rows to D by the whole warpgroup (swizzled slabs of grouped layouts,
  // whose rows are not contiguous in shared memory): 16-byte chunk c of row r sits in panel
  // c / kChunks at chunk (c % kChunks) ^ row_chunk_xor(r), as pair_base lays it out; D's rows and
  // slab_x are 16-byte aligned wherever slabs are used (GemmParams::tma_store, BLOCK_N x S a
  // multiple of kPanel), so whole chunks go by 16-byte stores and only a chunk cut by column N by
  // narrower ones. The next slab_acquire's barrier orders these reads before the slab is written
  // again.
  static FP8JIT_DEVICE void copy_rows(const GemmParams& p, const u8* slab, int slab_y, int slab_x,
                                      int rows) {
    constexpr int kRowChunks = BLOCK_N * S / 16, kChunks = kPanel / 16;
    const int bytes = min(BLOCK_N, p.N - slab_x) * S;
#pragma unroll 1
    for (int i = threadIdx.x % 128; i < rows * kRowChunks; i += 128) {
      const int r = i / kRowChunks, c = i % kRowChunks;
      if (c * 16 >= bytes) continue;
      const uint4 v =
          *reinterpret_cast<const uint4*>(slab + (c / kChunks) * kPanelBytes + r * kPanel +
                                          (((c % kChunks) ^ row_chunk_xor(r)) << 4));
      u8* to = static_cast<u8*>(p.d) + (static_cast<i64>(slab_y + r) * p.ldd + slab_x) * S + c * 16;
      if (c * 16 + 16 <= bytes) {
        *reinterpret_cast<uint4*>(to) = v;
      } else {  // 2 to 14 bytes (16-bit D) or 4 to 12 (FP32), by words and a last half word
        const int rest = bytes - c * 16;
        const u32 w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          if (4 * k + 4 <= rest) reinterpret_cast<u32*>(to)[k] = w[k];
          else if (4 * k + 2 == rest) reinterpret_cast<u16*>(to)[2 * k] = static_cast<u16>(w[k]);
        }
      }
    }
  }

  static FP8JIT_DEVICE void run(const GemmParams& p, const TileOut& o, u8* slab,
                                const float (&v)[kMmaM][kAccum], int wg, int row0, int col0,
                                int slab_y, int slab_x, int split) {
    if constexpr (kTransposed) {  // no slab, no partials (the kernel traps on such a launch)
      for_each_pair(p, o, v, row0, col0, [&](int, int, int, int row, int col, const float(&x)[2]) {
        if (row < o.rows_end && col < p.N) store_pair(p, row, col, x);
      });
      return;
    }
    if (o.partials) {
      partials(p, v, row0, col0, split);
      return;
    }
    // Swizzled slabs: the TMA-store and direct-store paths as two loops. One loop testing o.tma
    // at every pair put each shared store in a branch of its own (BSSY/BSYNC and ~4 more
    // instructions a pair), which cost shapes of one tile per CTA 5-10 % (128x128 at
    // 500x4096x1536) and 128x192, whose every tile comes here, 3-9 %. Elsewhere the single loop
    // stays: what a pair needs besides its values (row-major slab addresses, per-row scaling's
    // scales of B) ptxas hoisted out of a loop of stores alone into registers that were not there
    // (128x208 per tensor: 90 spill instructions; per row with bias, 128x192: 26).
    if constexpr (kSwizzled && SCALE != kPerRow) {
      if (!o.tma) {
        for_each_pair(p, o, v, row0, col0, [&](int, int, int, int row, int col, const float(&x)[2]) {
          if (row < o.rows_end && col < p.N) store_pair(p, row, col, x);
        });
        return;
      }
      slab_acquire(wg);
      const u32 base = pair_base(slab, row0 - slab_y, col0 - slab_x);
      for_each_pair(p, o, v, row0, col0, [&](int mm, int j, int h, int, int, const float(&x)[2]) {
        store_pair_at(base, mm, h, j, x);
      });
      slab_store(p, slab, wg, slab_y, slab_x, o.rows_end);
      return;
    }
    if (o.tma) slab_acquire(wg);
    const u32 base = kSwizzled ? pair_base(slab, row0 - slab_y, col0 - slab_x) : 0;
    for_each_pair(p, o, v, row0, col0,
                  [&](int mm, int j, int h, int row, int col, const float(&x)[2]) {
      if (o.tma) {
        if constexpr (kSwizzled)
          store_pair_at(base, mm, h, j, x);
        else
          stage_pair(slab, row - slab_y, col - slab_x, x);  // slab coordinates
      } else if (row < o.rows_end && col < p.N) {
        store_pair(p, row, col, x);
      }
    });
    if (o.tma) slab_store(p, slab, wg, slab_y, slab_x, o.rows_end);
  }

  // Column half `half` of a tile split in kHalves (TMA-store path): scaled, converted and written
  // into the slab, each half under the other half's wgmmas (the caller acquires the slab before
  // the first half and stores it after the second).
  template <int kHalves, int half>
  static FP8JIT_DEVICE void stage_half(const GemmParams& p, const TileOut& o, u8* slab,
                                       const float (&v)[kMmaM][kAccum], int row0, int col0,
                                       int slab_y, int slab_x) {
    constexpr int kOctets = BLOCK_N / 8 / kHalves;
    const u32 base = kSwizzled ? pair_base(slab, row0 - slab_y, col0 - slab_x) : 0;
    for_each_pair<half * kOctets, (half + 1) * kOctets>(
        p, o, v, row0, col0, [&](int mm, int j, int h, int row, int col, const float(&x)[2]) {
          if constexpr (kSwizzled)
            store_pair_at(base, mm, h, j, x);
          else
            stage_pair(slab, row - slab_y, col - slab_x, x);
        });
  }

  // Deferred epilogue (16-bit D through TMA stores): at a tile's end its scaled, biased values
  // are packed into kAccum / 2 registers (pair 2j + h of slab mm), half the promoted sums'; the
  // slab write and the TMA store run later, under the next tile's first wgmmas.
  static constexpr bool kCanPack = S == 2;
  static constexpr int kPacked = kAccum / 2;
  static FP8JIT_DEVICE void pack(const GemmParams& p, const TileOut& o,
                                 const float (&v)[kMmaM][kAccum], int row0, int col0,
                                 u32 (&w)[kMmaM][kPacked]) {
    for_each_pair(p, o, v, row0, col0, [&](int mm, int j, int h, int, int, const float(&x)[2]) {
      w[mm][2 * j + h] = f32_to_elem<OUT>(x[0]) | (f32_to_elem<OUT>(x[1]) << 16);
    });
  }
  // Writes packed values to the slab and stores it: (r, c) is the thread's first row and
  // column within the slab.
  static FP8JIT_DEVICE void store_packed(const GemmParams& p, u8* slab,
                                         const u32 (&w)[kMmaM][kPacked], int wg, int r, int c,
                                         int slab_y, int slab_x, int rows_end) {
    slab_acquire(wg);
    const u32 base = kSwizzled ? pair_base(slab, r, c) : 0;
#pragma unroll
    for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
      for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          if constexpr (kSwizzled)
            store_word_at(base, mm, h, j, w[mm][2 * j + h]);
          else
            *reinterpret_cast<u32*>(
                slab + (static_cast<i64>(r + mm * 64 + 8 * h) * BLOCK_N + c + 8 * j) * S) =
                w[mm][2 * j + h];
    slab_store(p, slab, wg, slab_y, slab_x, rows_end);
  }

  static FP8JIT_DEVICE void stage_pair(u8* slab, int r, int c, const float (&x)[2]) {
    u8* at = slab + (static_cast<i64>(r) * BLOCK_N + c) * S;
    if constexpr (S == 4) {
      reinterpret_cast<float*>(at)[0] = x[0];
      reinterpret_cast<float*>(at)[1] = x[1];
    } else {
      *reinterpret_cast<u32*>(at) = f32_to_elem<OUT>(x[0]) | (f32_to_elem<OUT>(x[1]) << 16);
    }
  }

  static FP8JIT_DEVICE void store_pair(const GemmParams& p, int row, int col, const float (&x)[2]) {
    if constexpr (kTransposed) {  // the pair's columns are two rows of D
      const i64 at = static_cast<i64>(col) * p.ldd + row;
      store_bits<S>(p.d, at, f32_to_elem<OUT>(x[0]));
      if (col + 1 < p.N) store_bits<S>(p.d, at + p.ldd, f32_to_elem<OUT>(x[1]));
      return;
    }
    const i64 at = static_cast<i64>(row) * p.ldd + col;
    if (p.pair_stores && col + 1 < p.N) {
      if constexpr (S == 4) {
        const u32 w[2] = {__float_as_uint(x[0]), __float_as_uint(x[1])};
        store_words<2>(static_cast<float*>(p.d) + at, w);
      } else {
        const u32 w[1] = {f32_to_elem<OUT>(x[0]) | (f32_to_elem<OUT>(x[1]) << 16)};
        store_words<1>(static_cast<u16*>(p.d) + at, w);
      }
    } else {
      store_bits<S>(p.d, at, f32_to_elem<OUT>(x[0]));
      if (col + 1 < p.N) store_bits<S>(p.d, at + 1, f32_to_elem<OUT>(x[1]));
    }
  }

  // Split-K: the scaled FP32 partial tile of this K range (bias comes in the reduction).
  static FP8JIT_DEVICE void partials(const GemmParams& p, const float (&v)[kMmaM][kAccum], int row0,
                                     int col0, int split) {
    float* w = p.workspace + static_cast<i64>(split) * p.M * p.N;
    float s_tensor = 1.0f;
    if constexpr (SCALE == kPerTensor) s_tensor = __ldg(p.scale_a) * __ldg(p.scale_b);
#pragma unroll
    for (int mm = 0; mm < kMmaM; ++mm)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = row0 + mm * 64 + 8 * h;
        if (row >= p.M) continue;
        float s_row = s_tensor;
        if constexpr (SCALE == kPerRow) s_row = __ldg(p.scale_a + row);
#pragma unroll
        for (int j = 0; j < BLOCK_N / 8; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            const int col = col0 + 8 * j + c;
            if (col >= p.N) continue;
            float x = v[mm][4 * j + 2 * h + c];
            if constexpr (SCALE == kPerTensor) x *= s_row;
            if constexpr (SCALE == kPerRow) x *= s_row * __ldg(p.scale_b + col);
            w[static_cast<i64>(row) * p.N + col] = x;
          }
      }
  }
};

}  // namespace dev
}  // namespace fp8jit
