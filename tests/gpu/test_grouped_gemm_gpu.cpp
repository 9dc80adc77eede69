// Grouped (mixture-of-experts) GEMMs on the GPU against the float64 reference of the dequantized
// operands, group by group: contiguous and masked layouts x tensor, rowwise and block scaling;
// ragged groups (0, 1 and non-multiples of the tile), rows outside every group left poisoned, a
// CUDA graph replayed after the group table changed on the device, tables out of range clamped
// and reported, and a tuned winner found again by a fresh runtime.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "common/parallel.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/families/gemm_geometry.hpp"
#include "tests/common/expect_error.hpp"
#include "tests/common/gpu_env.hpp"
#include "tests/common/temp_dir.hpp"
#include "tests/gpu/gemm_operands.hpp"

namespace fp8jit::test {
namespace {

// A grouped problem: G groups of N x K weights; contiguous A rows given by offsets, masked by
// counts within m_max rows per group, indexed by a group index per row.
struct Case {
  GemmLayout layout;
  ScaleMode scale;
  DType out;
  std::vector<int> table;  // contiguous: G + 1 offsets; masked: G counts; indexed: m indices
  std::int64_t m;          // contiguous, indexed: rows of A; masked: m_max
  std::int64_t n, k;
  std::int64_t indexed_groups = 0;  // indexed: G
  bool fast = false;                // fast accumulation (tensor and rowwise scaling)
};

std::int64_t groups_of(const Case& c) {
  if (c.layout == GemmLayout::indexed) return c.indexed_groups;
  return static_cast<std::int64_t>(c.table.size()) - (c.layout == GemmLayout::contiguous ? 1 : 0);
}
std::int64_t rows_of(const Case& c) {
  return c.layout == GemmLayout::masked ? groups_of(c) * c.m : c.m;
}

// Rows [first, last) of D that group g owns (the table as given: tests pass valid tables here;
// an indexed group's rows are one run).
std::pair<std::int64_t, std::int64_t> group_range(const Case& c, std::int64_t g) {
  if (c.layout == GemmLayout::contiguous) return {c.table[g], c.table[g + 1]};
  if (c.layout == GemmLayout::indexed) {
    const auto first = std::find(c.table.begin(), c.table.end(), static_cast<int>(g));
    const auto last = std::find_if(first, c.table.end(), [&](int v) { return v != g; });
    return {first - c.table.begin(), last - c.table.begin()};
  }
  return {g * c.m, g * c.m + c.table[g]};
}

// An indexed layout (DeepGEMM's m_indices) of groups with these row counts: each group's rows
// from a multiple of 128 on, padding (-1) up to the next, then `tail` padding rows.
Case indexed_case(ScaleMode scale, DType out, const std::vector<int>& sizes, std::int64_t n,
                  std::int64_t k, int tail) {
  Case c{GemmLayout::indexed, scale, out, {}, 0, n, k, static_cast<std::int64_t>(sizes.size())};
  for (std::size_t g = 0; g < sizes.size(); ++g) {
    c.table.insert(c.table.end(), sizes[g], static_cast<int>(g));
    while (c.table.size() % kGemmIndexedAlignment) c.table.push_back(-1);
  }
  c.table.insert(c.table.end(), tail, -1);
  c.m = static_cast<std::int64_t>(c.table.size());
  return c;
}

struct Grouped {
  std::unique_ptr<DeviceMem> a, b, sa, sb, table, d, status;
  GroupedGemmArgs args;
  std::int64_t sb_per_group = 0;
};

Grouped make_grouped(const Case& c, unsigned seed) {
  Grouped o;
  GroupedGemmArgs& g = o.args;
  g.layout = c.layout;
  g.groups = groups_of(c);
  g.m = c.m;
  g.n = c.n;
  g.k = c.k;
  g.d_dtype = c.out;
  g.scale_mode = c.scale;
  g.fast_accum = c.fast;
  g.scale_a_layout = seed % 2 ? ScaleLayout::col_major_tma : ScaleLayout::row_major;
  g.scale_b_layout = seed % 3 ? ScaleLayout::row_major : ScaleLayout::col_major_tma;
  const std::int64_t rows = rows_of(c);
  g.scale_a_size = scale_count(gemm_scale_granularity_a(c.scale), g.scale_a_layout, rows, c.k);
  o.sb_per_group = scale_count(gemm_scale_granularity_b(c.scale), g.scale_b_layout, c.n, c.k);
  g.scale_b_size = o.sb_per_group * g.groups;
  o.a = std::make_unique<DeviceMem>(rows * c.k);
  o.b = std::make_unique<DeviceMem>(g.groups * c.n * c.k);
  o.sa = std::make_unique<DeviceMem>(4 * g.scale_a_size);
  o.sb = std::make_unique<DeviceMem>(4 * g.scale_b_size);
  quantize_into(rows, c.k, g.a_format, gemm_scale_granularity_a(c.scale), g.scale_a_layout, o.a->get(),
                o.sa->f32(), seed);
  for (std::int64_t e = 0; e < g.groups; ++e)  // each expert's weights with their own scales
    quantize_into(c.n, c.k, g.b_format, gemm_scale_granularity_b(c.scale), g.scale_b_layout,
                  o.b->as<unsigned char>() + e * c.n * c.k, o.sb->f32() + e * o.sb_per_group,
                  seed + 1000 + static_cast<unsigned>(e));
  o.table = std::make_unique<DeviceMem>(4 * c.table.size());
  o.table->upload(c.table.data(), 4 * c.table.size());
  o.d = std::make_unique<DeviceMem>(rows * c.n * dtype_size(c.out));
  o.status = std::make_unique<DeviceMem>(4);
  o.status->poison(0);
  g.a = o.a->get();
  g.b = o.b->get();
  g.scale_a = o.sa->f32();
  g.scale_b = o.sb->f32();
  g.group_rows = o.table->as<int>();
  g.d = o.d->get();
  g.status = o.status->as<int>();
  return o;
}

// Group g's GEMM as a dense one: all of A's rows against B_g, into D.
GemmArgs dense_of_group(const Grouped& o, const Case& c, std::int64_t g) {
  GemmArgs r;
  r.a = o.args.a;
  r.a_format = o.args.a_format;
  r.b = static_cast<const unsigned char*>(o.args.b) + g * c.n * c.k;
  r.b_format = o.args.b_format;
  r.d = o.args.d;
  r.d_dtype = c.out;
  r.m = rows_of(c);
  r.n = c.n;
  r.k = c.k;
  r.scale_mode = c.scale;
  r.scale_a = o.args.scale_a;
  r.scale_a_size = o.args.scale_a_size;
  r.scale_a_layout = o.args.scale_a_layout;
  r.scale_b = o.args.scale_b + g * o.sb_per_group;
  r.scale_b_size = o.sb_per_group;
  r.scale_b_layout = o.args.scale_b_layout;
  return r;
}

// The float64 reference of group g over all of A's rows (A against B_g): rows_of(c) x n doubles
// (D is checked by the reference's argument checks, never written).
std::vector<unsigned char> reference_of_group(const Grouped& o, const Case& c, std::int64_t g) {
  const GemmArgs r = dense_of_group(o, c, g);
  DeviceMem ref(r.m * r.n * 8);
  reference::gemm_on_device(r, ref.as<double>(), nullptr);
  return ref.download();
}

// Fast accumulation is held to 4e-3 whatever D's type, as in the dense tests.
double tolerance(const Case& c) {
  return c.out == DType::fp32 && !c.fast ? 1e-3 : 4e-3;
}

// Runs the grouped GEMM on poisoned D (with `spec`, or the runtime's choice) and checks every
// group against its reference and every row outside the groups for the poison. Returns the worst
// group's relative error.
double run_and_check(const Case& c, Grouped& o, const KernelSpec* spec) {
  o.d->poison(0xFF);
  if (spec)
    default_runtime().grouped_gemm(o.args, *spec, nullptr);
  else
    default_runtime().grouped_gemm(o.args, nullptr);
  EXPECT_EQ(cudaSuccess, cudaDeviceSynchronize());
  const auto dh = o.d->download();
  const std::size_t esize = dtype_size(c.out);
  const std::int64_t rows = rows_of(c), row_bytes = c.n * static_cast<std::int64_t>(esize);
  std::vector<bool> owned(rows, false);
  double worst = 0;
  for (std::int64_t g = 0; g < groups_of(c); ++g) {
    const auto [first, last] = group_range(c, g);
    if (first == last) continue;
    std::fill(owned.begin() + first, owned.begin() + last, true);
    const auto ref = reference_of_group(o, c, g);
    const double err = reference::relative_error(
        dh.data() + first * row_bytes, c.n, c.out,
        reinterpret_cast<const double*>(ref.data()) + first * c.n, last - first, c.n);
    EXPECT_LE(err, tolerance(c)) << "group " << g << " rows [" << first << ", " << last << ")";
    worst = std::max(worst, err);
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    if (owned[r]) continue;
    const bool poisoned = std::all_of(dh.begin() + r * row_bytes, dh.begin() + (r + 1) * row_bytes,
                                      [](unsigned char b) { return b == 0xFF; });
    if (!poisoned) {
      ADD_FAILURE() << "row " << r << " belongs to no group but was written";
      return INFINITY;
    }
  }
  const auto status = o.status->download();
  EXPECT_EQ(status[0] | status[1] | status[2] | status[3], 0)
      << "a valid group table was reported as clamped";
  return worst;
}

void compile_all(const std::vector<KernelSpec>& specs) {
  parallel_for(specs.size(), 16, [&](std::size_t i) {
    try {
      default_runtime().compile(specs[i]);
    } catch (...) {  // the test's own call reports it
    }
  });
}

// Compiles every run's spec at once, then runs and checks each on its case (seeds from `seed`).
void run_specs(const std::vector<std::pair<Case, KernelSpec>>& runs, unsigned seed) {
  std::vector<KernelSpec> specs;
  for (const auto& r : runs) specs.push_back(r.second);
  compile_all(specs);
  for (const auto& [c, spec] : runs) {
    SCOPED_TRACE(spec_name(spec));
    Grouped o = make_grouped(c, seed++);
    run_and_check(c, o, &spec);
  }
}

GemmProblem problem_of(const Case& c) {
  return {Fp8Format::e4m3, Fp8Format::e4m3, c.out, c.scale, false, c.fast, c.layout};
}

// Ragged tables: empty groups, a group of one row, sizes off the tile, rows before the first and
// after the last group (contiguous), groups at 0 and at m_max (masked), padding rows after each
// group and a whole tile of them (indexed).
std::vector<Case> ragged_cases() {
  std::vector<Case> cases;
  for (ScaleMode scale : {ScaleMode::block, ScaleMode::tensor, ScaleMode::rowwise})
    for (DType out : {DType::bf16, DType::fp32}) {
      cases.push_back(
          {GemmLayout::contiguous, scale, out, {5, 5, 6, 136, 200, 457, 457, 520}, 530, 320, 384});
      cases.push_back({GemmLayout::masked, scale, out, {0, 192, 1, 77}, 192, 256, 512});
      cases.push_back(indexed_case(scale, out, {5, 0, 1, 130, 64, 200}, 256, 384, 100));
    }
  return cases;
}

TEST(GroupedGemmGpu, EveryLayoutAndScaleModeOnRaggedGroups) {
  FP8JIT_REQUIRE_GPU();
  const std::vector<Case> cases = ragged_cases();
  std::vector<KernelSpec> specs;
  for (const Case& c : cases) {
    Grouped o = make_grouped(c, 1);
    specs.push_back(default_runtime().select(o.args));
  }
  compile_all(specs);
  unsigned seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << to_string(c.layout) << " " << to_string(c.scale) << " " << to_string(c.out));
    Grouped o = make_grouped(c, seed++);
    run_and_check(c, o, nullptr);
  }
}

