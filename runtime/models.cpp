#include "fp8jit/models.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "fp8jit/error.hpp"
#include "fp8jit/runtime.hpp"

namespace fp8jit {
namespace {

using json = nlohmann::json;

// A config.json and the tensor-parallel degree, with checked reads of its sizes.
class Config {
 public:
  Config(const json& j, int tp) : j_(j), tp_(tp) {}

  std::int64_t size(const char* key) const {
    const auto it = j_.find(key);
    if (it == j_.end() || !it->is_number_integer() || it->get<std::int64_t>() <= 0)
      throw_invalid(fmt::format("config.json \"{}\"", key),
                    it == j_.end() ? "<missing>" : it->dump(), "a positive integer");
    return it->get<std::int64_t>();
  }
  // An optional size: `fallback` where absent or null.
  std::int64_t size_or(const char* key, std::int64_t fallback) const {
    const auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? fallback : size(key);
  }
  // `value` split over the ranks (the N of a column-parallel or the K of a row-parallel layer).
  std::int64_t split(std::int64_t value, const char* what) const {
    if (value % tp_ != 0)
      throw_invalid("tp", std::to_string(tp_), fmt::format("does not divide {} = {}", what, value));
    return value / tp_;
  }
  int tp() const { return tp_; }

 private:
  const json& j_;
  int tp_;
};

void dense_mlp(const Config& c, std::int64_t hidden, std::int64_t inter, const std::string& prefix,
               std::vector<ModelGemm>& out) {
  out.push_back({prefix + ".gate_up_proj", c.split(2 * inter, "2 x intermediate size"), hidden});
  out.push_back({prefix + ".down_proj", hidden, c.split(inter, "intermediate size")});
}

void routed_experts(const Config& c, std::int64_t hidden, std::int64_t inter, std::int64_t experts,
                    std::int64_t top_k, std::vector<ModelGemm>& out) {
  const std::int64_t local = c.split(experts, "the routed experts");  // expert parallel
  out.push_back({"mlp.experts.gate_up_proj", 2 * inter, hidden, local, experts, top_k});
  out.push_back({"mlp.experts.down_proj", hidden, inter, local, experts, top_k});
}

// DeepSeek-V2/V3: multi-head latent attention (low-rank q and kv), dense first layers, shared
// and routed experts.
std::vector<ModelGemm> deepseek(const Config& c) {
  std::vector<ModelGemm> g;
  const std::int64_t hidden = c.size("hidden_size"), heads = c.size("num_attention_heads");
  const std::int64_t nope = c.size("qk_nope_head_dim"), rope = c.size("qk_rope_head_dim"),
                     v = c.size("v_head_dim");
  const std::int64_t kv_lora = c.size("kv_lora_rank"), q_lora = c.size_or("q_lora_rank", 0);
  const std::int64_t q_heads = c.split(heads, "num_attention_heads");
  if (q_lora > 0) {
    g.push_back({"self_attn.fused_qkv_a_proj", q_lora + kv_lora + rope, hidden});
    g.push_back({"self_attn.q_b_proj", q_heads * (nope + rope), q_lora});
  } else {
    g.push_back({"self_attn.q_proj", q_heads * (nope + rope), hidden});
    g.push_back({"self_attn.kv_a_proj_with_mqa", kv_lora + rope, hidden});
  }
  g.push_back({"self_attn.kv_b_proj", q_heads * (nope + v), kv_lora});
  g.push_back({"self_attn.o_proj", hidden, q_heads * v});
  if (c.size_or("first_k_dense_replace", 0) > 0)
    dense_mlp(c, hidden, c.size("intermediate_size"), "mlp", g);
  const std::int64_t moe_inter = c.size("moe_intermediate_size");
  if (const std::int64_t shared = c.size_or("n_shared_experts", 0); shared > 0)
    dense_mlp(c, hidden, shared * moe_inter, "mlp.shared_experts", g);
  routed_experts(c, hidden, moe_inter, c.size("n_routed_experts"), c.size("num_experts_per_tok"),
                 g);
  return g;
}

// Llama-style attention (Llama, Mistral, Qwen2, Qwen3): fused QKV with grouped KV heads, which
// are replicated where there are fewer than ranks.
void gqa_attention(const Config& c, std::int64_t hidden, std::vector<ModelGemm>& g) {
  const std::int64_t heads = c.size("num_attention_heads");
  const std::int64_t kv_heads = c.size_or("num_key_value_heads", heads);
  const std::int64_t head_dim = c.size_or("head_dim", hidden / heads);
  const std::int64_t q = c.split(heads, "num_attention_heads");
  const std::int64_t kv = kv_heads >= c.tp() ? c.split(kv_heads, "num_key_value_heads") : 1;
  g.push_back({"self_attn.qkv_proj", (q + 2 * kv) * head_dim, hidden});
  g.push_back({"self_attn.o_proj", hidden, q * head_dim});
}

std::vector<ModelGemm> llama_like(const Config& c, bool moe) {
  std::vector<ModelGemm> g;
  const std::int64_t hidden = c.size("hidden_size");
  gqa_attention(c, hidden, g);
  if (!moe) {
    dense_mlp(c, hidden, c.size("intermediate_size"), "mlp", g);
    return g;
  }
  routed_experts(c, hidden, c.size("moe_intermediate_size"), c.size("num_experts"),
                 c.size("num_experts_per_tok"), g);
  return g;
}

// Qwen3-MoE keeps dense MLP layers where mlp_only_layers names them or decoder_sparse_step skips.
bool has_dense_layers(const json& j) {
  const auto only = j.find("mlp_only_layers");
  if (only != j.end() && only->is_array() && !only->empty()) return true;
  const auto step = j.find("decoder_sparse_step");
  return step != j.end() && step->is_number_integer() && step->get<std::int64_t>() > 1;
}

}  // namespace

std::vector<std::string> supported_model_types() {
  return {"deepseek_v3", "deepseek_v2", "qwen3", "qwen3_moe", "qwen2", "llama", "mistral"};
}

std::vector<ModelGemm> model_gemms(std::string_view config_json, int tp) {
  if (tp < 1) throw_invalid("tp", std::to_string(tp), "1 or more");
  json j;
  try {
    j = json::parse(config_json);
  } catch (const json::exception& e) {
    throw_invalid("config.json", "<text>", fmt::format("not valid JSON ({})", e.what()));
  }
  if (!j.is_object()) throw_invalid("config.json", "<text>", "not a JSON object");
  const auto type = j.find("model_type");
  if (type == j.end() || !type->is_string())
    throw_invalid("config.json \"model_type\"", type == j.end() ? "<missing>" : type->dump(),
                  "a string");
  const std::string t = type->get<std::string>();
  const Config c(j, tp);
  std::vector<ModelGemm> g;
  if (t == "deepseek_v3" || t == "deepseek_v2")
    g = deepseek(c);
  else if (t == "qwen3" || t == "qwen2" || t == "llama" || t == "mistral")
    g = llama_like(c, false);
  else if (t == "qwen3_moe") {
    g = llama_like(c, true);
    if (has_dense_layers(j))
      dense_mlp(c, c.size("hidden_size"), c.size("intermediate_size"), "mlp", g);
  } else {
    throw_invalid("config.json \"model_type\"", t,
                  fmt::format("one of {}", fmt::join(supported_model_types(), ", ")));
  }
  for (const ModelGemm& m : g)
    if (m.k % 16 != 0)
      throw_invalid(
          "tp", std::to_string(tp),
          fmt::format("leaves {} with K = {} per rank, not a multiple of 16 (FP8 GEMMs need it)",
                      m.name, m.k));
  return g;
}

}  // namespace fp8jit

