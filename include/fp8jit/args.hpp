// Arguments of the operations (quantize, dequantize, gemm): plain values, shared by the runtime,
// the host reference and the autotuner, which therefore need not include the runtime's header.
#pragma once

#include <cstdint>

#include "fp8jit/export.hpp"
#include "fp8jit/types.hpp"

namespace fp8jit {

// x [m, k] (row stride ldx elements) -> q [m, k] FP8 (row stride ldq bytes) and fp32 scales.
// All pointers are device pointers. ld* = 0 means "dense" (k, or m for the transposed output).
struct QuantizeArgs {
  const void* x = nullptr;
  DType input = DType::bf16;
  std::int64_t m = 0, k = 0, ldx = 0;
  void* q = nullptr;
  Fp8Format format = Fp8Format::e4m3;
  std::int64_t ldq = 0;
  float* scales = nullptr;  // scale_count(granularity, scale_layout, m, k) floats
  Granularity granularity = Granularity::group128;
  ScaleLayout scale_layout = ScaleLayout::row_major;
  bool pow2_scale = false;              // round scales up to powers of two
  const float* static_scale = nullptr;  // per-tensor only: use this scale instead of the amax
  // Optional transposed output qt [k, m] (row stride ldqt). For 1x128 it is scaled by 1x128
  // groups of the transpose (128x1 of x) into scales_t; for per-row scaling by rows of the
  // transpose (columns of x: torchao's rowwise recipe for weight gradients) into scales_t;
  // otherwise it shares `scales`.
  void* qt = nullptr;
  std::int64_t ldqt = 0;
  // 1x128: scale_count(group128, scale_layout, k, m) floats; per row: k floats.
  float* scales_t = nullptr;
  float* amax = nullptr;      // optional: max |x| over the tensor (NaNs ignored)
  // DeepSeek-V3 kernel.py's act_quant arithmetic instead of IEEE rounding, its bytes (see
  // QuantizeProblem::deepseek_arithmetic): 1x128, E4M3, no transposed output. The host reference
  // (fp8jit::reference::quantize) refuses it: it models IEEE arithmetic only.
  bool deepseek_arithmetic = false;
  // Optional: k floats (device, 4-byte aligned), written with the sum over the m rows of each
  // column of x, in fp32: the bias gradient when x is dY. Needs the transposed output (qt) and
  // IEEE arithmetic. Summation order: within each 128-row tile a fixed tree (row r with r + 64,
  // then + 32, ..., + 1, rows past m counting as 0), then the tiles in order; the per-tile sums go
  // through the runtime's per-stream workspace.
  float* column_sums = nullptr;
};

// q [m, k] FP8 and scales -> y [m, k] (row stride ldy elements).
struct DequantizeArgs {
  const void* q = nullptr;
  Fp8Format format = Fp8Format::e4m3;
  std::int64_t m = 0, k = 0, ldq = 0;
  const float* scales = nullptr;
  Granularity granularity = Granularity::block128;
  ScaleLayout scale_layout = ScaleLayout::row_major;
  void* y = nullptr;
  DType output = DType::bf16;
  std::int64_t ldy = 0;
};

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

// D [m, n] = (A [m, k] scaled) . (B [n, k] scaled)^T (+ bias [n]). A and B are FP8 and K-major
// (rows of K bytes, leading dimensions in elements); D is row-major. Device pointers.
struct GemmArgs {
  const void* a = nullptr;
  Fp8Format a_format = Fp8Format::e4m3;
  std::int64_t lda = 0;  // 0 = k
  const void* b = nullptr;
  Fp8Format b_format = Fp8Format::e4m3;
  std::int64_t ldb = 0;
  void* d = nullptr;
  DType d_dtype = DType::bf16;
  std::int64_t ldd = 0;  // 0 = n
  std::int64_t m = 0, n = 0, k = 0;
  ScaleMode scale_mode = ScaleMode::block;
  // tensor: 1 float each; rowwise: m and n floats; block: A 1x128 (scale_count(group128,
  // scale_a_layout, m, k)) and B 128x128 (scale_count(block128, scale_b_layout, n, k)); group: A
  // and B 1x128. The sizes (in floats) are checked against the shape.
  const float* scale_a = nullptr;
  std::int64_t scale_a_size = 0;
  ScaleLayout scale_a_layout = ScaleLayout::col_major_tma;
  const float* scale_b = nullptr;
  std::int64_t scale_b_size = 0;
  ScaleLayout scale_b_layout = ScaleLayout::row_major;
  const void* bias = nullptr;  // [n] in d_dtype, or null
  bool fast_accum = false;     // tensor/rowwise only: see GemmProblem::fast_accum
  // The most SMs this call's persistent grid may occupy (leaving the rest to kernels running
  // beside it, e.g. communication); 0: RuntimeOptions::max_sms. Kernels, split-K and tuning rows
  // are chosen for the budget; a 2-CTA-cluster kernel takes at least one cluster.
  int max_sms = 0;
};

// Grouped GEMMs for mixture-of-experts layers: for every group (expert) g, its rows of D =
// (its rows of A scaled) . (B_g scaled)^T, all groups in one persistent launch. The group table
// lives on the device, so the same call (or a captured CUDA graph of it) serves any routing.
//   contiguous: A [m, k] and D [m, n] hold the groups' rows one after another; group g owns rows
//               [group_rows[g], group_rows[g + 1]) (groups + 1 ascending int32 offsets; any group
//               size, 0 included; rows outside every group are neither computed nor written).
//   masked:     A [groups * m, k] and D [groups * m, n], m = M_max rows per group; group g owns
//               its first group_rows[g] rows (masked_m, groups int32); the rest are not written.
//   indexed:    A [m, k] and D [m, n]; row r belongs to group group_rows[r] (m_indices, m int32;
//               -1: a padding row, neither computed nor written). Each group's rows start at a
//               multiple of kGemmIndexedAlignment (128) rows and run on without gaps, padding
//               (-1) filling the rest of their last 128-row chunk (DeepGEMM's m_indices layout).
//               Tiles of at most 128 rows (block_m 64 or 128) take this layout.
// B is [groups * n, k]: group g's B_g [n, k] is rows [g * n, (g + 1) * n) (row stride ldb).
// A table out of range (an offset below 0, past m or below the previous one; masked_m below 0 or
// above m; an index out of [-1, groups) or a group's rows that do not start a 128-row chunk) is
// clamped on the device (out-of-range indices and misplaced rows count as padding), so nothing
// outside the tensors is read or written, and reported in `status` (GemmStatusBits) when given.
struct GroupedGemmArgs {
  GemmLayout layout = GemmLayout::contiguous;
  std::int64_t groups = 0;
  // device int32: contiguous groups + 1 offsets, masked groups counts, indexed m group indices
  const int* group_rows = nullptr;
  const void* a = nullptr;
  Fp8Format a_format = Fp8Format::e4m3;
  std::int64_t lda = 0;  // 0 = k
  const void* b = nullptr;
  Fp8Format b_format = Fp8Format::e4m3;
  std::int64_t ldb = 0;  // 0 = k
  void* d = nullptr;
  DType d_dtype = DType::bf16;
  std::int64_t ldd = 0;  // 0 = n
  std::int64_t m = 0;    // contiguous: rows of A and D; masked: M_max, the rows of each group
  std::int64_t n = 0, k = 0;
  // The rows per group the kernel is chosen for: the expected routing (masked: decode batch x
  // top-k / experts). 0: m / groups (contiguous), m (masked).
  std::int64_t expected_m = 0;
  ScaleMode scale_mode = ScaleMode::block;
  // A's scales cover all of A's rows (contiguous m, masked groups * m), as GemmArgs's for that
  // many rows; B's are one GemmArgs-sized set per group, one after another: tensor 1 float per
  // group, rowwise n, block scale_count(block128, scale_b_layout, n, k).
  const float* scale_a = nullptr;
  std::int64_t scale_a_size = 0;
  ScaleLayout scale_a_layout = ScaleLayout::col_major_tma;
  const float* scale_b = nullptr;
  std::int64_t scale_b_size = 0;
  ScaleLayout scale_b_layout = ScaleLayout::row_major;
  int* status = nullptr;    // optional device int32; the kernel ORs GemmStatusBits into it
  bool fast_accum = false;  // tensor/rowwise only
  int max_sms = 0;          // as GemmArgs::max_sms
};

// What the grouped kernels OR into GroupedGemmArgs::status.
enum GemmStatusBits : int {
  kGemmGroupOffsetsClamped = 1,  // contiguous: an offset out of [0, m] or below the one before
  kGemmMaskedRowsClamped = 2,    // masked: a masked_m out of [0, m]
  kGemmRowIndicesInvalid = 4,    // indexed: an index out of [-1, groups), or another group's rows
                                 // inside a tile (neither written; the tile's rows after them up
                                 // to the end of their 64-row slab are left unwritten too)
};
// Indexed layouts: each group's rows start at a multiple of this many rows.
inline constexpr std::int64_t kGemmIndexedAlignment = 128;

// Floats a scale tensor holds for an [m, k] tensor (col_major_tma pads its row count to 4).
FP8JIT_API std::int64_t scale_count(Granularity g, ScaleLayout layout, std::int64_t m,
                                    std::int64_t k);
// The granularity of a GEMM's scales of A and of B in each scale mode: tensor one, rowwise a row,
// block A 1x128 and B 128x128, group 1x128 both (what GemmArgs' scale sizes are counted in).
FP8JIT_API Granularity gemm_scale_granularity_a(ScaleMode mode);
FP8JIT_API Granularity gemm_scale_granularity_b(ScaleMode mode);

}  // namespace fp8jit