// The kernel's paths on grouped tiles: 64-row tiles, column halves written under the next tile
// (128x256 block), slab passes (256x128), pairs along N (multicast A), the deferred epilogue;
// tiles past a group's end take direct stores.
TEST(GroupedGemmGpu, ConfigsOnRaggedGroups) {
  FP8JIT_REQUIRE_GPU();
  const std::vector<GemmConfig> configs = {{64, 128, 5, 8, 1, 1},  {128, 256, 3, 8, 1, 1},
                                           {256, 128, 3, 8, 1, 1}, {128, 128, 4, 8, 1, 2},
                                           {128, 96, 6, 16, 1, 1}, {64, 64, 6, 1, 1, 2}};
  std::vector<std::pair<Case, KernelSpec>> runs;
  for (GemmLayout layout : {GemmLayout::contiguous, GemmLayout::masked, GemmLayout::indexed})
    for (const GemmConfig& cfg : configs) {
      if (layout == GemmLayout::indexed && cfg.block_m > kGemmIndexedAlignment)
        continue;  // not an indexed tile
      Case c = layout == GemmLayout::contiguous ? Case{layout,      ScaleMode::block,
                                                       DType::bf16, {0, 300, 300, 301, 700, 1100},
                                                       1100,        512,
                                                       640}
               : layout == GemmLayout::masked
                   ? Case{layout, ScaleMode::block, DType::bf16, {256, 0, 130, 3}, 256, 384, 640}
                   : indexed_case(ScaleMode::block, DType::bf16, {300, 1, 0, 129, 64}, 384, 640, 0);
      runs.push_back({c, make_gemm_spec(problem_of(c), cfg)});
    }
  run_specs(runs, 50);
}

