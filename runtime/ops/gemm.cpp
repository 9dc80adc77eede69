#include "runtime/ops/gemm.hpp"

#include <fmt/format.h>

#include <climits>

#include "fp8jit/error.hpp"
#include "fp8jit/gemm/params.cuh"
#include "generator/families/gemm_geometry.hpp"
#include "runtime/ops/dims.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/gemm_common.hpp"

namespace fp8jit::ops {
namespace {

// Block scaling's 128x128 scales [blocks][K blocks] (strides rs, cs in floats) by TMA with the
// stage, into `map` (GemmParams::sb_map), so that the kernel's producer issues nothing but TMA
// loads. A box's first element must sit on 16 bytes (TMA faults with an illegal instruction
// otherwise), so a box starts at the 4-aligned K block (or block) at or before the one needed,
// which the kernel then reads at its offset in the box. Either layout: K blocks inner
// (row-major: box 4 K blocks x `two_blocks` ? 2 : 1 blocks, a second block's scales 4 floats on)
// or blocks inner (column-major: box 8 or 4 blocks x 1 K block). Where TMA cannot read them (a
// row of K blocks not 16-byte aligned: K not a multiple of 512 in row-major scales) sb_map stays
// 0 and the producer loads them itself.
void encode_block_scale_map(dev::GemmParams& p, dev::TensorMap* map, const float* base,
                            std::int64_t blocks, long long rs, long long cs, bool two_blocks) {
  const bool k_inner = cs == 1;
  const long long ld = k_inner ? rs : cs;
  if (!aligned16(base) || (ld * 4) % 16 != 0) return;
  const int box_cols = k_inner ? 4 : two_blocks ? 8 : 4;
  const int box_rows = k_inner && two_blocks ? 2 : 1;
  const CUresult r =
      k_inner ? try_encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, base, blocks, p.k_blocks, ld,
                           box_cols, box_rows, CU_TENSOR_MAP_SWIZZLE_NONE)
              : try_encode(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, base, p.k_blocks, blocks, ld,
                           box_cols, box_rows, CU_TENSOR_MAP_SWIZZLE_NONE);
  if (r != CUDA_SUCCESS) return;
  p.sb_map = k_inner ? dev::kScaleMapKInner : dev::kScaleMapBlockInner;
  p.sb_hi = k_inner ? 4 : 1;
  p.scale_tx += 4 * box_cols * box_rows;
}

// The kernel's column-major 1x128 scales of B, one per column (group scaling; swapped block
// scaling: the problem's A's), by TMA with the stage (p.tma_sb, box block_n x 1): false where
// the driver declines the map, leaving the cp.async path.
bool encode_column_scale_map(dev::GemmParams& p, const float* scale, std::int64_t cols,
                             int block_n) {
  return try_encode(&p.tma_sb, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, scale, p.k_blocks, cols, p.sb_cs,
                    block_n, 1, CU_TENSOR_MAP_SWIZZLE_NONE) == CUDA_SUCCESS;
}

// Tensor maps for the scales of block and group scaling where TMA can read them (see
// GemmParams): A's when column-major, and group scaling's B when column-major too (both or
// neither: p.scale_tma covers the two). Otherwise the kernel copies every scale with cp.async.
void encode_scale_maps(dev::GemmParams& p, const GemmArgs& a, const GemmConfig& c, const GemmGeometry& g) {
  const bool block = a.scale_mode == ScaleMode::block;
  if (!block && a.scale_mode != ScaleMode::group) return;
  if (!block && (a.scale_b_layout != ScaleLayout::col_major_tma || !aligned16(a.scale_b))) return;
  if (!encode_scale_map_a(p, g, a.scale_a_layout, a.scale_a, a.m, g.scale_box_a)) return;
  if (block)
    encode_block_scale_map(p, &p.tma_sb, a.scale_b, ceil_div(a.n, 128), p.sb_rs, p.sb_cs, true);
  if (!block && !encode_column_scale_map(p, a.scale_b, a.n, c.block_n)) {
    p.scale_tma = 0;  // a map the driver declines: the cp.async path
    p.scale_tx = 0;
  }
}

}  // namespace

