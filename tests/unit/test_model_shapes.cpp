// The GEMMs of real model configs (the sizes of DeepSeek-V3, Qwen3-8B, Qwen3-30B-A3B and
// Llama-3-8B as published), under tensor parallelism; the kernels a model selects for a batch
// range; bad configs; and `fp8jit precompile --model` end to end.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "fp8jit/models.hpp"
#include "fp8jit/runtime.hpp"
#include "tests/common/cli_run.hpp"
#include "tests/common/expect_error.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit {
namespace {

const char* kDeepSeekV3 =
    R"({"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
  "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8,
  "first_k_dense_replace": 3, "num_attention_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
  "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "vocab_size": 129280})";
const char* kQwen3_8B = R"({"model_type": "qwen3", "hidden_size": 4096, "intermediate_size": 12288,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128})";
const char* kQwen3_30B_A3B =
    R"({"model_type": "qwen3_moe", "hidden_size": 2048, "intermediate_size": 6144,
  "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "num_attention_heads": 32,
  "num_key_value_heads": 4, "head_dim": 128, "mlp_only_layers": [], "decoder_sparse_step": 1})";
const char* kLlama3_8B = R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
  "num_attention_heads": 32, "num_key_value_heads": 8})";

using Row =
    std::tuple<std::string, std::int64_t, std::int64_t, std::int64_t>;  // name, N, K, groups

std::vector<Row> rows(const std::vector<ModelGemm>& g) {
  std::vector<Row> out;
  for (const ModelGemm& m : g) out.emplace_back(m.name, m.n, m.k, m.groups);
  return out;
}

TEST(ModelShapes, DeepSeekV3IsTheSuiteDeepGemmBenchmarks) {
  // tp = 1: the published shapes (fused q_a + kv_a 2112 x 7168, q_b 24576 x 1536, kv_b 32768 x 512,
  // o 7168 x 16384, shared experts 4096 x 7168 and 7168 x 2048, 256 experts of 4096 x 7168 and 7168
  // x 2048).
  EXPECT_EQ(rows(model_gemms(kDeepSeekV3)),
            (std::vector<Row>{{"self_attn.fused_qkv_a_proj", 2112, 7168, 0},
                              {"self_attn.q_b_proj", 24576, 1536, 0},
                              {"self_attn.kv_b_proj", 32768, 512, 0},
                              {"self_attn.o_proj", 7168, 16384, 0},
                              {"mlp.gate_up_proj", 36864, 7168, 0},
                              {"mlp.down_proj", 7168, 18432, 0},
                              {"mlp.shared_experts.gate_up_proj", 4096, 7168, 0},
                              {"mlp.shared_experts.down_proj", 7168, 2048, 0},
                              {"mlp.experts.gate_up_proj", 4096, 7168, 256},
                              {"mlp.experts.down_proj", 7168, 2048, 256}}));
  // tp = 8: column-parallel N and row-parallel K split, q_a + kv_a replicated, 32 experts a rank.
  EXPECT_EQ(rows(model_gemms(kDeepSeekV3, 8)),
            (std::vector<Row>{{"self_attn.fused_qkv_a_proj", 2112, 7168, 0},
                              {"self_attn.q_b_proj", 3072, 1536, 0},
                              {"self_attn.kv_b_proj", 4096, 512, 0},
                              {"self_attn.o_proj", 7168, 2048, 0},
                              {"mlp.gate_up_proj", 4608, 7168, 0},
                              {"mlp.down_proj", 7168, 2304, 0},
                              {"mlp.shared_experts.gate_up_proj", 512, 7168, 0},
                              {"mlp.shared_experts.down_proj", 7168, 256, 0},
                              {"mlp.experts.gate_up_proj", 4096, 7168, 32},
                              {"mlp.experts.down_proj", 7168, 2048, 32}}));
  const ModelGemm experts = model_gemms(kDeepSeekV3).back();
  EXPECT_EQ(experts.expected_m(1), 1);       // 8 of 256 experts: at least a row each
  EXPECT_EQ(experts.expected_m(4096), 128);  // 4096 * 8 / 256
  EXPECT_EQ(experts.expected_m(100), 4);     // ceil(800 / 256)
}

