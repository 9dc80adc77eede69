// Row-major 1x128 scales of A: the runtime copies them column-major (fp8jit_gemm_scale_columns)
// before the GEMM, so a call with row-major scales must give the bytes of the same call with the
// same scales column-major, leave the caller's scales as they were, and replay correctly from a
// CUDA graph after the scales changed in place.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "tests/common/gpu_env.hpp"
#include "tests/gpu/gemm_operands.hpp"

namespace fp8jit::test {
namespace {

std::int64_t k_blocks(std::int64_t k) {
  return (k + 127) / 128;
}

// Row-major [rows][kb] scales as col_major_tma ([kb][rows padded to 4]); padding poisoned, as
// nothing may read it.
std::vector<float> to_columns(const std::vector<float>& row_major, std::int64_t rows,
                              std::int64_t kb) {
  const std::int64_t ld = (rows + 3) / 4 * 4;
  std::vector<float> out(static_cast<std::size_t>(kb * ld),
                         std::numeric_limits<float>::quiet_NaN());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < kb; ++c) out[c * ld + r] = row_major[r * kb + c];
  return out;
}

std::vector<float> download_floats(const DeviceMem& m) {
  const auto bytes = m.download();
  std::vector<float> f(bytes.size() / 4);
  std::memcpy(f.data(), bytes.data(), bytes.size());
  return f;
}

// A's row-major scales and their column-major copy, both on the device.
struct BothLayouts {
  std::unique_ptr<DeviceMem> a, rows, columns;
  std::vector<float> rows_host;
};

BothLayouts quantize_a(std::int64_t rows, std::int64_t k, unsigned seed) {
  BothLayouts s;
  s.a = std::make_unique<DeviceMem>(rows * k);
  const std::int64_t n_rows = scale_count(Granularity::group128, ScaleLayout::row_major, rows, k);
  s.rows = std::make_unique<DeviceMem>(4 * n_rows);
  quantize_into(rows, k, Fp8Format::e4m3, Granularity::group128, ScaleLayout::row_major, s.a->get(),
                s.rows->f32(), seed);
  s.rows_host = download_floats(*s.rows);
  const std::vector<float> cols = to_columns(s.rows_host, rows, k_blocks(k));
  s.columns = std::make_unique<DeviceMem>(4 * cols.size());
  s.columns->upload(cols.data(), 4 * cols.size());
  return s;
}

struct DenseCase {
  std::int64_t m, n, k;
  ScaleMode scale;
};

// D of a dense GEMM (poisoned first) with A's scales as given.
std::vector<unsigned char> dense_d(GemmArgs g, const float* scale_a, ScaleLayout layout) {
  g.scale_a = scale_a;
  g.scale_a_layout = layout;
  g.scale_a_size = scale_count(Granularity::group128, layout, g.m, g.k);
  DeviceMem d(g.m * g.n * 2);
  d.poison(0xFF);
  g.d = d.get();
  default_runtime().gemm(g, nullptr);
  return d.download();
}

// Decode rows, swapped operands (M <= 16), rows not a multiple of 4, a partial last K block, a
// tall 256-row tile, split-K, group scaling: each the same bytes either way, against the
// reference too, and the caller's row-major scales untouched. The copy runs first from 512 rows
// or 48 K blocks above 16 rows (scale_columns.cpp); the swapped cases (8 and 5 rows) and the last
// two read the scales row by row in the producer.
TEST(ScaleColumnsGpu, RowMajorScalesGiveTheColumnMajorResult) {
  FP8JIT_REQUIRE_GPU();
  const std::vector<DenseCase> cases = {
      {64, 2112, 7168, ScaleMode::block},  {8, 4096, 6144, ScaleMode::block},
      {1001, 768, 1536, ScaleMode::block}, {601, 512, 640, ScaleMode::block},
      {4096, 1024, 512, ScaleMode::block}, {64, 7168, 16384, ScaleMode::block},
      {513, 640, 1152, ScaleMode::group},  {5, 384, 6272, ScaleMode::group},
      {300, 512, 640, ScaleMode::block},   {130, 640, 1152, ScaleMode::group},
  };
  unsigned seed = 3;
  for (const DenseCase& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << c.m << "x" << c.n << "x" << c.k << " " << to_string(c.scale));
    BothLayouts sa = quantize_a(c.m, c.k, seed++);
    const Granularity gb = gemm_scale_granularity_b(c.scale);
    DeviceMem b(c.n * c.k), sb(4 * scale_count(gb, ScaleLayout::row_major, c.n, c.k));
    quantize_into(c.n, c.k, Fp8Format::e4m3, gb, ScaleLayout::row_major, b.get(), sb.f32(), seed++);
    GemmArgs g;
    g.m = c.m, g.n = c.n, g.k = c.k;
    g.scale_mode = c.scale;
    g.d_dtype = DType::bf16;
    g.a = sa.a->get();
    g.b = b.get();
    g.scale_b = sb.f32();
    g.scale_b_size = scale_count(gb, ScaleLayout::row_major, c.n, c.k);
    const auto by_rows = dense_d(g, sa.rows->f32(), ScaleLayout::row_major);
    const auto by_columns = dense_d(g, sa.columns->f32(), ScaleLayout::col_major_tma);
    EXPECT_EQ(by_rows, by_columns) << "row-major scales changed the result";
    EXPECT_EQ(download_floats(*sa.rows), sa.rows_host) << "the caller's scales were written";
    // Against the float64 reference of the dequantized operands (the column-major run is the
    // path every other test checks; this guards against both being wrong alike).
    g.scale_a = sa.rows->f32();
    g.scale_a_layout = ScaleLayout::row_major;
    g.scale_a_size = scale_count(Granularity::group128, ScaleLayout::row_major, c.m, c.k);
    DeviceMem ref(c.m * c.n * 8), unused_d(c.m * c.n * 2);
    g.d = unused_d.get();  // the reference checks the arguments as the GEMM would
    reference::gemm_on_device(g, ref.as<double>(), nullptr);
    const auto rb = ref.download();
    EXPECT_LE(reference::relative_error(by_rows.data(), c.n, DType::bf16,
                                        reinterpret_cast<const double*>(rb.data()), c.m, c.n),
              4e-3);
  }
}

