#include "runtime/ops/gemm_common.hpp"

#include <fmt/format.h>

#include <string>

#include "fp8jit/args.hpp"
#include "fp8jit/error.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/tensor_maps.hpp"

namespace fp8jit::ops {

void check_max_sms(int max_sms) {
  if (max_sms < 0)
    throw_invalid("max_sms", std::to_string(max_sms), "the most SMs the GEMM may occupy: 1 or more, or 0 for the runtime's");
}

void require_ptr(const void* p, const char* name) {
  if (!p) throw_invalid(name, "nullptr", "a device pointer is required");
}

void require_aligned(const void* p, std::size_t bytes, const char* name, const char* why) {
  if (reinterpret_cast<std::uintptr_t>(p) % bytes != 0)
    throw_invalid(name, fmt::format("{}", p), fmt::format("must be {}-byte aligned ({})", bytes, why));
}

std::int64_t leading(std::int64_t ld, std::int64_t min, const char* name) {
  if (ld == 0) return min;
  if (ld < min) throw_invalid(name, std::to_string(ld), fmt::format("must be at least {}", min));
  return ld;
}

void check_operands(const GemmOperands& o, std::int64_t& lda, std::int64_t& ldb, std::int64_t k) {
  if (o.a_format == Fp8Format::e5m2 && o.b_format == Fp8Format::e5m2)
    throw_invalid("a_format/b_format", "e5m2/e5m2", "at least one operand must be E4M3");
  if (o.fast_accum && (o.scale_mode == ScaleMode::block || o.scale_mode == ScaleMode::group))
    throw_invalid("fast_accum", "true", "only tensor and rowwise scaling accumulate without promotion");
  require_ptr(o.a, "a");
  require_ptr(o.b, "b");
  require_ptr(o.d, "d");
  require_ptr(o.scale_a, "scale_a");
  require_ptr(o.scale_b, "scale_b");
  require_aligned(o.a, 16, "a", "TMA");
  require_aligned(o.b, 16, "b", "TMA");
  require_aligned(o.d, dtype_size(o.d_dtype), "d", "element size");
  require_aligned(o.scale_a, 4, "scale_a", "fp32");
  require_aligned(o.scale_b, 4, "scale_b", "fp32");
  lda = leading(lda, k, "lda");
  ldb = leading(ldb, k, "ldb");
  if (lda % 16) throw_invalid("lda", std::to_string(lda), "must be a multiple of 16 (TMA row alignment)");
  if (ldb % 16) throw_invalid("ldb", std::to_string(ldb), "must be a multiple of 16 (TMA row alignment)");
}

void scale_strides(ScaleLayout layout, std::int64_t rows, std::int64_t k_blocks, long long& rs, long long& cs) {
  if (layout == ScaleLayout::row_major) {
    rs = k_blocks;
    cs = 1;
  } else {
    rs = 1;
    cs = (rows + 3) / 4 * 4;
  }
}

namespace {

std::int64_t scale_floats(Granularity g, ScaleLayout layout, std::int64_t rows, std::int64_t k) {
  switch (g) {
    case Granularity::tensor: return 1;
    case Granularity::row: return rows;
    default: return scale_count(g, layout, rows, k);
  }
}

}  // namespace

std::int64_t scale_floats_a(ScaleMode mode, ScaleLayout layout, std::int64_t rows, std::int64_t k) {
  return scale_floats(gemm_scale_granularity_a(mode), layout, rows, k);
}

std::int64_t scale_floats_b(ScaleMode mode, ScaleLayout layout, std::int64_t n, std::int64_t k) {
  return scale_floats(gemm_scale_granularity_b(mode), layout, n, k);
}

namespace {

CUresult encode_with_driver(dev::TensorMap* out, const TensorMapKey& k) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(k.cols), static_cast<cuuint64_t>(k.rows)};
  const cuuint64_t strides_bytes[1] = {static_cast<cuuint64_t>(k.ld) * k.esize};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(k.box_cols), static_cast<cuuint32_t>(k.box_rows)};
  const cuuint32_t elem_strides[2] = {1, 1};
  return driver::api().cuTensorMapEncodeTiled(reinterpret_cast<CUtensorMap*>(out), k.type, 2,
                                              const_cast<void*>(k.base), dims, strides_bytes, box, elem_strides,
                                              CU_TENSOR_MAP_INTERLEAVE_NONE, k.swizzle,
                                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

}  // namespace