TEST(ModelShapes, Qwen3AndLlama) {
  EXPECT_EQ(rows(model_gemms(kQwen3_8B)), (std::vector<Row>{{"self_attn.qkv_proj", 6144, 4096, 0},
                                                            {"self_attn.o_proj", 4096, 4096, 0},
                                                            {"mlp.gate_up_proj", 24576, 4096, 0},
                                                            {"mlp.down_proj", 4096, 12288, 0}}));
  // tp = 16 > 8 KV heads: each rank keeps one (replicated) KV head.
  EXPECT_EQ(rows(model_gemms(kQwen3_8B, 16)),
            (std::vector<Row>{{"self_attn.qkv_proj", 512, 4096, 0},
                              {"self_attn.o_proj", 4096, 256, 0},
                              {"mlp.gate_up_proj", 1536, 4096, 0},
                              {"mlp.down_proj", 4096, 768, 0}}));
  EXPECT_EQ(rows(model_gemms(kQwen3_30B_A3B)),
            (std::vector<Row>{{"self_attn.qkv_proj", 5120, 2048, 0},
                              {"self_attn.o_proj", 2048, 4096, 0},
                              {"mlp.experts.gate_up_proj", 1536, 2048, 128},
                              {"mlp.experts.down_proj", 2048, 768, 128}}));
  // No head_dim: hidden / heads.
  EXPECT_EQ(rows(model_gemms(kLlama3_8B))[0], (Row{"self_attn.qkv_proj", 6144, 4096, 0}));
}

TEST(ModelShapes, BadConfigsAreRefusedByName) {
  const std::pair<std::string, const char*> cases[] = {
      {"{not json", "not valid JSON"},
      {"[1]", "not a JSON object"},
      {R"({"hidden_size": 1})", "\"model_type\" = <missing>"},
      {R"({"model_type": "gpt2"})", "gpt2: one of deepseek_v3, deepseek_v2, qwen3"},
      {R"({"model_type": "llama", "hidden_size": 4096})", "\"num_attention_heads\" = <missing>"},
      {R"({"model_type": "llama", "hidden_size": -4, "num_attention_heads": 32, "intermediate_size": 1})",
       "\"hidden_size\" = -4: a positive integer"},
  };
  for (const auto& [text, needle] : cases) {
    const std::string msg = test::invalid_message([&] { (void)model_gemms(text); });
    EXPECT_NE(msg.find(needle), std::string::npos) << text << " -> " << msg;
  }
  EXPECT_NE(test::invalid_message([&] {
              (void)model_gemms(kQwen3_8B, 3);
            }).find("tp = 3: does not divide"),
            std::string::npos);
  EXPECT_NE(test::invalid_message([&] { (void)model_gemms(kQwen3_8B, 0); }).find("tp = 0"),
            std::string::npos);
  // 256 ranks do not divide DeepSeek-V3's 128 heads.
  EXPECT_NE(
      test::invalid_message([&] { (void)model_gemms(kDeepSeekV3, 256); }).find("does not divide"),
      std::string::npos);
  // A K that FP8 GEMMs cannot take (not a multiple of 16).
  const char* odd = R"({"model_type": "llama", "hidden_size": 4096, "intermediate_size": 4104,
    "num_attention_heads": 32, "num_key_value_heads": 8})";
  EXPECT_NE(
      test::invalid_message([&] { (void)model_gemms(odd); }).find("mlp.down_proj with K = 4104"),
      std::string::npos);
}

TEST(ModelKernels, EveryGemmBothExpertLayoutsAndTheQuantize) {
  Runtime rt(RuntimeOptions{""});
  std::vector<std::int64_t> ms;
  for (std::int64_t m = 1; m <= 4096; m *= 2) ms.push_back(m);
  const std::vector<Runtime::ModelKernel> ks = rt.model_kernels(kDeepSeekV3, ms, 8);
  std::map<std::string, std::int64_t> lo, hi;
  for (const Runtime::ModelKernel& k : ks) {
    lo[k.what] = lo.count(k.what) ? std::min(lo[k.what], k.m_min) : k.m_min;
    hi[k.what] = std::max(hi[k.what], k.m_max);
    if (k.what.find("(masked)") != std::string::npos) EXPECT_EQ(k.spec.s("layout"), "masked");
    if (k.what.find("(contiguous)") != std::string::npos)
      EXPECT_EQ(k.spec.s("layout"), "contiguous");
  }
  for (const char* what :
       {"self_attn.fused_qkv_a_proj", "self_attn.o_proj", "mlp.experts.gate_up_proj (masked)",
        "mlp.experts.down_proj (contiguous)"}) {
    EXPECT_EQ(lo[what], 1) << what;
    EXPECT_EQ(hi[what], 4096) << what;
  }
  EXPECT_EQ(ks.back().what, "quantize (activations, 1x128)");
  EXPECT_EQ(ks.back().spec.family, "quantize");
  // Each (what, kernel) once; every selection is what select() gives for that M.
  std::set<std::pair<std::string, std::string>> seen;
  for (const Runtime::ModelKernel& k : ks)
    EXPECT_TRUE(seen.emplace(k.what, spec_name(k.spec)).second);
  EXPECT_EQ(ks.front().spec, rt.select(GemmProblem{}, {1, 2112, 7168}));
  EXPECT_NE(
      test::invalid_message([&] { (void)rt.model_kernels(kDeepSeekV3, {}, 8); }).find("batch size"),
      std::string::npos);
}

