// The FP8 GEMMs of a transformer, read from its Hugging Face config.json: what a server will run,
// so that every kernel can be compiled before the first request (Runtime::precompile_model,
// `fp8jit precompile --model`). Projections are laid out as vLLM and SGLang run them: fused QKV
// (and DeepSeek's fused q_a + kv_a), fused gate + up; tensor parallelism splits the N of
// column-parallel and the K of row-parallel layers, and spreads routed experts over the ranks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fp8jit/export.hpp"

namespace fp8jit {

struct ModelGemm {
  std::string name;           // e.g. "self_attn.qkv_proj", "mlp.experts.gate_up_proj"
  std::int64_t n = 0, k = 0;  // the weight [N, K] on one rank
  // Grouped (mixture-of-experts) GEMMs: the experts on one rank, all routed experts, and the
  // experts each token goes to; 0 for a dense GEMM.
  std::int64_t groups = 0, experts = 0, top_k = 0;

  bool grouped() const { return groups > 0; }
  // Rows per expert when a batch of m tokens is routed evenly: ceil(m * top_k / experts), >= 1.
  std::int64_t expected_m(std::int64_t m) const {
    const std::int64_t rows = (m * top_k + experts - 1) / experts;
    return rows > 0 ? rows : 1;
  }
};

// The model types model_gemms reads: deepseek_v3 (and deepseek_v2), qwen3, qwen3_moe, qwen2,
// llama, mistral.
FP8JIT_API std::vector<std::string> supported_model_types();

// The distinct GEMMs of the model in `config_json` (the text of config.json) on one of `tp`
// tensor-parallel ranks. Throws Error(invalid_argument) for text that is not a JSON object, an
// unknown model_type (naming the supported ones), a missing or non-positive size, a size that
// `tp` does not divide, or a K that is not a multiple of 16 on a rank.
FP8JIT_API std::vector<ModelGemm> model_gemms(std::string_view config_json, int tp = 1);

}  // namespace fp8jit