// Fast accumulation on every layout, per tensor and per row: the runtime's choice, a 64-row tile
// (two sets of sums over alternate K blocks, GemmGeometry::pipelined) and a 128-row one (two
// warpgroups taking turns), over odd and even K-block counts, with ragged groups.
TEST(GroupedGemmGpu, FastAccumulationOnEveryLayout) {
  FP8JIT_REQUIRE_GPU();
  const std::vector<GemmConfig> configs = {{64, 64, 6, 8, 1, 1}, {128, 128, 4, 8, 1, 1}};
  std::vector<std::pair<Case, KernelSpec>> runs;
  std::vector<Case> defaults;
  for (GemmLayout layout : {GemmLayout::contiguous, GemmLayout::masked, GemmLayout::indexed})
    for (ScaleMode scale : {ScaleMode::tensor, ScaleMode::rowwise}) {
      const DType out = scale == ScaleMode::tensor ? DType::bf16 : DType::fp32;
      const std::int64_t k = scale == ScaleMode::tensor ? 640 : 512;
      Case c = layout == GemmLayout::contiguous
                   ? Case{layout, scale, out, {0, 300, 300, 301, 700, 1100}, 1100, 512, k}
               : layout == GemmLayout::masked
                   ? Case{layout, scale, out, {256, 0, 130, 3}, 256, 384, k}
                   : indexed_case(scale, out, {300, 1, 0, 129, 64}, 384, k, 0);
      c.fast = true;
      for (const GemmConfig& cfg : configs) {
        const KernelSpec spec = make_gemm_spec(problem_of(c), cfg);
        ASSERT_EQ(gemm_geometry(problem_of(c), cfg).pipelined, cfg.block_m == 64);
        runs.push_back({c, spec});
      }
      defaults.push_back(c);
    }
  run_specs(runs, 1700);
  unsigned seed = 1750;
  for (const Case& c : defaults) {
    Grouped o = make_grouped(c, seed++);
    SCOPED_TRACE(testing::Message() << to_string(c.layout) << " " << to_string(c.scale) << " "
                                    << spec_name(default_runtime().select(o.args)));
    run_and_check(c, o, nullptr);
  }
}

