// fp8jit gemm: one scaled FP8 GEMM on the GPU, checked against the float64 reference, timed.
#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"
#include "runtime/driver.hpp"
#include "autotune/gemm_tuning.hpp"
#include "tools/cli.hpp"
#include "tools/operands.hpp"
#include "autotune/timer.hpp"

namespace fp8jit::cli {
namespace {

// `--config`: a JSON object of gemm config parameters (e.g. {"block_n":160,"stages":5}) whose
// fields replace the runtime's choice. Read before anything needs a GPU, so a typo fails at once.
std::map<std::string, std::int64_t> config_overrides(const std::optional<std::string>& config) {
  std::map<std::string, std::int64_t> fields;
  if (!config) return fields;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*config);
  } catch (const nlohmann::json::exception& e) {
    throw_invalid("--config", *config, std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) throw_invalid("--config", *config, "expected a JSON object such as {\"block_n\":160}");
  std::vector<std::string> names;  // the gemm family's config parameters
  for (const ParamDef& d : gemm_family().params)
    if (d.is_config) names.push_back(d.name);
  for (const auto& [key, value] : j.items()) {
    if (std::find(names.begin(), names.end(), key) == names.end())
      throw_invalid("--config key", key, fmt::format("not a gemm config parameter: {}", fmt::join(names, ", ")));
    if (!value.is_number_integer()) throw_invalid("--config " + key, value.dump(), "expected an integer");
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

}  // namespace

int cmd_gemm(const Args& args) {
  const auto overrides = config_overrides(args.get("config"));
  if (!driver::available()) throw Error(ErrorKind::driver, "fp8jit gemm needs a GPU: " + driver::unavailable_reason());
  GemmArgs g;
  g.m = args.get_int("m", 4096);
  g.n = args.get_int("n", 7168);
  g.k = args.get_int("k", 7168);
  const std::string scale = args.get_or("scale", "block"), out = args.get_or("out", "bf16");
  auto mode = parse_scale_mode(scale);
  if (!mode) throw_invalid("--scale", scale, "tensor, rowwise, block or group");
  auto dtype = parse_dtype(out);
  if (!dtype) throw_invalid("--out", out, "bf16, fp16 or fp32");
  auto fa = parse_fp8_format(args.get_or("a-format", "e4m3")), fb = parse_fp8_format(args.get_or("b-format", "e4m3"));
  if (!fa || !fb) throw_invalid("--a-format/--b-format", args.get_or("a-format", "e4m3") + "/" + args.get_or("b-format", "e4m3"), "e4m3 or e5m2");
  g.scale_mode = *mode;
  g.d_dtype = *dtype;
  g.a_format = *fa;
  g.b_format = *fb;
  g.fast_accum = args.flag("fast-accum");
  const int iters = static_cast<int>(args.get_int("iters", 20));
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || iters <= 0)
    throw_invalid("--m/--n/--k/--iters", fmt::format("{}/{}/{}/{}", g.m, g.n, g.k, iters), "must be positive");
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
  const double ms = time_median_ms([&] { rt.gemm(g, spec, nullptr); }, 3, iters);
  const double tflops = 2.0 * g.m * g.n * g.k / (ms * 1e-3) * 1e-12;
  fmt::print("{} [{}x{}x{}] on {}: {:.4f} ms, {:.1f} TFLOP/s, relative error {:.2e} ({} {:.0e})\n", kernel, g.m, g.n,
             g.k, driver::device_info().name, ms, tflops, err, err <= tol ? "within" : "ABOVE", tol);
  return err <= tol ? 0 : 1;
}

}  // namespace fp8jit::cli

namespace fp8jit::cli {

// The heuristic's gemm spec for a shape, as JSON (for `fp8jit compile --spec`).
int cmd_select_gemm(const Args& args) {
  GemmProblem p;
  const std::string scale = args.get_or("scale", "block"), out = args.get_or("out", "bf16");
  auto mode = parse_scale_mode(scale);
  auto dtype = parse_dtype(out);
  if (!mode) throw_invalid("--scale", scale, "tensor, rowwise, block or group");
  if (!dtype) throw_invalid("--out", out, "bf16, fp16 or fp32");
  p.scale = *mode;
  p.out = *dtype;
  p.fast_accum = args.flag("fast-accum");
  const std::int64_t m = args.get_int("m", 4096), n = args.get_int("n", 7168), k = args.get_int("k", 7168);
  if (m <= 0 || n <= 0 || k <= 0) throw_invalid("--m/--n/--k", fmt::format("{}/{}/{}", m, n, k), "must be positive");
  int sms = 132, smem = 232448;
  if (driver::available()) {
    sms = driver::device_info().sm_count;
    smem = driver::device_info().max_smem_optin;
  }
  fmt::print("{}\n", spec_to_json(default_gemm_spec(p, m, n, k, sms, smem)));
  return 0;
}

}  // namespace fp8jit::cli