// Runtime::model_kernels: model_gemms and the runtime's selection together.
namespace fp8jit {

std::vector<Runtime::ModelKernel> Runtime::model_kernels(std::string_view config_json,
                                                         const std::vector<std::int64_t>& ms,
                                                         int tp, const GemmProblem& problem) const {
  const std::vector<ModelGemm> gemms = model_gemms(config_json, tp);
  if (ms.empty()) throw_invalid("ms", "<empty>", "at least one batch size");
  std::vector<ModelKernel> out;
  std::map<std::pair<std::string, std::string>, std::size_t> seen;  // (what, kernel) -> entry
  const auto add = [&](const std::string& what, const KernelSpec& spec, std::int64_t m) {
    const auto [it, fresh] = seen.emplace(std::pair{what, spec_name(spec)}, out.size());
    if (fresh) out.push_back({what, spec, m, m});
    ModelKernel& k = out[it->second];
    k.m_min = std::min(k.m_min, m);
    k.m_max = std::max(k.m_max, m);
  };
  GemmProblem dense = problem, contiguous = problem, masked = problem;
  dense.layout = GemmLayout::dense;
  contiguous.layout = GemmLayout::contiguous;
  masked.layout = GemmLayout::masked;
  for (const std::int64_t m : ms) {
    for (const ModelGemm& g : gemms) {
      if (!g.grouped()) {
        add(g.name, select(dense, {m, g.n, g.k}), m);
        continue;
      }
      const std::int64_t rows = g.expected_m(m);
      add(g.name + " (contiguous)", select_grouped(contiguous, g.groups, rows, g.n, g.k), m);
      add(g.name + " (masked)", select_grouped(masked, g.groups, rows, g.n, g.k), m);
    }
  }
  // The activations' 1x128 quantize: one kernel whatever the shape (16-byte aligned rows).
  QuantizeProblem q;
  q.input = problem.out;  // the activations' dtype: what the GEMMs write
  q.format = problem.a_format;
  add("quantize (activations, 1x128)", default_quantize_spec(q, 16), ms.front());
  return out;
}

}  // namespace fp8jit