TEST(ModelKernels, ATargetGpuChangesWhatTheHeuristicsPick) {
  EXPECT_EQ(gpu_target("h20").sm_count, 78);
  EXPECT_EQ(gpu_target("h100-pcie").sm_count, 114);
  EXPECT_EQ(gpu_target("96").sm_count, 96);
  for (const char* bad : {"", "h300", "0", "1025", "12x", "-5"})
    EXPECT_NE(test::invalid_message([&] { (void)gpu_target(bad); }).find("GPU target"),
              std::string::npos)
        << bad;
  RuntimeOptions o{""};
  Runtime h100(o);
  o.target = gpu_target("h20");
  Runtime h20(o);
  std::vector<std::int64_t> ms;
  for (std::int64_t m = 1; m <= 4096; m *= 2) ms.push_back(m);
  std::size_t differ = 0;
  for (std::int64_t m : ms) {
    const GemmShape s{m, 7168, 2048};
    EXPECT_EQ(h20.select(GemmProblem{}, s), default_gemm_spec(GemmProblem{}, m, 7168, 2048, 78));
    differ += !(h20.select(GemmProblem{}, s) == h100.select(GemmProblem{}, s));
  }
  EXPECT_GT(differ, 0u);  // 78 SMs tile some shapes differently than 132
  const auto a = h100.model_kernels(kDeepSeekV3, ms, 8), b = h20.model_kernels(kDeepSeekV3, ms, 8);
  EXPECT_FALSE(a.size() == b.size() &&
               std::equal(a.begin(), a.end(), b.begin(),
                          [](const auto& x, const auto& y) { return x.spec == y.spec; }));
}

TEST(ModelPrecompileCli, CompilesTheModelsKernelsAndRefusesBadInput) {
  test::TempDir dir("fp8jit_model");
  const std::string config = dir.path() + "/config.json";
  std::ofstream(config) << kQwen3_8B;
  const std::string env =
      "FP8JIT_CACHE_DIR=" + dir.path() + "/cache FP8JIT_DB=" + dir.path() + "/db.sqlite";
  const test::CliResult ok = test::run_cli(
      {"precompile", "--model", config, "--m", "1-4,64,4096", "--tp", "2", "--jobs", "2"},
      dir.path(), {.env = env});
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("6 batch sizes (1..4096), tp=2"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("self_attn.qkv_proj"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("quantize (activations, 1x128)"), std::string::npos) << ok.out;
  // Again: everything from the disk cache.
  const test::CliResult again =
      test::run_cli({"precompile", "--model", config, "--m", "1-4,64,4096", "--tp", "2"},
                    dir.path(), {.env = env});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("(0 compiled,"), std::string::npos) << again.out;
  const std::pair<std::vector<std::string>, const char*> bad[] = {
      {{"--m", "0"}, "--m = 0"},
      {{"--m", "8-2"}, "from the smaller to the larger"},
      {{"--m", "1,,2"}, "--m = 1,,2: an empty entry"},
      {{"--m", "1-2000000"}, "more than 2^20"},
      {{"--tp", "3"}, "does not divide"},
      {{"--suite", "deepseek-v3"}, "give no --suite or --shapes"},
      {{"--gpu", "h300"}, "invalid GPU target = h300"},
      {{"--bias"}, "--bias = with --model"},
  };
  for (const auto& [extra, needle] : bad) {
    std::vector<std::string> args = {"precompile", "--model", config};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_cli(args, dir.path(), {.env = env});
    EXPECT_EQ(r.status, 1) << extra.back() << ": " << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace fp8jit