// 256-row tiles' A scales by TMA come in two boxes of 132 rows 128 apart, from the group's first
// row rounded down to 4 (GemmGeometry::scale_box_a): groups starting at each residue mod 4, tiles
// whose rows past 128 sit in the second box, a group of one tile-row and an empty one; each case
// twice, so that A's scales come column-major (TMA) and row-major (cp.async).
TEST(GroupedGemmGpu, TallTilesReadTheirScalesInTwoBoxes) {
  FP8JIT_REQUIRE_GPU();
  const std::vector<Case> cases = {
      {GemmLayout::contiguous,
       ScaleMode::block,
       DType::bf16,
       {0, 258, 258, 515, 1100, 1101},
       1101,
       384,
       640},
      {GemmLayout::contiguous, ScaleMode::block, DType::fp16, {1, 131, 390, 1003}, 1003, 256, 1152},
      {GemmLayout::masked, ScaleMode::block, DType::bf16, {258, 0, 200, 131}, 258, 384, 640},
  };
  std::vector<std::pair<Case, KernelSpec>> runs;
  for (const Case& c : cases)
    for (int layout = 0; layout < 2; ++layout)
      runs.push_back({c, make_gemm_spec(problem_of(c), {256, 128, 3, 8, 1, 1})});
  run_specs(runs, 60);
}

