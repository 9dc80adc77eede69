// Programmatic dependent launch (RuntimeOptions::pdl) on the GPU: chains in which each kernel
// overwrites what the previous one reads (a quantize refilling the GEMM's operand, a GEMM reusing
// the quantize's input buffer) give the same bytes with PDL as without, for every kernel kind the
// dense launch sequence (1x128 and per-tensor quantize with their amax and finalize passes, block
// and per-tensor GEMMs, split-K summed in clusters or through a workspace and its reduction); and
// the time of back-to-back quantize + GEMM layers with and without it. (Grouped GEMMs run the
// same kernel entry, whose wait the compile tests check in PTX.)
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fp8jit/runtime.hpp"
#include "tests/common/gpu_env.hpp"
#include "tests/gpu/gemm_operands.hpp"

namespace fp8jit::test {
namespace {

// One layer's buffers: L different bf16 inputs, the FP8 operand and its scales every layer
// rewrites, the weight, and one output per layer.
struct Chain {
  GemmShape shape;
  ScaleMode mode;
  int layers;
  std::vector<std::unique_ptr<DeviceMem>> x, d;
  std::unique_ptr<DeviceMem> a, sa, b, sb;

  Chain(GemmShape s, ScaleMode m, int l) : shape(s), mode(m), layers(l) {
    const Granularity ga = mode == ScaleMode::block ? Granularity::group128 : Granularity::tensor;
    const Granularity gb = mode == ScaleMode::block ? Granularity::block128 : Granularity::tensor;
    for (int i = 0; i < layers; ++i) {
      const auto h = random_tensor(s.m, s.k, s.k, DType::bf16, 100 + i, false);
      x.push_back(std::make_unique<DeviceMem>(h.size()));
      x.back()->upload(h.data(), h.size());
      d.push_back(std::make_unique<DeviceMem>(2 * s.m * s.n));
    }
    a = std::make_unique<DeviceMem>(s.m * s.k);
    sa = std::make_unique<DeviceMem>(4 * scale_count(ga, ScaleLayout::col_major_tma, s.m, s.k));
    b = std::make_unique<DeviceMem>(s.n * s.k);
    sb = std::make_unique<DeviceMem>(4 * scale_count(gb, ScaleLayout::row_major, s.n, s.k));
    quantize_into(s.n, s.k, Fp8Format::e4m3, gb, ScaleLayout::row_major, b->get(), sb->f32(), 7);
  }

  QuantizeArgs quantize_args(int i) const {
    QuantizeArgs q;
    q.x = x[i]->get();
    q.m = shape.m;
    q.k = shape.k;
    q.q = a->get();
    q.scales = sa->f32();
    q.granularity = mode == ScaleMode::block ? Granularity::group128 : Granularity::tensor;
    q.scale_layout = ScaleLayout::col_major_tma;
    return q;
  }

  GemmArgs gemm_args(int i) const {
    GemmArgs g;
    g.m = shape.m;
    g.n = shape.n;
    g.k = shape.k;
    g.a = a->get();
    g.b = b->get();
    g.d = d[i]->get();
    g.scale_a = sa->f32();
    g.scale_b = sb->f32();
    g.scale_mode = mode;
    g.scale_a_layout = ScaleLayout::col_major_tma;
    g.scale_b_layout = ScaleLayout::row_major;
    const Granularity ga = mode == ScaleMode::block ? Granularity::group128 : Granularity::tensor;
    const Granularity gb = mode == ScaleMode::block ? Granularity::block128 : Granularity::tensor;
    g.scale_a_size = scale_count(ga, g.scale_a_layout, g.m, g.k);
    g.scale_b_size = scale_count(gb, g.scale_b_layout, g.n, g.k);
    return g;
  }

  // Every layer: quantize its input into the shared operand, then the GEMM into its own output.
  // Layer i + 1's quantize overwrites the operand layer i's GEMM reads.
  void run(Runtime& rt, cudaStream_t stream) const {
    for (int i = 0; i < layers; ++i) {
      rt.quantize(quantize_args(i), stream);
      rt.gemm(gemm_args(i), stream);
    }
  }