GemmArgs normalize(const GemmArgs& in) {
  GemmArgs a = in;
  check_max_sms(a.max_sms);
  check_gemm_dims(a.m, a.n, a.k);
  check_operands({a.a, a.b, a.d, a.scale_a, a.scale_b, a.a_format, a.b_format, a.d_dtype, a.scale_mode, a.fast_accum},
                 a.lda, a.ldb, a.k);
  if (a.bias) require_aligned(a.bias, dtype_size(a.d_dtype), "bias", "element size");
  a.ldd = leading(a.ldd, a.n, "ldd");
  const std::int64_t need_a = scale_floats_a(a.scale_mode, a.scale_a_layout, a.m, a.k);
  const std::int64_t need_b = scale_floats_b(a.scale_mode, a.scale_b_layout, a.n, a.k);
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
  if (gemm_problem_of(spec) != problem_of(a))
    throw_invalid("spec", spec_name(spec),
                  "does not match the arguments' formats, output, scale mode, bias, accumulation or layout");
}

namespace {

// Every tile's `splits` CTAs fit on the GPU at once as one cluster each (a single wave: one work
// unit per CTA, which the in-cluster sum needs), and within the SM budget.
bool cluster_split_fits(const LoadedKernel& k, const GemmArgs& a, int splits, int sm_count) {
  const std::int64_t tiles = gemm_tile_count(k.gemm_config, a.m, a.n);
  return splits >= 2 && splits < static_cast<int>(k.split_clusters.size()) && gemm_sums_splits_in_smem(k.gemm_config) &&
         tiles <= k.split_clusters[splits] && tiles * splits <= sm_count;
}

}  // namespace