// 256-row tiles per tensor and per row (their slabs row-major: GemmGeometry::swizzled_slab), bf16
// and FP32 out, on groups starting at each residue mod 4, a one-row group and an empty one.
TEST(GroupedGemmGpu, TallTilesPerTensorAndPerRow) {
  FP8JIT_REQUIRE_GPU();
  std::vector<std::pair<Case, KernelSpec>> runs;
  for (ScaleMode scale : {ScaleMode::tensor, ScaleMode::rowwise})
    for (DType out : {DType::bf16, DType::fp32}) {
      const Case c{GemmLayout::contiguous, scale, out, {0, 258, 258, 515, 1100, 1101}, 1101, 384, 640};
      const GemmConfig cfg{256, out == DType::fp32 ? 64 : 128, 3, 8, 1, 1};
      runs.push_back({c, make_gemm_spec(problem_of(c), cfg)});
    }
  run_specs(runs, 70);
}

// Pairs along M (cluster_m = 2, B's tile shared by multicast) take tile-rows 2i and 2i + 1 of one
// group; a group with an odd number of tile-rows runs its last one as pairs of column tiles that
// share nothing, the second of them past N where the tile count along N is odd. Groups of 0 to 4
// tile-rows at 128 rows (up to 8 at 64), 3 and 5 column tiles, every scale mode.
TEST(GroupedGemmGpu, PairsAlongMOnRaggedGroups) {
  FP8JIT_REQUIRE_GPU();
  const std::vector<GemmConfig> configs = {{128, 192, 4, 16, 2, 1}, {64, 128, 6, 8, 2, 1}};
  std::vector<std::pair<Case, KernelSpec>> runs;
  for (ScaleMode scale : {ScaleMode::block, ScaleMode::tensor, ScaleMode::rowwise})
    for (const GemmConfig& cfg : configs) {
      const Case contiguous{GemmLayout::contiguous,
                            scale,
                            DType::bf16,
                            {3, 303, 303, 304, 560, 1030},
                            1100,
                            576,
                            640};
      const Case masked{
          GemmLayout::masked, scale, DType::bf16, {300, 0, 129, 1, 256}, 512, 576, 640};
      for (const Case& c : {contiguous, masked})
        runs.push_back({c, make_gemm_spec(problem_of(c), cfg)});
    }
  run_specs(runs, 80);
}