  std::vector<std::vector<unsigned char>> outputs() const {
    std::vector<std::vector<unsigned char>> out;
    for (const auto& o : d) out.push_back(o->download());
    return out;
  }
  void poison() {
    for (auto& o : d) o->poison(0xFF);
  }
};

RuntimeOptions options_with(bool pdl, SplitSum sum = SplitSum::cluster) {
  RuntimeOptions o;
  o.cache_dir = (std::filesystem::temp_directory_path() / "fp8jit-pdl-test-cache").string();
  o.pdl = pdl;
  o.split_sum = sum;
  return o;
}

// Chains on a non-blocking stream, so nothing but the stream order separates the kernels.
class PdlGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (gpu_unavailable_reason().empty())
      ASSERT_EQ(cudaSuccess, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(PdlGpu, ChainsGiveTheSameBytesWithAndWithoutPdl) {
  FP8JIT_REQUIRE_GPU();
  struct Case {
    GemmShape shape;
    ScaleMode mode;
    SplitSum sum;
  };
  // Decode (split-K summed in clusters, or through the workspace and the reduction kernel), a
  // mid shape, and per-tensor (three quantize kernels and a memset per layer).
  const Case cases[] = {{{64, 2112, 7168}, ScaleMode::block, SplitSum::cluster},
                        {{64, 2112, 7168}, ScaleMode::block, SplitSum::workspace},
                        {{512, 4096, 2048}, ScaleMode::block, SplitSum::cluster},
                        {{128, 7168, 2048}, ScaleMode::tensor, SplitSum::cluster},
                        {{1, 4096, 7168}, ScaleMode::tensor, SplitSum::workspace}};
  for (const Case& c : cases) {
    const std::string what =
        fmt::format("{}x{}x{} {}{}", c.shape.m, c.shape.n, c.shape.k, to_string(c.mode),
                    c.sum == SplitSum::workspace ? ", split-K through the workspace" : "");
    SCOPED_TRACE(what);
    Chain chain(c.shape, c.mode, 8);
    Runtime off(options_with(false, c.sum)), on(options_with(true, c.sum));
    ASSERT_TRUE(on.pdl());
    chain.poison();
    chain.run(off, stream_);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream_));
    const auto want = chain.outputs();
    for (const auto& o : want)
      ASSERT_NE(std::count(o.begin(), o.end(), 0xFF), std::ptrdiff_t(o.size())) << "unwritten";
    for (int round = 0; round < 3; ++round) {
      chain.poison();
      chain.run(on, stream_);
      ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream_));
      const auto got = chain.outputs();
      for (int i = 0; i < chain.layers; ++i)
        EXPECT_EQ(got[i], want[i]) << "layer " << i << ", round " << round;
    }
    // Switched off again at run time: launches without the attribute, the same bytes.
    on.set_pdl(false);
    chain.poison();
    chain.run(on, stream_);
    ASSERT_EQ(cudaSuccess, cudaStreamSynchronize(stream_));
    EXPECT_EQ(chain.outputs(), want);
  }
}

// Back-to-back layers (quantize + GEMM) as a model's forward pass runs them, timed on the stream
// with events around 16 layers (no cache flush: each layer reads what the last one wrote), median
// of 15 runs, PDL off and on alternately. Prints the times; the bytes are checked above.
TEST_F(PdlGpu, LayerChainTimes) {
  FP8JIT_REQUIRE_GPU();
  Runtime off(options_with(false)), on(options_with(true));
  cudaEvent_t t0, t1;
  ASSERT_EQ(cudaSuccess, cudaEventCreate(&t0));
  ASSERT_EQ(cudaSuccess, cudaEventCreate(&t1));
  const std::pair<GemmShape, ScaleMode> shapes[] = {
      {{1, 7168, 2048}, ScaleMode::block},    {{64, 2112, 7168}, ScaleMode::block},
      {{128, 7168, 2048}, ScaleMode::block},  {{128, 4096, 7168}, ScaleMode::tensor},
      {{64, 24576, 1536}, ScaleMode::tensor}, {{4096, 7168, 2048}, ScaleMode::block}};
  for (const auto& [s, mode] : shapes) {
    Chain chain(s, mode, 16);
    auto time_us = [&](Runtime& rt) {
      ASSERT_EQ(cudaSuccess, cudaEventRecord(t0, stream_));
      chain.run(rt, stream_);
      ASSERT_EQ(cudaSuccess, cudaEventRecord(t1, stream_));
      ASSERT_EQ(cudaSuccess, cudaEventSynchronize(t1));
    };
    std::vector<double> t_off, t_on;
    for (int r = 0; r < 18; ++r)
      for (Runtime* rt : {&off, &on}) {
        time_us(*rt);
        float ms = 0;
        ASSERT_EQ(cudaSuccess, cudaEventElapsedTime(&ms, t0, t1));
        if (r >= 3) (rt == &off ? t_off : t_on).push_back(ms * 1e3 / chain.layers);
      }
    std::sort(t_off.begin(), t_off.end());
    std::sort(t_on.begin(), t_on.end());
    const double a = t_off[t_off.size() / 2], b = t_on[t_on.size() / 2];
    std::printf(
        "PDL %dx%dx%d %s: quantize + GEMM per layer %.2f us without, %.2f us with (%.3fx)\n",
        static_cast<int>(s.m), static_cast<int>(s.n), static_cast<int>(s.k),
        std::string(to_string(mode)).c_str(), a, b, a / b);
  }
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
}

}  // namespace
}  // namespace fp8jit::test
