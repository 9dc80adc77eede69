// Swapped operands (GemmConfig::swap_ab): the kernel computes D^T = B A^T so that decode-sized M
// sits on the tile's narrow side. The heuristic takes them up to kGemmSwapMaxM rows of A; a spec
// without the key is the unswapped kernel it always was (name, JSON, hash); the family refuses
// them where the kernel cannot run them; split-K, the epilogue build and the cost model read the
// tile's rows as N.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "autotune/tuner.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/families/gemm_geometry.hpp"
#include "generator/gemm_cost.hpp"

namespace fp8jit {
namespace {

const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
const GemmProblem kBlock{e4, e4, DType::bf16, ScaleMode::block};
const GemmProblem kTensor{e4, e4, DType::bf16, ScaleMode::tensor};
const GemmProblem kRowBias{e5, e4, DType::fp32, ScaleMode::rowwise, true};
const GemmProblem kTensorFast{e4, e4, DType::fp16, ScaleMode::tensor, false, true};

GemmConfig swapped(int block_m, int block_n, int stages) {
  GemmConfig c{block_m, block_n, stages, 8};
  c.swap_ab = 1;
  return c;
}

TEST(GemmSwap, DefaultsSwapAtDecodeM) {
  for (const GemmProblem& p : {kBlock, kTensor, kRowBias, kTensorFast}) {
    for (const std::int64_t m : {1, 7, 8, 9, 16}) {
      const GemmConfig c = gemm_config_of(default_gemm_spec(p, m, 6144, 4096));
      SCOPED_TRACE(testing::Message() << "m=" << m << " " << to_string(p.scale));
      EXPECT_EQ(c.swap_ab, 1);
      EXPECT_EQ(c.block_n, m <= 8 ? 8 : 16);  // M on the narrowest multiple of 8 that holds it
      EXPECT_EQ(c.block_m, 64);               // 96 tiles of N: one wave
      EXPECT_EQ(c.epilogue, GemmEpilogue::any);
      EXPECT_GE(c.stages, 12);
      EXPECT_LE(gemm_geometry(p, c).smem_bytes, kGemmSmemLimit);
      // More tiles of 64 rows than SMs: 128-row tiles.
      EXPECT_EQ(gemm_config_of(default_gemm_spec(p, m, 28672, 4096)).block_m, 128);
    }
    for (const std::int64_t m : {17, 64, 4096})
      EXPECT_EQ(gemm_config_of(default_gemm_spec(p, m, 6144, 4096)).swap_ab, 0) << m;
  }
  // A GPU with less shared memory: fewer stages, still swapped and within it.
  const GemmConfig small =
      gemm_config_of(default_gemm_spec(kBlock, 1, 6144, 4096, 132, 100 * 1024));
  EXPECT_EQ(small.swap_ab, 1);
  EXPECT_LE(gemm_geometry(kBlock, small).smem_bytes, 100 * 1024);
  // Grouped layouts never swap.
  GemmProblem grouped = kBlock;
  grouped.layout = GemmLayout::masked;
  EXPECT_EQ(gemm_config_of(default_grouped_gemm_spec(grouped, 8, 1, 4096, 7168)).swap_ab, 0);
}

TEST(GemmSwap, JsonNamesAndHashes) {
  const GemmConfig plain{64, 16, 12, 8};
  GemmConfig c = plain;
  c.swap_ab = 1;
  const KernelSpec a = make_gemm_spec(kBlock, plain), s = make_gemm_spec(kBlock, c);
  // Absent from specs that do not swap: every spec written before it names the same kernel.
  EXPECT_EQ(spec_to_json(a).find("swap_ab"), std::string::npos);
  EXPECT_NE(spec_to_json(s).find(R"("swap_ab":1)"), std::string::npos);
  EXPECT_EQ(spec_name(s), spec_name(a) + "_swap");
  EXPECT_NE(spec_hash(s), spec_hash(a));
  EXPECT_EQ(spec_from_json(spec_to_json(s)), s);
  EXPECT_EQ(gemm_config_of(spec_from_json(spec_to_json(s))), c);
  std::string explicit_zero = spec_to_json(a);
  explicit_zero.replace(explicit_zero.find("\"group_m\""), 0, R"("swap_ab":0,)");
  EXPECT_EQ(spec_from_json(explicit_zero), a);
  // The generated source swaps the formats and block scaling's kind with the operands.
  const GemmProblem mixed{e5, e4, DType::bf16, ScaleMode::block};
  const std::string src = render_source(make_gemm_spec(mixed, c));
  EXPECT_NE(src.find("kSwappedBlockScale, kBF16, kE4M3, kE5M2"), std::string::npos) << src;
  EXPECT_NE(src.find("/*kSwapAB=*/true"), std::string::npos);
  EXPECT_EQ(render_source(a).find("kSwapAB"), std::string::npos);
}

TEST(GemmSwap, RefusedWhereTheKernelCannotRunIt) {
  const auto refused = [](const GemmProblem& p, const GemmConfig& c, const std::string& why) {
    try {
      make_gemm_spec(p, c);
      ADD_FAILURE() << "accepted " << c.block_m << "x" << c.block_n;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  GemmProblem grouped = kBlock;
  grouped.layout = GemmLayout::contiguous;
  refused(grouped, swapped(64, 16, 8), "swap_ab = 1 is for dense GEMMs");
  GemmConfig tma = swapped(64, 16, 8);
  tma.epilogue = GemmEpilogue::tma;
  refused(kTensor, tma, "epilogue = any");
  GemmConfig pair = swapped(64, 16, 8);
  pair.cluster_n = 2;
  refused(kTensor, pair, "no cluster");
  refused(kBlock, swapped(256, 16, 4), "at most 128x128");
  refused(kTensor, swapped(64, 136, 4), "at most 128x128");
  // Bad values of the key itself.
  const std::string base = spec_to_json(make_gemm_spec(kBlock, {64, 16, 8, 8}));
  for (const std::string& v : {std::string("2"), std::string("-1"), std::string("\"1\""),
                               std::string(100000, '1'), std::string("\"\"")}) {
    std::string text = base;
    text.replace(text.find("\"group_m\""), 0, "\"swap_ab\":" + v + ",");
    EXPECT_THROW(spec_from_json(text), Error) << v.substr(0, 20);
  }
}

// The CLI refuses bad values of swap_ab before touching a GPU: `fp8jit compile --spec` (no file
// written for --cubin) and `fp8jit gemm --config` (values that are not integers).
TEST(GemmSwap, CliRefusesBadValues) {
  const std::string dir = ::testing::TempDir(), out = dir + "/fp8jit-swap-cli.out",
                    cubin = dir + "/fp8jit-swap-cli.cubin";
  const auto run = [&](const std::string& args) {
    const int raw =
        std::system((std::string(FP8JIT_CLI_PATH) + " " + args + " >" + out + " 2>&1").c_str());
    std::ifstream in(out);
    return std::pair{WIFEXITED(raw) ? WEXITSTATUS(raw) : -1,
                     std::string(std::istreambuf_iterator<char>(in), {})};
  };
  std::string spec = spec_to_json(make_gemm_spec(kBlock, {64, 16, 8, 8}));
  spec.replace(spec.find("\"group_m\""), 0, "\"swap_ab\":VALUE,");
  for (const auto& [value, why] : {std::pair<std::string, std::string>{"2", "gemm.swap_ab = 2"},
                                   {"-1", "gemm.swap_ab = -1"},
                                   {"\"1\"", "gemm.swap_ab = \"1\""},
                                   {std::string(400, '9'), "spec"}}) {
    std::string text = spec;
    text.replace(text.find("VALUE"), 5, value);
    const auto [status, output] = run("compile --spec '" + text + "' --cubin " + cubin);
    EXPECT_NE(status, 0) << value.substr(0, 20) << ": " << output;
    EXPECT_NE(output.find(why), std::string::npos) << value.substr(0, 20) << ": " << output;
    EXPECT_FALSE(std::filesystem::exists(cubin)) << value.substr(0, 20);
  }
  for (const std::string& value :
       {std::string("\"\""), std::string("\"1\""), std::string("true")}) {
    const auto [status, output] =
        run("gemm --m 1 --n 64 --k 128 --config '{\"swap_ab\":" + value + "}'");
    EXPECT_NE(status, 0) << value << ": " << output;
    EXPECT_NE(output.find("expected an integer"), std::string::npos) << value << ": " << output;
  }
  std::filesystem::remove(out);
}

TEST(GemmSwap, SplitEpilogueAndCostReadTheTileRowsAsN) {
  // 16x4096x4096 on 64x16 swapped tiles: 64 tiles of N, K in two ranges; unswapped 64x16 tiles
  // would make 256 tiles and never split.
  const GemmConfig s = swapped(64, 16, 16);
  EXPECT_EQ(gemm_split_k(16, 4096, 4096, s, 132), 2);
  EXPECT_EQ(gemm_split_k(16, 4096, 4096, GemmConfig{64, 16, 16, 8}, 132), 1);
  EXPECT_EQ(gemm_epilogue_for(kTensor, 1, 6144, 4096, swapped(64, 8, 16), 132), GemmEpilogue::any);
  EXPECT_EQ(gemm_cost(kTensor, s, 16, 4096, 4096, 132, 2),
            gemm_cost(kTensor, GemmConfig{64, 16, 16, 8}, 4096, 16, 4096, 132, 2));
  EXPECT_THROW(gemm_split_k(0, 4096, 4096, s, 132), Error);
}

TEST(GemmSwap, TunerTriesSwappedTilesAtDecodeMOnly) {
  int swapped_at_1 = 0;
  for (const KernelSpec& spec : gemm_candidates(kBlock, 1, 6144, 4096, 132, 232448, 32)) {
    const GemmConfig c = gemm_config_of(spec);
    if (!c.swap_ab) continue;
    ++swapped_at_1;
    EXPECT_EQ(c.block_n, 8) << spec_name(spec);  // M = 1 fits 8 columns
    EXPECT_EQ(c.epilogue, GemmEpilogue::any);
  }
  EXPECT_GE(swapped_at_1, 2);
  for (const std::int64_t m : {64, 4096})
    for (const KernelSpec& spec : gemm_candidates(kBlock, m, 6144, 4096, 132, 232448, 32))
      EXPECT_EQ(gemm_config_of(spec).swap_ab, 0) << m << " " << spec_name(spec);
}

}  // namespace
}  // namespace fp8jit