// Decode under CUDA graphs: one captured launch serves any routing, because the kernel reads
// masked_m on the device.
TEST(GroupedGemmGpu, CapturedGraphFollowsMaskedRowsChangedOnTheDevice) {
  FP8JIT_REQUIRE_GPU();
  Case c{GemmLayout::masked, ScaleMode::block, DType::bf16, {3, 64, 0, 17}, 128, 256, 512};
  Grouped o = make_grouped(c, 7);
  default_runtime().grouped_gemm(o.args, nullptr);  // compile and route outside the capture
  CUDA_OK(cudaDeviceSynchronize());
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  default_runtime().grouped_gemm(o.args, reinterpret_cast<CUstream>(stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (const std::vector<int>& routing :
       {std::vector<int>{3, 64, 0, 17}, std::vector<int>{128, 0, 1, 100}}) {
    SCOPED_TRACE(testing::Message() << "masked_m " << routing[0] << " " << routing[1] << " "
                                    << routing[2] << " " << routing[3]);
    c.table = routing;
    CUDA_OK(cudaMemcpy(o.table->get(), routing.data(), 4 * routing.size(), cudaMemcpyHostToDevice));
    o.d->poison(0xFF);
    CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    // Check what the replay wrote, with the same checks as a direct call (which rewrites D).
    const auto replayed = o.d->download();
    run_and_check(c, o, nullptr);
    EXPECT_EQ(replayed, o.d->download()) << "the replay and a direct call differ";
  }
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

// Indices out of [-1, G) count as padding, and rows of another group inside a tile are not the
// tile's: neither is written, and both are reported. (The tile's own rows after such a row, up
// to the end of its warpgroup's 64-row slab, are left unwritten too.)
TEST(GroupedGemmGpu, BadRowIndicesArePaddingAndReported) {
  FP8JIT_REQUIRE_GPU();
  Case c = indexed_case(ScaleMode::block, DType::bf16, {100, 100}, 256, 384, 0);
  c.table[110] = 7;  // no such group, among group 0's padding
  c.table[190] = 0;  // group 0 inside group 1's rows: rows 190 and 191 (its slab) stay unwritten
  Grouped o = make_grouped(c, 11);
  o.d->poison(0xFF);
  default_runtime().grouped_gemm(o.args, nullptr);
  CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(o.status->download()[0] & kGemmRowIndicesInvalid, kGemmRowIndicesInvalid)
      << "not reported";
  const auto dh = o.d->download();
  const std::size_t row_bytes = c.n * dtype_size(c.out);
  for (const auto& [g, first, last] : std::vector<std::array<int, 3>>{{0, 0, 100}, {1, 128, 190}}) {
    const auto ref = reference_of_group(o, c, g);
    EXPECT_LE(reference::relative_error(dh.data() + first * row_bytes, c.n, c.out,
                                        reinterpret_cast<const double*>(ref.data()) + first * c.n,
                                        last - first, c.n),
              tolerance(c))
        << "group " << g;
  }
  for (int r : {100, 110, 127, 190, 191, 228, 255})
    EXPECT_TRUE(std::all_of(dh.begin() + r * row_bytes, dh.begin() + (r + 1) * row_bytes,
                            [](unsigned char x) { return x == 0xFF; }))
        << "row " << r << " is padding or another group's, but was written";
}

// Tables out of range are clamped on the device (nothing outside A, D or a group's M_max is read
// or written) and reported in `status`.
TEST(GroupedGemmGpu, TablesOutOfRangeAreClampedAndReported) {
  FP8JIT_REQUIRE_GPU();
  struct Bad {
    Case c;
    int bit;
    std::vector<int> clamped;  // the table the kernel computes with
    // (group, first row, last row) checked against the reference: the contiguous table's
    // descending pair 40 -> 30 leaves group 1 empty and group 2 at [30, 90), overlapping group
    // 0's rows 30..39, which are then checked against neither.
    std::vector<std::array<int, 3>> checked;
  };
  const std::vector<Bad> bads = {
      {{GemmLayout::masked, ScaleMode::block, DType::bf16, {5, 999, -3, 64}, 64, 128, 256},
       kGemmMaskedRowsClamped,
       {5, 64, 0, 64},
       {{0, 0, 5}, {1, 64, 128}, {3, 192, 256}}},
      {{GemmLayout::contiguous,
        ScaleMode::block,
        DType::bf16,
        {-7, 40, 30, 90, 5000},
        200,
        128,
        256},
       kGemmGroupOffsetsClamped,
       {0, 40, 40, 90, 200},
       {{0, 0, 30}, {2, 40, 90}, {3, 90, 200}}},
  };
  unsigned seed = 90;
  for (const Bad& b : bads) {
    SCOPED_TRACE(to_string(b.c.layout));
    Grouped o = make_grouped(b.c, seed++);
    o.d->poison(0xFF);
    default_runtime().grouped_gemm(o.args, nullptr);
    CUDA_OK(cudaDeviceSynchronize());
    const auto status = o.status->download();
    EXPECT_EQ(status[0] & b.bit, b.bit) << "not reported";
    const auto dh = o.d->download();
    const std::size_t row_bytes = b.c.n * dtype_size(b.c.out);
    for (const auto& [g, first, last] : b.checked) {
      const auto ref = reference_of_group(o, b.c, g);
      EXPECT_LE(
          reference::relative_error(dh.data() + first * row_bytes, b.c.n, b.c.out,
                                    reinterpret_cast<const double*>(ref.data()) + first * b.c.n,
                                    last - first, b.c.n),
          tolerance(b.c))
          << "group " << g;
    }
    // Masked: rows past a clamped group's m_max belong to the next group and hold its values;
    // group 2 (masked_m -3 -> 0) wrote nothing.
    if (b.c.layout == GemmLayout::masked)
      for (std::int64_t r = 128; r < 192; ++r)
        EXPECT_TRUE(std::all_of(dh.begin() + r * row_bytes, dh.begin() + (r + 1) * row_bytes,
                                [](unsigned char x) { return x == 0xFF; }))
            << "row " << r << " of an empty group was written";
  }
}

// A runtime of its own for a tuning test: its kernel cache and database in `dir`.
RuntimeOptions tuning_options(const TempDir& dir) {
  RuntimeOptions options;
  options.cache_dir = dir.path() + "/cache";
  options.db_path = dir.path() + "/tuning.sqlite";
  return options;
}

// Tuning a grouped shape stores its winner under the layout, the group count and the expected M:
// a fresh runtime on the same database picks it, also for a nearby expected M (the nearest tuned
// row) where the winner's tiles are as tall as the heuristic's there (autotune/lookup.cpp,
// stands_in), and the heuristic's choice where they are not; the winner computes the right
// result. Which candidate wins is the GPU's timing: expected M 40 takes 128-row tiles and 16
// 64-row ones, so either height of winner meets one nearby M it stands in for.
TEST(GroupedGemmGpu, TunedWinnerIsFoundByAFreshRuntimeAndTheNearestExpectedM) {
  FP8JIT_REQUIRE_GPU();
  const TempDir dir("fp8jit-grouped-tune");
  const RuntimeOptions options = tuning_options(dir);
  Case c{GemmLayout::masked, ScaleMode::block, DType::bf16, {40, 7, 64, 0}, 128, 512, 1024};
  Grouped o = make_grouped(c, 11);
  o.args.expected_m = 32;
  KernelSpec winner;
  {
    Runtime rt(options);
    TuneOptions t;
    t.top_k = 3;
    const TuneResult r = rt.tune(o.args, t);
    ASSERT_TRUE(r.best.has_value()) << "no candidate passed";
    winner = r.candidates[*r.best].spec;
  }
  Runtime fresh(options);
  EXPECT_EQ(spec_name(fresh.select(o.args)), spec_name(winner));
  RuntimeOptions untuned = options;
  untuned.db_path = dir.path() + "/untuned.sqlite";  // never created: lookups without a database
  Runtime heuristic(untuned);
  int stood_in = 0;
  for (const std::int64_t expected : {40, 16}) {
    GroupedGemmArgs nearby = o.args;
    nearby.expected_m = expected;
    const KernelSpec fallback = heuristic.select(nearby);
    const GemmConfig w = gemm_config_of(winner), h = gemm_config_of(fallback);
    const bool as_tall = w.block_m == h.block_m && w.swap_ab == h.swap_ab;
    stood_in += as_tall;
    EXPECT_EQ(spec_name(fresh.select(nearby)), spec_name(as_tall ? winner : fallback))
        << "expected M " << expected << ", heuristic " << spec_name(fallback);
  }
  EXPECT_GE(stood_in, 1) << "no nearby M where " << spec_name(winner) << " stands in";
  run_and_check(c, o, &winner);
}

// Tuning on more group tables (TuneOptions::more_group_rows): each candidate's time is the
// geometric mean of its medians on the arguments' table and on the others, so a second table
// with no rows in any group (the kernel then exits at once) brings every candidate's time below
// its time on the first table alone; the winner still computes the first table's result. A null
// table, or tables for a dense gemm, are refused before anything runs.
TEST(GroupedGemmGpu, TuningOnMoreTablesTimesEveryCandidateOnEach) {
  FP8JIT_REQUIRE_GPU();
  const TempDir dir("fp8jit-grouped-tables");
  Runtime rt(tuning_options(dir));
  Case c{GemmLayout::masked, ScaleMode::block, DType::bf16, {120, 7, 128, 64}, 128, 2048, 4096};
  Grouped o = make_grouped(c, 12);
  o.args.expected_m = 80;
  const std::vector<int> none(c.table.size(), 0);
  DeviceMem empty(4 * none.size());
  empty.upload(none.data(), 4 * none.size());
  TuneOptions alone;
  alone.top_k = 3;
  alone.finalists = 0;
  TuneOptions both = alone;
  both.more_group_rows = {empty.as<int>()};
  const TuneResult r1 = rt.tune(o.args, alone);
  const TuneResult r2 = rt.tune(o.args, both);
  ASSERT_EQ(r1.candidates.size(), r2.candidates.size());
  int compared = 0;
  for (std::size_t i = 0; i < r1.candidates.size(); ++i) {
    const CandidateResult &a = r1.candidates[i], &b = r2.candidates[i];
    ASSERT_EQ(spec_name(a.spec), spec_name(b.spec));
    if (a.status != CandidateStatus::passed || b.status != CandidateStatus::passed) continue;
    ++compared;
    EXPECT_LT(b.timing.median_us, 0.9 * a.timing.median_us) << spec_name(a.spec);
    EXPECT_GT(b.timing.median_us, 0);
  }
  EXPECT_GE(compared, 1) << "no candidate passed both sweeps";
  ASSERT_TRUE(r2.best.has_value());
  run_and_check(c, o, &r2.candidates[*r2.best].spec);

  TuneOptions null_table = alone;
  null_table.more_group_rows = {nullptr};
  EXPECT_NE(invalid_message([&] { rt.tune(o.args, null_table); }).find("more_group_rows[0]"),
            std::string::npos);
  const GemmArgs dense = dense_of_group(o, c, 0);  // valid: refused for the tables alone
  EXPECT_NE(invalid_message([&] { rt.tune(dense, both); }).find("more_group_rows"),
            std::string::npos);
}

}  // namespace
}  // namespace fp8jit::test
