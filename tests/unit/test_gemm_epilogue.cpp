// The gemm config's epilogue (any / tma): a build choice derived from the shape. Where K is one
// range the default, the tuner's candidates and a database row all name the tma build; split-K
// shapes and grouped layouts the any build; specs written before the parameter read as any and
// keep their names, JSON and hashes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <fstream>
#include <iterator>

#include "autotune/tuner.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"

namespace fp8jit {
namespace {

const GemmProblem kBlock{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block};
const GemmProblem kTensorFast{Fp8Format::e4m3,   Fp8Format::e4m3, DType::bf16,
                              ScaleMode::tensor, false,           true};

TEST(GemmEpilogue, DefaultsBuildTmaWhereKIsOneRange) {
  for (const GemmProblem& p : {kBlock, kTensorFast}) {
    const KernelSpec large = default_gemm_spec(p, 4096, 2112, 7168);
    EXPECT_EQ(gemm_config_of(large).epilogue, GemmEpilogue::tma) << spec_name(large);
    EXPECT_TRUE(spec_name(large).ends_with("_tma")) << spec_name(large);
    EXPECT_EQ(gemm_split_k(4096, 2112, 7168, gemm_config_of(large), 132), 1);
    // 64x2112x4096: 33 tiles of 64x64 split K (gemm_split_k; 32 K blocks are too few for the
    // streaming tiles), so the any build.
    const KernelSpec decode = default_gemm_spec(p, 64, 2112, 4096);
    EXPECT_GE(gemm_split_k(64, 2112, 4096, gemm_config_of(decode), 132), 2);
    EXPECT_EQ(gemm_config_of(decode).epilogue, GemmEpilogue::any) << spec_name(decode);
    EXPECT_EQ(spec_name(decode).find("_tma"), std::string::npos);
  }
  // Block 128x256 runs in column halves, whose tma build was slower: the any build.
  const KernelSpec halves = default_gemm_spec(kBlock, 1024, 4096, 7168);
  EXPECT_EQ(gemm_config_of(halves).block_n, 256);
  EXPECT_EQ(gemm_config_of(halves).epilogue, GemmEpilogue::any);
  GemmProblem grouped = kBlock;
  grouped.layout = GemmLayout::contiguous;
  EXPECT_EQ(gemm_config_of(default_grouped_gemm_spec(grouped, 8, 4096, 4096, 7168)).epilogue,
            GemmEpilogue::any);
}

TEST(GemmEpilogue, ShapeDecidesWhateverTheSpecSays) {
  GemmConfig c{128, 128, 4, 8};
  const KernelSpec any = make_gemm_spec(kBlock, c);
  c.epilogue = GemmEpilogue::tma;
  const KernelSpec tma = make_gemm_spec(kBlock, c);
  EXPECT_EQ(with_gemm_epilogue(any, 4096, 4096, 4096, 132), tma);
  EXPECT_EQ(with_gemm_epilogue(tma, 4096, 4096, 4096, 132), tma);
  // 128x2048x7168 at 128x128: 16 tiles split K 8 ways.
  EXPECT_EQ(with_gemm_epilogue(tma, 128, 2048, 7168, 132), any);
  EXPECT_EQ(with_gemm_epilogue(any, 128, 2048, 7168, 132), any);
  // The same shape on a GPU of 16 SMs fills it without splitting.
  EXPECT_EQ(with_gemm_epilogue(any, 128, 2048, 7168, 16), tma);
  EXPECT_EQ(gemm_epilogue_for(kBlock, 128, 2048, 7168, gemm_config_of(tma), 132),
            GemmEpilogue::any);
}

TEST(GemmEpilogue, JsonNamesAndHashes) {
  const GemmConfig base{128, 128, 5, 8};
  const KernelSpec any = make_gemm_spec(kBlock, base);
  GemmConfig c = base;
  c.epilogue = GemmEpilogue::tma;
  const KernelSpec tma = make_gemm_spec(kBlock, c);
  // any is the kernel every spec named before the parameter existed: no key, no suffix.
  EXPECT_EQ(spec_to_json(any).find("epilogue"), std::string::npos);
  EXPECT_EQ(spec_name(tma), spec_name(any) + "_tma");
  EXPECT_NE(spec_hash(tma), spec_hash(any));
  EXPECT_NE(spec_to_json(tma).find(R"("epilogue":"tma")"), std::string::npos);
  EXPECT_EQ(spec_from_json(spec_to_json(tma)), tma);
  // Written out as any, it reads back as the spec without the key.
  std::string explicit_any = spec_to_json(any);
  explicit_any.replace(explicit_any.find("\"group_m\""), 0, R"("epilogue":"any",)");
  EXPECT_EQ(spec_from_json(explicit_any), any);
  EXPECT_EQ(gemm_config_of(spec_from_json(explicit_any)), base);
}

TEST(GemmEpilogue, BadValuesAndGroupedLayoutsRefused) {
  std::string bad = spec_to_json(make_gemm_spec(kBlock, {128, 128, 5, 8}));
  bad.replace(bad.find("\"group_m\""), 0, R"("epilogue":"direct",)");
  EXPECT_THROW(spec_from_json(bad), Error);
  std::string number = spec_to_json(make_gemm_spec(kBlock, {128, 128, 5, 8}));
  number.replace(number.find("\"group_m\""), 0, R"("epilogue":1,)");
  EXPECT_THROW(spec_from_json(number), Error);
  for (const std::string& value : {std::string(), std::string(100000, 't')}) {
    std::string text = spec_to_json(make_gemm_spec(kBlock, {128, 128, 5, 8}));
    text.replace(text.find("\"group_m\""), 0, "\"epilogue\":\"" + value + "\",");
    EXPECT_THROW(spec_from_json(text), Error) << value.size();
  }
  // Empty shapes and tiles are refused by name, not divided by; a spec of another family too.
  const GemmConfig c128{128, 128, 4, 8};
  EXPECT_THROW(gemm_epilogue_for(kBlock, 0, 4096, 4096, c128, 132), Error);
  EXPECT_THROW(gemm_epilogue_for(kBlock, 64, -1, 4096, c128, 132), Error);
  EXPECT_THROW(gemm_split_k(64, 4096, 0, c128, 132), Error);
  EXPECT_THROW(gemm_split_k(64, 4096, 4096, GemmConfig{128, 0, 4, 8}, 132), Error);
  EXPECT_THROW(with_gemm_epilogue(make_gemm_spec(kBlock, c128), 0, 4096, 4096, 132), Error);
  EXPECT_THROW(with_gemm_epilogue(make_quantize_spec({}, {8, 256, 2}), 64, 4096, 4096, 132), Error);
  // The CLI takes no epilogue in --config: it follows from the shape (checked before any GPU).
  const std::string out = ::testing::TempDir() + "/fp8jit-epilogue-cli.out";
  const int raw = std::system((std::string(FP8JIT_CLI_PATH) +
                               " gemm --m 128 --n 128 --k 128 --config '{\"epilogue\":\"tma\"}' >" + out + " 2>&1")
                                  .c_str());
  std::ifstream in(out);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) != 0) << text;
  EXPECT_NE(text.find("not a gemm config parameter"), std::string::npos) << text;
  GemmProblem grouped = kBlock;
  grouped.layout = GemmLayout::masked;
  GemmConfig c{128, 128, 5, 8};
  c.epilogue = GemmEpilogue::tma;
  try {
    make_gemm_spec(grouped, c);
    FAIL() << "a grouped tma spec was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("epilogue = any"), std::string::npos) << e.what();
  }
}

TEST(GemmEpilogue, TunerCandidatesBuildWhatTheirLaunchRuns) {
  // Decode: some candidates split K, some do not; large: none does.
  for (const auto& [m, n, k] : {std::tuple{64, 2112, 7168}, std::tuple{4096, 4096, 7168}}) {
    const std::vector<KernelSpec> candidates = gemm_candidates(kBlock, m, n, k, 132, 232448, 32);
    ASSERT_FALSE(candidates.empty());
    for (const KernelSpec& s : candidates) {
      const GemmConfig c = gemm_config_of(s);
      EXPECT_EQ(c.epilogue, gemm_epilogue_for(kBlock, m, n, k, c, 132)) << spec_name(s);
    }
  }
}

}  // namespace
}  // namespace fp8jit
