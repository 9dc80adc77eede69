// Pieces the dense and the grouped GEMM launchers share: argument checks and the TMA tensor maps
// of the operands and scales.
#pragma once

#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "fp8jit/gemm/params.cuh"
#include "fp8jit/types.hpp"
#include "generator/families/gemm_geometry.hpp"

namespace fp8jit::ops {

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Work units a persistent grid runs at once within `sm_count` SMs (its budget): one CTA per SM,
// or for kernels with clusters of `cluster` CTAs the resident clusters that fit in the budget, at
// least one.
inline std::int64_t resident_units(int max_active_clusters, int cluster, int sm_count) {
  if (cluster <= 1) return sm_count;
  return std::max(1, std::min(max_active_clusters, sm_count / cluster));
}

// Each throws Error(invalid_argument) naming the argument.
void require_ptr(const void* p, const char* name);
// A call's SM budget (GemmArgs::max_sms): 0 (the runtime's) or more.
void check_max_sms(int max_sms);
void require_aligned(const void* p, std::size_t bytes, const char* name, const char* why);
// A leading dimension: 0 means `min` (dense); otherwise at least `min`.
std::int64_t leading(std::int64_t ld, std::int64_t min, const char* name);
// The checks every FP8 GEMM's operands share: formats, fast accumulation, pointers, alignments
// and leading dimensions (TMA's 16-byte rows).
struct GemmOperands {
  const void* a;
  const void* b;
  void* d;
  const float* scale_a;
  const float* scale_b;
  Fp8Format a_format, b_format;
  DType d_dtype;
  ScaleMode scale_mode;
  bool fast_accum;
};
void check_operands(const GemmOperands& o, std::int64_t& lda, std::int64_t& ldb, std::int64_t k);

// (rs, cs) of a per-row (or per-128-row-block) x per-128-K-block scale tensor with `rows` rows.
void scale_strides(ScaleLayout layout, std::int64_t rows, std::int64_t k_blocks, long long& rs, long long& cs);

// Floats of A's scales for `rows` rows of A [rows, k], and of B's for one B [n, k].
std::int64_t scale_floats_a(ScaleMode mode, ScaleLayout layout, std::int64_t rows, std::int64_t k);
std::int64_t scale_floats_b(ScaleMode mode, ScaleLayout layout, std::int64_t n, std::int64_t k);

// The parameters dense and grouped launches share and that need no driver: D, the scales and
// their strides, the shape (A and D with `rows` rows) and tiling. Args: GemmArgs or
// GroupedGemmArgs, which name these fields alike.
template <class Args>
void fill_shape_params(dev::GemmParams& p, const GemmConfig& c, const Args& a, std::int64_t rows) {
  const std::int64_t kb = ceil_div(a.k, dev::kGemmBlockK);
  const std::size_t esize = dtype_size(a.d_dtype);
  p.d = a.d;
  p.ldd = a.ldd;
  p.scale_a = a.scale_a;
  p.scale_b = a.scale_b;
  if (a.scale_mode == ScaleMode::block || a.scale_mode == ScaleMode::group)
    scale_strides(a.scale_a_layout, rows, kb, p.sa_rs, p.sa_cs);
  if (a.scale_mode == ScaleMode::block) scale_strides(a.scale_b_layout, ceil_div(a.n, 128), kb, p.sb_rs, p.sb_cs);
  if (a.scale_mode == ScaleMode::group) scale_strides(a.scale_b_layout, a.n, kb, p.sb_rs, p.sb_cs);
  p.M = static_cast<int>(rows);
  p.N = static_cast<int>(a.n);
  p.K = static_cast<int>(a.k);
  p.tiles_m = static_cast<int>(ceil_div(rows, c.block_m));
  p.tiles_n = static_cast<int>(ceil_div(a.n, c.block_n));
  p.k_blocks = static_cast<int>(kb);
  p.pair_stores = (a.ldd % 2 == 0 && reinterpret_cast<std::uintptr_t>(a.d) % (2 * esize) == 0) ? 1 : 0;
  p.sb_hi = 1;
}

// A 2-D tensor map: `cols` x `rows` elements of `esize` bytes, rows `ld` elements apart; from the
// calling thread's cache when these arguments were encoded before (TensorMapCache). try_encode
// returns the driver's answer; encode throws on failure.
CUresult try_encode(dev::TensorMap* out, CUtensorMapDataType type, std::size_t esize, const void* base,
                    std::int64_t rows, std::int64_t cols, std::int64_t ld, int box_cols, int box_rows,
                    CUtensorMapSwizzle swizzle);
void encode(dev::TensorMap* out, CUtensorMapDataType type, std::size_t esize, const void* base, std::int64_t rows,
            std::int64_t cols, std::int64_t ld, int box_cols, int box_rows, CUtensorMapSwizzle swizzle);

CUtensorMapDataType tma_type(DType t);
bool aligned16(const void* p);

// A's and B's FP8 tiles (128-byte swizzle; a 2-CTA cluster loads half of the shared operand's
// tile per CTA) for A [rows_a, k] and B [rows_b, k].
void encode_operand_maps(dev::GemmParams& p, const GemmGeometry& g, const void* a, std::int64_t rows_a,
                         std::int64_t lda, const void* b, std::int64_t rows_b, std::int64_t ldb, std::int64_t k);
// A's column-major 1x128 scales by TMA with the stage (p.tma_sa, box box_rows x 1 over `rows`
// rows; sets p.scale_tma and p.scale_tx), where the layout and the driver allow it; false leaves
// the kernel's cp.async path, which reads any layout.
bool encode_scale_map_a(dev::GemmParams& p, const GemmGeometry& g, ScaleLayout layout, const float* scale_a,
                        std::int64_t rows, int box_rows);

// Whether D (its address and row pitch) takes TMA stores.
bool takes_tma_stores(const void* d, DType dtype, std::int64_t ldd);

// D's map for TMA stores, where D's rows are 16-byte aligned (sets p.tma_store); each consumer
// warpgroup stores its slab of rows_per_wg x block_n.
void encode_store_map(dev::GemmParams& p, const GemmGeometry& g, const GemmConfig& c, void* d, DType dtype,
                      std::int64_t rows, std::int64_t n, std::int64_t ldd, bool allowed);

}  // namespace fp8jit::ops