KernelLoadHook gemm_load_hook() {
  return {"gemm", [](LoadedKernel& k) {
            k.gemm_config = gemm_config_of(k.spec);
            const std::vector<std::string> entries = spec_entry_points(k.spec);
            for (std::size_t i = 0; i < entries.size(); ++i)
              if (entries[i] == kGemmScaleColumnsEntry) k.scale_columns = k.functions[i];
            // Grouped kernels and those built for TMA epilogues never split K.
            if (gemm_problem_of(k.spec).layout != GemmLayout::dense ||
                k.gemm_config.epilogue == GemmEpilogue::tma)
              return;
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

bool splits_in_cluster(const LoadedKernel& k, const GemmArgs& a, int splits, SplitSum sum, int sm_count) {
  return sum == SplitSum::cluster && cluster_split_fits(k, a, splits, sm_count);
}

// The heuristic's split count; where its ranges cannot be summed inside clusters, the largest
// smaller count that can (no workspace, no second kernel: worth more than the extra ranges on
// decode-sized shapes: 128x4096x7168 28.7 -> 23.7 µs, G17), else the heuristic's count through
// the workspace.
// Swapped operands write D transposed from registers, which the workspace's reduction does not:
// their K is one range wherever the ranges cannot be summed in clusters.
int split_count(const LoadedKernel& k, const GemmArgs& a, int sm_count, SplitSum sum) {
  const int splits = gemm_split_k(a.m, a.n, a.k, k.gemm_config, sm_count);
  const bool swapped = k.gemm_config.swap_ab != 0;
  if (splits <= 1 || (sum != SplitSum::cluster && !swapped)) return splits;
  if (sum == SplitSum::cluster)
    for (int s = std::min(splits, static_cast<int>(k.split_clusters.size()) - 1); s >= 2; --s)
      if (cluster_split_fits(k, a, s, sm_count)) return s;
  return swapped ? 1 : splits;
}

std::size_t workspace_bytes(const LoadedKernel& k, const GemmArgs& a, int splits, SplitSum sum, int sm_count) {
  if (splits <= 1 || splits_in_cluster(k, a, splits, sum, sm_count)) return 0;
  return static_cast<std::size_t>(splits) * a.m * a.n * sizeof(float);
}

namespace {

// The problem the kernel of a swap_ab config computes, D^T = B A^T: A and B, their formats,
// scales and shapes exchanged; D as it is (the kernel stores its element (i, j) at D[j][i]).
GemmArgs swapped_operands(const GemmArgs& a) {
  GemmArgs s = a;
  std::swap(s.a, s.b);
  std::swap(s.a_format, s.b_format);
  std::swap(s.lda, s.ldb);
  std::swap(s.m, s.n);
  std::swap(s.scale_a, s.scale_b);
  std::swap(s.scale_a_size, s.scale_b_size);
  std::swap(s.scale_a_layout, s.scale_b_layout);
  return s;
}

// Block scaling's strides with swapped operands (dev::kSwappedBlockScale): the kernel's A scales
// are the problem's B's 128x128 blocks, its B scales the problem's A's 1x128 groups. `a` is the
// problem as the caller gave it.
void swapped_block_scales(dev::GemmParams& p, const GemmArgs& a, const GemmConfig& c) {
  scale_strides(a.scale_b_layout, ceil_div(a.n, 128), p.k_blocks, p.sa_rs, p.sa_cs);
  scale_strides(a.scale_a_layout, a.m, p.k_blocks, p.sb_rs, p.sb_cs);
  p.scale_tma = 0;
  p.scale_tx = 0;
  if (a.scale_a_layout != ScaleLayout::col_major_tma || !aligned16(a.scale_a)) return;
  if (!encode_column_scale_map(p, a.scale_a, a.m, c.block_n)) return;
  p.scale_tma = 1;
  p.scale_tx = 4 * c.block_n;
  encode_block_scale_map(p, &p.tma_sa, a.scale_b, ceil_div(a.n, 128), p.sa_rs, p.sa_cs, false);
}

// The parameters that do not need the driver: pointers, strides, shape, tiling, split-K.
void fill_params(dev::GemmParams& p, const GemmConfig& c, const GemmArgs& a, int splits, bool split_cluster,
                 float* workspace) {
  fill_shape_params(p, c, a, a.m);
  p.bias = a.bias;
  p.splits = splits;
  p.kb_per_split = static_cast<int>(ceil_div(p.k_blocks, splits));
  p.split_cluster = split_cluster ? 1 : 0;
  p.workspace = workspace;
  p.schedule =
      dev::make_dense_schedule(p.tiles_m, p.tiles_n, splits, c.group_m, c.cluster_m, c.cluster_n);
}

}  // namespace

GemmLaunch prepare(const LoadedKernel& k, const GemmArgs& given, int sm_count, int splits,
                   float* workspace, CUstream stream, SplitSum sum, bool pdl) {
  const GemmConfig& c = k.gemm_config;
  const GemmGeometry g = gemm_geometry(problem_of(given), c);
  GemmLaunch l;
  dev::GemmParams& p = l.params;
  const bool split_cluster = splits_in_cluster(k, given, splits, sum, sm_count);
  if (c.swap_ab && splits > 1 && !split_cluster)  // the kernel would trap
    throw Error(ErrorKind::internal,
                fmt::format("{}: swapped operands with {} K ranges summed through the "
                            "workspace",
                            spec_name(k.spec), splits));
  const GemmArgs a = c.swap_ab ? swapped_operands(given) : given;
  fill_params(p, c, a, splits, split_cluster, workspace);
  encode_operand_maps(p, g, a.a, a.m, a.lda, a.b, a.n, a.ldb, a.k);
  encode_store_map(p, g, c, a.d, a.d_dtype, a.m, a.n, a.ldd,
                   !c.swap_ab && (splits == 1 || split_cluster));
  // The kernel would trap (Sm90GemmTraits::tma_store); the runtime picks its any build instead.
  if (c.epilogue == GemmEpilogue::tma && (splits != 1 || !p.tma_store))
    throw Error(ErrorKind::internal,
                fmt::format("{}: a kernel built for TMA epilogues launched with {} K ranges and a "
                            "D that {} TMA stores",
                            spec_name(k.spec), splits, p.tma_store ? "takes" : "does not take"));
  if (c.swap_ab && a.scale_mode == ScaleMode::block)
    swapped_block_scales(p, given, c);
  else
    encode_scale_maps(p, a, c, g);
  // Work units are cluster tiles (DenseTileScheduler::unit_count); a persistent grid of at most as many
  // clusters as can be resident at once.
  const std::int64_t units =
      ceil_div(p.tiles_m, c.cluster_m) * ceil_div(p.tiles_n, c.cluster_n) * std::int64_t{splits};
  if (units > INT_MAX) throw_invalid("m*n", fmt::format("{}x{}", a.m, a.n), "too many output tiles for one launch");
  // Splits summed in clusters: a cluster per tile, all resident (cluster_split_fits).
  const int cluster = split_cluster ? splits : g.cluster;
  const std::int64_t resident = split_cluster ? units / splits : resident_units(k.max_active_clusters, cluster, sm_count);
  l.main.grid[0] = static_cast<unsigned>(std::min<std::int64_t>(units, resident) * cluster);
  l.main.cluster[0] = static_cast<unsigned>(cluster);
  l.main.block[0] = static_cast<unsigned>(k.threads);
  l.main.smem_bytes = static_cast<unsigned>(k.smem_bytes);
  l.main.stream = stream;
  l.main.pdl = l.reduce.pdl = pdl;
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
            SplitSum sum, bool pdl) {
  GemmLaunch l = prepare(k, a, sm_count, splits, workspace, stream, sum, pdl);
  launch(k, l);
}

}  // namespace fp8jit::ops
