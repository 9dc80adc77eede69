#include "runtime/ops/gemm.hpp"

#include <fmt/format.h>

#include <climits>

#include "fp8jit/error.hpp"
#include "fp8jit/gemm/params.cuh"
#include "generator/families/gemm_geometry.hpp"
#include "runtime/ops/dims.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/tensor_maps.hpp"

namespace fp8jit::ops {
namespace {

constexpr std::int64_t kBlockK = dev::kGemmBlockK;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

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

// Floats each operand's scales need, from the mode and layouts.
std::int64_t needed_scales_a(const GemmArgs& a) {
  switch (a.scale_mode) {
    case ScaleMode::tensor: return 1;
    case ScaleMode::rowwise: return a.m;
    default: return scale_count(Granularity::group128, a.scale_a_layout, a.m, a.k);
  }
}
std::int64_t needed_scales_b(const GemmArgs& a) {
  switch (a.scale_mode) {
    case ScaleMode::tensor: return 1;
    case ScaleMode::rowwise: return a.n;
    case ScaleMode::block: return scale_count(Granularity::block128, a.scale_b_layout, a.n, a.k);
    case ScaleMode::group: return scale_count(Granularity::group128, a.scale_b_layout, a.n, a.k);
  }
  return 0;
}

// (rs, cs) of a per-row (or per-128-row-block) x per-128-K-block scale tensor with `rows` rows.
void strides(ScaleLayout layout, std::int64_t rows, std::int64_t k_blocks, long long& rs, long long& cs) {
  if (layout == ScaleLayout::row_major) { rs = k_blocks; cs = 1; }
  else { rs = 1; cs = (rows + 3) / 4 * 4; }
}

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

// A 2-D tensor map: `cols` x `rows` elements of `esize` bytes, rows `ld` elements apart; from the
// calling thread's cache when these arguments were encoded before (TensorMapCache).
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
  return t == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
         : t == DType::fp16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

bool aligned16(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; }

// Tensor maps for the scales of block and group scaling where TMA can read them (see
// GemmParams): A's when column-major, and group scaling's B when column-major too. Sets
// p.scale_tma; otherwise the kernel copies every scale with cp.async.
void encode_scale_maps(dev::GemmParams& p, const GemmArgs& a, const GemmConfig& c, const GemmGeometry& g) {
  p.sb_hi = 1;
  const std::int64_t kb = p.k_blocks;
  const bool block = a.scale_mode == ScaleMode::block;
  if (!block && a.scale_mode != ScaleMode::group) return;
  if (a.scale_a_layout != ScaleLayout::col_major_tma || !aligned16(a.scale_a)) return;
  if (!block && (a.scale_b_layout != ScaleLayout::col_major_tma || !aligned16(a.scale_b))) return;
  constexpr auto f32 = CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  constexpr auto none = CU_TENSOR_MAP_SWIZZLE_NONE;
  // A map the driver declines leaves the cp.async path, which reads any layout.
  if (try_encode(&p.tma_sa, f32, 4, a.scale_a, kb, a.m, p.sa_cs, c.block_m, 1, none) != CUDA_SUCCESS) return;
  if (!block && try_encode(&p.tma_sb, f32, 4, a.scale_b, kb, a.n, p.sb_cs, c.block_n, 1, none) != CUDA_SUCCESS)
    return;
  p.scale_tx = g.scale_tma_bytes;
  p.scale_tma = 1;
}

}  // namespace

GemmArgs normalize(const GemmArgs& in) {
  GemmArgs a = in;
  check_gemm_dims(a.m, a.n, a.k);
  if (a.a_format == Fp8Format::e5m2 && a.b_format == Fp8Format::e5m2)
    throw_invalid("a_format/b_format", "e5m2/e5m2", "at least one operand must be E4M3");
  if (a.fast_accum && (a.scale_mode == ScaleMode::block || a.scale_mode == ScaleMode::group))
    throw_invalid("fast_accum", "true", "only tensor and rowwise scaling accumulate without promotion");
  require_ptr(a.a, "a");
  require_ptr(a.b, "b");
  require_ptr(a.d, "d");
  require_ptr(a.scale_a, "scale_a");
  require_ptr(a.scale_b, "scale_b");
  require_aligned(a.a, 16, "a", "TMA");
  require_aligned(a.b, 16, "b", "TMA");
  require_aligned(a.d, dtype_size(a.d_dtype), "d", "element size");
  require_aligned(a.scale_a, 4, "scale_a", "fp32");
  require_aligned(a.scale_b, 4, "scale_b", "fp32");
  if (a.bias) require_aligned(a.bias, dtype_size(a.d_dtype), "bias", "element size");
  a.lda = leading(a.lda, a.k, "lda");
  a.ldb = leading(a.ldb, a.k, "ldb");
  a.ldd = leading(a.ldd, a.n, "ldd");
  if (a.lda % 16) throw_invalid("lda", std::to_string(a.lda), "must be a multiple of 16 (TMA row alignment)");
  if (a.ldb % 16) throw_invalid("ldb", std::to_string(a.ldb), "must be a multiple of 16 (TMA row alignment)");
  const std::int64_t need_a = needed_scales_a(a), need_b = needed_scales_b(a);
  if (a.scale_a_size < need_a)
    throw_invalid("scale_a_size", std::to_string(a.scale_a_size),
                  fmt::format("{} scaling of A [{}x{}] needs {} floats", to_string(a.scale_mode), a.m, a.k, need_a));
  if (a.scale_b_size < need_b)
    throw_invalid("scale_b_size", std::to_string(a.scale_b_size),
                  fmt::format("{} scaling of B [{}x{}] needs {} floats", to_string(a.scale_mode), a.n, a.k, need_b));
  return a;
}

GemmProblem problem_of(const GemmArgs& a) {
  return {a.a_format, a.b_format, a.d_dtype, a.scale_mode, a.bias != nullptr, a.fast_accum};
}

void check_matches(const KernelSpec& spec, const GemmArgs& a) {
  const GemmProblem p = gemm_problem_of(spec), q = problem_of(a);
  if (p.a_format != q.a_format || p.b_format != q.b_format || p.out != q.out || p.scale != q.scale ||
      p.bias != q.bias || p.fast_accum != q.fast_accum)
    throw_invalid("spec", spec_name(spec), "does not match the arguments' formats, output, scale mode, bias or accumulation");
}

namespace {

std::int64_t tile_count(const GemmConfig& c, const GemmArgs& a) {
  return ceil_div(a.m, c.block_m) * ceil_div(a.n, c.block_n);
}

// Every tile's `splits` CTAs fit on the GPU at once as one cluster each (a single wave: one work
// unit per CTA, which the in-cluster sum needs).
bool cluster_split_fits(const LoadedKernel& k, const GemmArgs& a, int splits) {
  return splits >= 2 && splits < static_cast<int>(k.split_clusters.size()) && gemm_sums_splits_in_smem(k.gemm_config) &&
         tile_count(k.gemm_config, a) <= k.split_clusters[splits];
}

}  // namespace

KernelLoadHook gemm_load_hook() {
  return {"gemm", [](LoadedKernel& k) {
            k.gemm_config = gemm_config_of(k.spec);
            if (k.cluster > 1 || !gemm_sums_splits_in_smem(k.gemm_config)) return;
            const int sms = driver::device_info().sm_count;
            // 0 where the driver declines a size: that split count then sums through the workspace.
            for (int size = 2; size < static_cast<int>(k.split_clusters.size()); ++size) {
              try {
                k.split_clusters[size] = resident_clusters(k, size, sms);
              } catch (const Error&) {
                k.split_clusters[size] = 0;
              }
            }
          }};
}

bool splits_in_cluster(const LoadedKernel& k, const GemmArgs& a, int splits, SplitSum sum) {
  return sum == SplitSum::cluster && cluster_split_fits(k, a, splits);
}

// The heuristic's split count; where its ranges cannot be summed inside clusters, the largest
// smaller count that can (no workspace, no second kernel: worth more than the extra ranges on
// decode-sized shapes: 128x4096x7168 28.7 -> 23.7 µs, G17), else the heuristic's count through
// the workspace.
int split_count(const LoadedKernel& k, const GemmArgs& a, int sm_count, SplitSum sum) {
  const int splits = gemm_split_k(a.m, a.n, a.k, k.gemm_config, sm_count);
  if (splits <= 1 || sum != SplitSum::cluster) return splits;
  for (int s = std::min(splits, static_cast<int>(k.split_clusters.size()) - 1); s >= 2; --s)
    if (cluster_split_fits(k, a, s)) return s;
  return splits;
}

std::size_t workspace_bytes(const LoadedKernel& k, const GemmArgs& a, int splits, SplitSum sum) {
  if (splits <= 1 || splits_in_cluster(k, a, splits, sum)) return 0;
  return static_cast<std::size_t>(splits) * a.m * a.n * sizeof(float);
}

namespace {

// The parameters that do not need the driver: pointers, strides, shape, tiling, split-K.
void fill_params(dev::GemmParams& p, const GemmConfig& c, const GemmArgs& a, int splits, bool split_cluster,
                 float* workspace) {
  const std::size_t esize = dtype_size(a.d_dtype);
  p.d = a.d;
  p.ldd = a.ldd;
  p.scale_a = a.scale_a;
  p.scale_b = a.scale_b;
  const std::int64_t kb = ceil_div(a.k, kBlockK);
  if (a.scale_mode == ScaleMode::block || a.scale_mode == ScaleMode::group)
    strides(a.scale_a_layout, a.m, kb, p.sa_rs, p.sa_cs);
  if (a.scale_mode == ScaleMode::block) strides(a.scale_b_layout, ceil_div(a.n, 128), kb, p.sb_rs, p.sb_cs);
  if (a.scale_mode == ScaleMode::group) strides(a.scale_b_layout, a.n, kb, p.sb_rs, p.sb_cs);
  p.bias = a.bias;
  p.M = static_cast<int>(a.m);
  p.N = static_cast<int>(a.n);
  p.K = static_cast<int>(a.k);
  p.tiles_m = static_cast<int>(ceil_div(a.m, c.block_m));
  p.tiles_n = static_cast<int>(ceil_div(a.n, c.block_n));
  p.k_blocks = static_cast<int>(kb);
  p.pair_stores = (a.ldd % 2 == 0 && reinterpret_cast<std::uintptr_t>(a.d) % (2 * esize) == 0) ? 1 : 0;
  p.splits = splits;
  p.kb_per_split = static_cast<int>(ceil_div(kb, splits));
  p.split_cluster = split_cluster ? 1 : 0;
  p.workspace = workspace;
}

}  // namespace

GemmLaunch prepare(const LoadedKernel& k, const GemmArgs& a, int sm_count, int splits, float* workspace,
                   CUstream stream, SplitSum sum) {
  const GemmConfig& c = k.gemm_config;
  const GemmGeometry g = gemm_geometry(problem_of(a), c);
  const std::size_t esize = dtype_size(a.d_dtype);
  GemmLaunch l;
  dev::GemmParams& p = l.params;
  const bool split_cluster = splits_in_cluster(k, a, splits, sum);
  fill_params(p, c, a, splits, split_cluster, workspace);
  // A 2-CTA cluster loads half of the shared operand's tile per CTA (multicast to both).
  encode(&p.tma_a, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a.a, a.m, a.k, a.lda, kBlockK, g.box_rows_a,
         CU_TENSOR_MAP_SWIZZLE_128B);
  encode(&p.tma_b, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, a.b, a.n, a.k, a.ldb, kBlockK, g.box_rows_b,
         CU_TENSOR_MAP_SWIZZLE_128B);
  // NOTE: TMA stores need 16-byte aligned rows; other leading dimensions take direct stores.
  p.tma_store = (splits == 1 || split_cluster) && (a.ldd * esize) % 16 == 0 && reinterpret_cast<std::uintptr_t>(a.d) % 16 == 0;
  if (p.tma_store)
    encode(&p.tma_d, tma_type(a.d_dtype), esize, a.d, a.m, a.n, a.ldd, c.block_n, g.rows_per_wg,
           CU_TENSOR_MAP_SWIZZLE_NONE);
  encode_scale_maps(p, a, c, g);
  // Work units are cluster tiles (DenseTileScheduler::unit_count); a persistent grid of at most as many
  // clusters as can be resident at once.
  const std::int64_t units =
      ceil_div(p.tiles_m, c.cluster_m) * ceil_div(p.tiles_n, c.cluster_n) * std::int64_t{splits};
  if (units > INT_MAX) throw_invalid("m*n", fmt::format("{}x{}", a.m, a.n), "too many output tiles for one launch");
  // Splits summed in clusters: a cluster per tile, all resident (cluster_split_fits).
  const int cluster = split_cluster ? splits : g.cluster;
  const std::int64_t resident = split_cluster ? units / splits : cluster > 1 ? k.max_active_clusters : sm_count;
  l.main.grid[0] = static_cast<unsigned>(std::min<std::int64_t>(units, resident) * cluster);
  l.main.cluster[0] = static_cast<unsigned>(cluster);
  l.main.block[0] = static_cast<unsigned>(k.threads);
  l.main.smem_bytes = static_cast<unsigned>(k.smem_bytes);
  l.main.stream = stream;
  l.reduce.grid[0] = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(a.m * a.n, 256), std::int64_t{sm_count} * 8));
  l.reduce.block[0] = 256;
  l.reduce.stream = stream;
  return l;
}

void launch(const LoadedKernel& k, GemmLaunch& l) {
  void* args[] = {&l.params};
  fp8jit::launch(k.functions[0], l.main, args);
  if (l.params.splits > 1 && !l.params.split_cluster) fp8jit::launch(k.functions[1], l.reduce, args);
}

void launch(const LoadedKernel& k, const GemmArgs& a, int sm_count, int splits, float* workspace, CUstream stream,
            SplitSum sum) {
  GemmLaunch l = prepare(k, a, sm_count, splits, workspace, stream, sum);
  launch(k, l);
}

}  // namespace fp8jit::ops