// Masked and contiguous grouped launches with row-major A scales over all groups' rows.
TEST(ScaleColumnsGpu, GroupedLayoutsTakeRowMajorScales) {
  FP8JIT_REQUIRE_GPU();
  struct Grouped {
    GemmLayout layout;
    std::vector<int> table;
    std::int64_t m, n, k;
  };
  const std::vector<Grouped> cases = {
      {GemmLayout::masked, {37, 0, 128, 5}, 128, 512, 1024},
      {GemmLayout::contiguous, {0, 3, 259, 259, 600}, 600, 384, 1536},
  };
  unsigned seed = 40;
  for (const Grouped& c : cases) {
    SCOPED_TRACE(to_string(c.layout));
    const std::int64_t groups =
        static_cast<std::int64_t>(c.table.size()) - (c.layout == GemmLayout::contiguous);
    const std::int64_t rows = c.layout == GemmLayout::masked ? groups * c.m : c.m;
    BothLayouts sa = quantize_a(rows, c.k, seed++);
    const std::int64_t sb_group =
        scale_count(Granularity::block128, ScaleLayout::row_major, c.n, c.k);
    DeviceMem b(groups * c.n * c.k), sb(4 * sb_group * groups), table(4 * c.table.size());
    for (std::int64_t e = 0; e < groups; ++e)
      quantize_into(c.n, c.k, Fp8Format::e4m3, Granularity::block128, ScaleLayout::row_major,
                    b.as<unsigned char>() + e * c.n * c.k, sb.f32() + e * sb_group, seed++);
    table.upload(c.table.data(), 4 * c.table.size());
    std::vector<std::vector<unsigned char>> results;
    for (ScaleLayout layout : {ScaleLayout::row_major, ScaleLayout::col_major_tma}) {
      GroupedGemmArgs g;
      g.layout = c.layout;
      g.groups = groups;
      g.m = c.m, g.n = c.n, g.k = c.k;
      g.a = sa.a->get();
      g.b = b.get();
      g.scale_b = sb.f32();
      g.scale_b_size = sb_group * groups;
      g.group_rows = table.as<int>();
      g.scale_a = layout == ScaleLayout::row_major ? sa.rows->f32() : sa.columns->f32();
      g.scale_a_layout = layout;
      g.scale_a_size = scale_count(Granularity::group128, layout, rows, c.k);
      DeviceMem d(rows * c.n * 2);
      d.poison(0xFF);  // rows no group owns stay poisoned in both
      g.d = d.get();
      default_runtime().grouped_gemm(g, nullptr);
      results.push_back(d.download());
    }
    EXPECT_EQ(results[0], results[1]) << "row-major scales changed the result";
    EXPECT_EQ(download_floats(*sa.rows), sa.rows_host) << "the caller's scales were written";
  }
}

// The copy is part of what a captured graph replays: scales rewritten in place between replays
// give the new result.
TEST(ScaleColumnsGpu, CapturedGraphCopiesTheScalesOnEveryReplay) {
  FP8JIT_REQUIRE_GPU();
  const std::int64_t m = 96, n = 1024, k = 6144;  // 48 K blocks: the copy runs
  BothLayouts first = quantize_a(m, k, 70), second = quantize_a(m, k, 71);
  DeviceMem b(n * k), sb(4 * scale_count(Granularity::block128, ScaleLayout::row_major, n, k));
  quantize_into(n, k, Fp8Format::e4m3, Granularity::block128, ScaleLayout::row_major, b.get(),
                sb.f32(), 72);
  DeviceMem scales(first.rows->size());
  scales.upload(first.rows_host.data(), scales.size());
  GemmArgs g;
  g.m = m, g.n = n, g.k = k;
  g.a = first.a->get();  // the codes stay; only the scales change
  g.b = b.get();
  g.scale_b = sb.f32();
  g.scale_b_size = scale_count(Granularity::block128, ScaleLayout::row_major, n, k);
  g.d_dtype = DType::bf16;
  DeviceMem d(m * n * 2);
  g.d = d.get();
  g.scale_a = scales.f32();
  g.scale_a_layout = ScaleLayout::row_major;
  g.scale_a_size = scale_count(Granularity::group128, ScaleLayout::row_major, m, k);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  default_runtime().gemm(
      g, reinterpret_cast<CUstream>(stream));  // compile and route outside the capture
  CUDA_OK(cudaStreamSynchronize(stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  default_runtime().gemm(g, reinterpret_cast<CUstream>(stream));
  CUDA_OK(cudaStreamEndCapture(stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  scales.upload(second.rows_host.data(), scales.size());
  d.poison(0xFF);
  CUDA_OK(cudaGraphLaunch(exec, stream));
  CUDA_OK(cudaStreamSynchronize(stream));
  const auto replayed = d.download();
  const auto want = dense_d(g, second.columns->f32(), ScaleLayout::col_major_tma);
  EXPECT_EQ(replayed, want) << "the replay used the scales of the capture";
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
  CUDA_OK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace fp8jit::test