CUresult try_encode(dev::TensorMap* out, CUtensorMapDataType type, std::size_t esize, const void* base,
                    std::int64_t rows, std::int64_t cols, std::int64_t ld, int box_cols, int box_rows,
                    CUtensorMapSwizzle swizzle) {
  const TensorMapKey key{base, rows, cols, ld, box_cols, box_rows, type, swizzle, static_cast<std::uint32_t>(esize)};
  return TensorMapCache::local().get(key, out, encode_with_driver);
}

void encode(dev::TensorMap* out, CUtensorMapDataType type, std::size_t esize, const void* base, std::int64_t rows,
            std::int64_t cols, std::int64_t ld, int box_cols, int box_rows, CUtensorMapSwizzle swizzle) {
  driver::check(try_encode(out, type, esize, base, rows, cols, ld, box_cols, box_rows, swizzle),
                "cuTensorMapEncodeTiled");
}

CUtensorMapDataType tma_type(DType t) {
  return t == DType::bf16   ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
         : t == DType::fp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

void encode_operand_maps(dev::GemmParams& p, const GemmGeometry& g, const void* a, std::int64_t rows_a,
                         std::int64_t lda, const void* b, std::int64_t rows_b, std::int64_t ldb, std::int64_t k) {
  constexpr int kBlockK = dev::kGemmBlockK;
  encode(&p.tma_a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a, rows_a, k, lda, kBlockK, g.box_rows_a,
         CU_TENSOR_MAP_SWIZZLE_128B);
  encode(&p.tma_b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, b, rows_b, k, ldb, kBlockK, g.box_rows_b,
         CU_TENSOR_MAP_SWIZZLE_128B);
}

bool encode_scale_map_a(dev::GemmParams& p, const GemmGeometry& g, ScaleLayout layout, const float* scale_a,
                        std::int64_t rows, int box_rows) {
  if (layout != ScaleLayout::col_major_tma || !aligned16(scale_a)) return false;
  if (try_encode(&p.tma_sa, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, scale_a, p.k_blocks, rows, p.sa_cs, box_rows, 1,
                 CU_TENSOR_MAP_SWIZZLE_NONE) != CUDA_SUCCESS)
    return false;
  p.scale_tx = g.scale_tma_bytes;
  p.scale_tma = 1;
  return true;
}

bool takes_tma_stores(const void* d, DType dtype, std::int64_t ldd) {
  // NOTE: TMA stores need 16-byte aligned rows; other leading dimensions take direct stores.
  return (ldd * static_cast<std::int64_t>(dtype_size(dtype))) % 16 == 0 && aligned16(d);
}

void encode_store_map(dev::GemmParams& p, const GemmGeometry& g, const GemmConfig& c, void* d, DType dtype,
                      std::int64_t rows, std::int64_t n, std::int64_t ldd, bool allowed) {
  const std::size_t esize = dtype_size(dtype);
  p.tma_store = allowed && takes_tma_stores(d, dtype, ldd);
  if (!p.tma_store) return;
  if (g.swizzled_slab)
    encode(&p.tma_d, tma_type(dtype), esize, d, rows, n, ldd,
           static_cast<int>(g.panel_bytes / esize), g.rows_per_wg,
           g.panel_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
           : g.panel_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                 : CU_TENSOR_MAP_SWIZZLE_32B);
  else
    encode(&p.tma_d, tma_type(dtype), esize, d, rows, n, ldd, c.block_n, g.rows_per_wg, CU_TENSOR_MAP_SWIZZLE_NONE);
}

}  // namespace fp8jit::ops

namespace fp8jit {

Granularity gemm_scale_granularity_a(ScaleMode mode) {
  return mode == ScaleMode::tensor    ? Granularity::tensor
         : mode == ScaleMode::rowwise ? Granularity::row
                                      : Granularity::group128;
}

Granularity gemm_scale_granularity_b(ScaleMode mode) {
  return mode == ScaleMode::block ? Granularity::block128 : gemm_scale_granularity_a(mode);
}

}  // namespace fp8jit
