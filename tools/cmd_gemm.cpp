// fp8jit gemm: one scaled FP8 GEMM on the GPU, checked against the float64 reference, timed.
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"
#include "runtime/jit/driver.hpp"
#include "autotune/gemm_tuning.hpp"
#include "tools/cli.hpp"
#include "tools/options.hpp"
#include "tools/operands.hpp"
#include "autotune/timer.hpp"

namespace fp8jit::cli {
namespace {

// `--config`: a JSON object of gemm config parameters (e.g. {"block_n":160,"stages":5}) whose
// fields replace the runtime's choice. Read before anything needs a GPU, so a typo fails at once.
std::map<std::string, std::int64_t> config_overrides(const std::string& config) {
  std::map<std::string, std::int64_t> fields;
  if (config.empty()) return fields;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(config);
  } catch (const nlohmann::json::exception& e) {
    throw_invalid("--config", config, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) throw_invalid("--config", config, "expected a JSON object such as {\"block_n\":160}");
  std::vector<std::string> names;  // the gemm family's config parameters
  for (const ParamDef& d : gemm_family().params)
    if (d.is_config) names.push_back(d.name);
  for (const auto& [key, value] : j.items()) {
    if (std::find(names.begin(), names.end(), key) == names.end())
      throw_invalid("--config key", key, fmt::format("not a gemm config parameter: {}", fmt::join(names, ", ")));
    if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<std::uint64_t>() > INT64_MAX))
      throw_invalid("--config " + key, value.dump(), "expected an integer");
    fields[key] = value.get<std::int64_t>();
  }
  return fields;
}

// The variant to run: the runtime's choice with the overrides applied, validated (the error
// names the rule a combination breaks: registers, scale blocks, shared memory).
KernelSpec chosen_spec(Runtime& rt, const GemmArgs& g, const std::map<std::string, std::int64_t>& overrides) {
  KernelSpec spec = rt.select(g);
  for (const auto& [key, value] : overrides) spec.params[key] = value;
  validate_spec(spec);
  return spec;
}


struct GemmOptions {
  std::int64_t m = 4096, n = 7168, k = 7168;
  std::string scale = "block", out = "bf16", a_format = "e4m3", b_format = "e4m3", config;
  bool fast_accum = false;
  int iters = 20;
};

GemmArgs gemm_args_from(const GemmOptions& o) {
  GemmArgs g;
  g.m = o.m, g.n = o.n, g.k = o.k;
  g.scale_mode = *parse_scale_mode(o.scale);  // admitted by the options' IsMember checks
  g.d_dtype = *parse_dtype(o.out);
  g.a_format = *parse_fp8_format(o.a_format);
  g.b_format = *parse_fp8_format(o.b_format);
  g.fast_accum = o.fast_accum;
  if (g.a_format == Fp8Format::e5m2 && g.b_format == Fp8Format::e5m2)
    throw_invalid("--a-format/--b-format", "e5m2/e5m2", "at least one operand must be e4m3");
  if (g.fast_accum && (g.scale_mode == ScaleMode::block || g.scale_mode == ScaleMode::group))
    throw_invalid("--fast-accum", "with --scale " + o.scale, "only tensor and rowwise scaling accumulate without promotion");
  return g;
}

int gemm(const GemmOptions& o) {
  const auto overrides = config_overrides(o.config);
  GemmArgs g = gemm_args_from(o);
  require_gpu();
  Runtime rt;
  GemmOperands operands = make_gemm_operands(rt, g);
  DeviceBuffer& d = *operands.d;
  DeviceBuffer ref(g.m * g.n * 8);
  d.fill(0xFF);  // NaN in every output type: an unwritten element cannot pass
  const KernelSpec spec = chosen_spec(rt, g, overrides);
  const std::string kernel = spec_name(spec);
  rt.gemm(g, spec, nullptr);
  driver::check(driver::api().cuCtxSynchronize(), "gemm");
  reference::gemm_on_device(g, static_cast<double*>(ref.get()), nullptr);
  std::vector<unsigned char> dh(d.size());
  std::vector<double> rh(g.m * g.n);
  d.download(dh.data(), dh.size());
  ref.download(rh.data(), ref.size());
  const double err = reference::relative_error(dh.data(), g.n, g.d_dtype, rh.data(), g.m, g.n);
  const double tol = gemm_tolerance(g);
  const double ms = time_median_ms([&] { rt.gemm(g, spec, nullptr); }, 3, o.iters);
  const double tflops = 2.0 * g.m * g.n * g.k / (ms * 1e-3) * 1e-12;
  fmt::print("{} [{}x{}x{}] on {}: {:.4f} ms, {:.1f} TFLOP/s, relative error {:.2e} ({} {:.0e})\n", kernel, g.m, g.n,
             g.k, driver::device_info().name, ms, tflops, err, err <= tol ? "within" : "ABOVE", tol);
  return err <= tol ? 0 : 1;
}

// The heuristic's gemm spec for a shape, as JSON (for `fp8jit compile --spec`).
int select_gemm(const GemmOptions& o) {
  const GemmArgs g = gemm_args_from(o);
  GemmProblem p;
  p.scale = g.scale_mode;
  p.out = g.d_dtype;
  p.fast_accum = g.fast_accum;
  int sms = 132, smem = 232448;  // an H100 SXM where no GPU can be asked
  if (driver::available()) {
    sms = driver::device_info().sm_count;
    smem = driver::device_info().max_smem_optin;
  }
  fmt::print("{}\n", spec_to_json(default_gemm_spec(p, o.m, o.n, o.k, sms, smem)));
  return 0;
}

// The shape and problem options that `gemm` and `select-gemm` share.
void add_problem_options(CLI::App* sub, GemmOptions& o) {
  sub->add_option("--m", o.m, "rows of A and D")->check(gemm_dim('m'))->capture_default_str();
  sub->add_option("--n", o.n, "rows of B, columns of D")->check(gemm_dim('n'))->capture_default_str();
  sub->add_option("--k", o.k, "the reduced dimension (a multiple of 16)")->check(gemm_dim('k'))->capture_default_str();
  add_choice(sub, "--scale", o.scale, {"block", "rowwise", "tensor", "group"}, "scale mode");
  add_choice(sub, "--out", o.out, {"bf16", "fp16", "fp32"}, "output dtype");
  sub->add_flag("--fast-accum", o.fast_accum, "accumulate in the tensor cores only (tensor and rowwise scaling)");
}

}  // namespace

void add_gemm_commands(CLI::App& app) {
  auto* g = app.add_subcommand("gemm", "GPU: one scaled FP8 GEMM, checked against a float64 reference, in TFLOP/s");
  auto go = std::make_shared<GemmOptions>();
  add_problem_options(g, *go);
  add_choice(g, "--a-format", go->a_format, {"e4m3", "e5m2"}, "FP8 format of A");
  add_choice(g, "--b-format", go->b_format, {"e4m3", "e5m2"}, "FP8 format of B");
  g->add_option("--iters", go->iters, "timed iterations")->check(integer_in(1, 100000))->capture_default_str();
  g->add_option("--config", go->config,
                "JSON of gemm config fields that replace the runtime's choice, e.g. '{\"block_n\":160,\"stages\":5}'");
  on_run(g, [=] { return gemm(*go); });

  auto* s = app.add_subcommand("select-gemm", "the heuristic's gemm spec for a shape, as JSON (no GPU needed)");
  auto so = std::make_shared<GemmOptions>();
  add_problem_options(s, *so);
  on_run(s, [=] { return select_gemm(*so); });
}

}  // namespace fp8jit::cli
