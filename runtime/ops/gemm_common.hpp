// Pieces the dense and the grouped GEMM launchers share: argument checks and the TMA tensor maps
// of the operands and scales.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "fp8jit/gemm/params.cuh"
#include "fp8jit/types.hpp"
#include "generator/families/gemm_geometry.hpp"

namespace fp8jit::ops {

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Each throws Error(invalid_argument) naming the argument.
void require_ptr(const void* p, const char* name);
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
// D's map for TMA stores, where D's rows are 16-byte aligned (sets p.tma_store); each consumer
// warpgroup stores its slab of rows_per_wg x block_n.
void encode_store_map(dev::GemmParams& p, const GemmGeometry& g, const GemmConfig& c, void* d, DType dtype,
                      std::int64_t rows, std::int64_t n, std::int64_t ldd, bool allowed);

}  // namespace fp8jit::ops
