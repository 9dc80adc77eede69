#include "runtime/ops/grouped_gemm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <string>

#include "fp8jit/error.hpp"
#include "generator/families/gemm_geometry.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/dims.hpp"
#include "runtime/ops/gemm_common.hpp"

namespace fp8jit::ops {

static_assert(int{kGemmGroupOffsetsClamped} == int{dev::kGroupOffsetsClamped} &&
                  int{kGemmMaskedRowsClamped} == int{dev::kMaskedRowsClamped} &&
                  int{kGemmRowIndicesInvalid} == int{dev::kRowIndicesInvalid},
              "host and device status bits agree");
static_assert(kGemmIndexedAlignment == dev::kGemmIndexedAlignment, "host and device agree on the alignment");

void check_group_shape(const GroupedGemmArgs& a) {
  if (a.layout == GemmLayout::dense)
    throw_invalid("layout", "dense", "grouped GEMMs take contiguous, masked or indexed; a dense GEMM is gemm()");
  if (a.layout != GemmLayout::contiguous && a.layout != GemmLayout::masked && a.layout != GemmLayout::indexed)
    throw_invalid("layout", std::to_string(static_cast<int>(a.layout)), "not a GemmLayout: contiguous, masked or indexed");
  if (a.groups < 1 || a.groups > kMaxDim)
    throw_invalid("groups", std::to_string(a.groups), "must be in [1, 2^31-1]");
  // The kernels address B's rows, and masked A's and D's, as int.
  if (a.groups * a.n > kMaxDim)
    throw_invalid("groups*n", fmt::format("{}x{}", a.groups, a.n), "B [groups * n, k] must have fewer than 2^31 rows");
  if (a.layout == GemmLayout::masked && a.groups * a.m > kMaxDim)
    throw_invalid("groups*m", fmt::format("{}x{}", a.groups, a.m),
                  "masked A [groups * m, k] must have fewer than 2^31 rows");
}

namespace {

// Floats of B's scales per group (one GemmArgs-sized set each).
std::int64_t scales_b_per_group(const GroupedGemmArgs& a) {
  return scale_floats_b(a.scale_mode, a.scale_b_layout, a.n, a.k);
}

void check_groups(const GroupedGemmArgs& a) {
  check_group_shape(a);
  require_ptr(a.group_rows, a.layout == GemmLayout::contiguous ? "group_rows (offsets)"
                            : a.layout == GemmLayout::masked   ? "group_rows (masked_m)"
                                                               : "group_rows (m_indices)");
  require_aligned(a.group_rows, 4, "group_rows", "int32");
  if (a.status) require_aligned(a.status, 4, "status", "int32");
  const std::int64_t max_expected = a.m;
  if (a.expected_m < 0 || a.expected_m > max_expected)
    throw_invalid("expected_m", std::to_string(a.expected_m),
                  fmt::format("must be in [0, {}] (0: the default)", max_expected));
}

}  // namespace

std::int64_t total_rows(const GroupedGemmArgs& a) { return a.layout == GemmLayout::masked ? a.groups * a.m : a.m; }

GroupedGemmArgs normalize(const GroupedGemmArgs& in) {
  GroupedGemmArgs a = in;
  check_max_sms(a.max_sms);
  check_gemm_dims(a.m, a.n, a.k);
  check_groups(a);
  if (a.scale_mode == ScaleMode::group)
    throw_invalid("scale_mode", "group", "grouped GEMMs take tensor, rowwise or block scaling");
  check_operands({a.a, a.b, a.d, a.scale_a, a.scale_b, a.a_format, a.b_format, a.d_dtype, a.scale_mode, a.fast_accum},
                 a.lda, a.ldb, a.k);
  a.ldd = leading(a.ldd, a.n, "ldd");
  const std::int64_t need_a = scale_floats_a(a.scale_mode, a.scale_a_layout, total_rows(a), a.k);
  const std::int64_t need_b = scales_b_per_group(a) * a.groups;
  if (a.scale_a_size < need_a)
    throw_invalid("scale_a_size", std::to_string(a.scale_a_size),
                  fmt::format("{} scaling of A [{}x{}] needs {} floats", to_string(a.scale_mode), total_rows(a), a.k,
                              need_a));
  if (a.scale_b_size < need_b)
    throw_invalid("scale_b_size", std::to_string(a.scale_b_size),
                  fmt::format("{} scaling of {} B [{}x{}] needs {} floats", to_string(a.scale_mode), a.groups, a.n,
                              a.k, need_b));
  if (a.expected_m == 0)
    a.expected_m = a.layout == GemmLayout::masked ? a.m : std::max<std::int64_t>(1, a.m / a.groups);
  return a;
}

GemmProblem problem_of(const GroupedGemmArgs& a) {
  return {a.a_format, a.b_format, a.d_dtype, a.scale_mode, false, a.fast_accum, a.layout};
}

void check_matches(const KernelSpec& spec, const GroupedGemmArgs& a) {
  if (gemm_problem_of(spec) != problem_of(a))
    throw_invalid("spec", spec_name(spec),
                  "does not match the arguments' formats, output, scale mode, accumulation or layout");
}

namespace {

void fill_params(dev::GemmParams& p, const GemmConfig& c, const GroupedGemmArgs& a) {
  fill_shape_params(p, c, a, total_rows(a));
  p.sb_gs = scales_b_per_group(a);
  p.splits = 1;
  p.kb_per_split = p.k_blocks;
  p.groups = static_cast<int>(a.groups);
  p.group_m_max = a.layout == GemmLayout::masked ? static_cast<int>(a.m) : 0;
  p.group_rows = a.group_rows;
  p.status = a.status;
}

}  // namespace

GemmLaunch prepare(const LoadedKernel& k, const GroupedGemmArgs& a, int sm_count, CUstream stream, bool pdl) {
  const GemmConfig& c = k.gemm_config;
  const GemmGeometry g = gemm_geometry(problem_of(a), c);
  GemmLaunch l;
  dev::GemmParams& p = l.params;
  fill_params(p, c, a);
  const std::int64_t rows = total_rows(a);
  encode_operand_maps(p, g, a.a, rows, a.lda, a.b, a.groups * a.n, a.ldb, a.k);
  encode_store_map(p, g, c, a.d, a.d_dtype, rows, a.n, a.ldd, true);
  // A's block scales by TMA where their layout allows (B's two per tile the producer loads). A
  // group's tiles start on any row, and a TMA box's first element must sit on 16 bytes: the
  // scales start 0-3 rows early and cover 4 rows more (GemmGeometry::scales_a), in two boxes
  // for 256-row tiles (GemmGeometry::scale_box_a).
  if (a.scale_mode == ScaleMode::block && g.scales_a > c.block_m)
    encode_scale_map_a(p, g, a.scale_a_layout, a.scale_a, rows, g.scale_box_a);
  // The units depend on the group table on the device: the grid is the resident maximum, capped
  // by the most units any table can give (every group's rows start a new tile-row).
  // (Indexed layouts: the tile grid over all rows, padding tiles skipped.)
  const std::int64_t tile_rows = a.layout == GemmLayout::masked    ? a.groups * ceil_div(a.m, c.block_m)
                                 : a.layout == GemmLayout::indexed ? ceil_div(a.m, c.block_m)
                                                                   : ceil_div(a.m, c.block_m) + a.groups;
  // Pairs along M take two tile-rows of a group (a group's odd last one by two column tiles):
  // at most (its tile-rows + 1) / 2 units per group's column.
  const std::int64_t units = c.cluster_m == 2 ? ceil_div(tile_rows + a.groups, 2) * p.tiles_n
                                              : tile_rows * ceil_div(p.tiles_n, c.cluster_n);
  if (units > INT_MAX)
    throw_invalid("groups/m/n", fmt::format("{}/{}/{}", a.groups, a.m, a.n), "too many output tiles for one launch");
  const std::int64_t resident = resident_units(k.max_active_clusters, g.cluster, sm_count);
  l.main.grid[0] = static_cast<unsigned>(std::max<std::int64_t>(1, std::min(units, resident)) * g.cluster);
  l.main.cluster[0] = static_cast<unsigned>(g.cluster);
  l.main.block[0] = static_cast<unsigned>(k.threads);
  l.main.smem_bytes = static_cast<unsigned>(k.smem_bytes);
  l.main.stream = stream;
  l.main.pdl = pdl;
  return l;
}

void launch(const LoadedKernel& k, const GroupedGemmArgs& a, int sm_count, CUstream stream, bool pdl) {
  GemmLaunch l = prepare(k, a, sm_count, stream, pdl);
  void* args[] = {&l.params};
  fp8jit::launch(k.functions[0], l.main, args);
}

}  // namespace fp8jit::ops
