// fp8jit gemm: one scaled FP8 GEMM on the GPU, checked against the float64 reference, timed;
// fp8jit select-gemm: the spec the heuristic (or, with --db, the tuning database) picks. Grouped
// GEMMs (--groups, --layout) are run by cmd_grouped_gemm.cpp.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "autotune/gemm_tuning.hpp"
#include "autotune/lookup.hpp"
#include "autotune/timer.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/reference.hpp"
#include "generator/family.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/dims.hpp"
#include "tools/cli.hpp"
#include "tools/gemm_command.hpp"
#include "tools/operands.hpp"
#include "tools/options.hpp"

namespace fp8jit::cli {

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
  for (const ParamDef& d : gemm_family().params)  // build choices (the epilogue) follow from the shape
    if (d.is_config && !d.build_choice) names.push_back(d.name);
  for (const auto& [key, value] : j.items()) {
    if (std::find(names.begin(), names.end(), key) == names.end())
      throw_invalid("--config key", key, fmt::format("not a gemm config parameter: {}", fmt::join(names, ", ")));
    if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<std::uint64_t>() > INT64_MAX))
      throw_invalid("--config " + key, value.dump(), "expected an integer");
    fields[key] = value.get<std::int64_t>();
  }
  return fields;
}

KernelSpec with_overrides(KernelSpec spec, const std::map<std::string, std::int64_t>& overrides) {
  for (const auto& [key, value] : overrides) spec.params[key] = value;
  // A parameter at the value its absence means is held absent, as spec_from_json holds it, so
  // that the spec's name and hash are the ones the runtime computes.
  for (const ParamDef& d : gemm_family().params)
    if (const auto it = spec.params.find(d.name);
        d.is_config && it != spec.params.end() && elided(d, it->second))
      spec.params.erase(it);
  validate_spec(spec);
  return spec;
}

GemmProblem problem_from(const GemmOptions& o) {
  GemmProblem p;
  p.scale = *parse_scale_mode(o.scale);  // admitted by the options' IsMember checks
  p.out = *parse_dtype(o.out);
  p.a_format = *parse_fp8_format(o.a_format);
  p.b_format = *parse_fp8_format(o.b_format);
  p.fast_accum = o.fast_accum;
  p.bias = o.bias;
  if (p.a_format == Fp8Format::e5m2 && p.b_format == Fp8Format::e5m2)
    throw_invalid("--a-format/--b-format", "e5m2/e5m2", "at least one operand must be e4m3");
  if (p.fast_accum && (p.scale == ScaleMode::block || p.scale == ScaleMode::group))
    throw_invalid("--fast-accum", "with --scale " + o.scale,
                  "only tensor and rowwise scaling accumulate without promotion");
  return p;
}

GpuLimits gpu_limits() {
  if (!driver::available()) return {};
  const driver::DeviceInfo info = driver::device_info();
  return {info.sm_count, info.max_smem_optin};
}

namespace {

GemmArgs gemm_args_from(const GemmOptions& o) {
  const GemmProblem p = problem_from(o);
  GemmArgs g;
  g.m = o.m, g.n = o.n, g.k = o.k;
  g.scale_mode = p.scale;
  g.d_dtype = p.out;
  g.a_format = p.a_format;
  g.b_format = p.b_format;
  g.fast_accum = p.fast_accum;
  g.scale_a_layout = *parse_scale_layout(o.scale_layout_a);  // admitted by the option's check
  return g;
}

int gemm(const GemmOptions& o) {
  if (const std::optional<GroupedShape> s = grouped_shape_from(o)) return run_grouped_gemm(o, *s);
  const auto overrides = config_overrides(o.config);
  GemmArgs g = gemm_args_from(o);
  require_gpu();
  Runtime rt;
  GemmOperands operands = make_gemm_operands(rt, g, o.bias);
  DeviceBuffer& d = *operands.d;
  DeviceBuffer ref(g.m * g.n * 8);
  d.fill(0xFF);  // NaN in every output type: an unwritten element cannot pass
  // An overridden tile may split K where the selected one did not: the kernel a launch of it
  // builds.
  const int sms =
      g.max_sms > 0 ? std::min(g.max_sms, gpu_limits().sm_count) : gpu_limits().sm_count;
  const KernelSpec spec =
      overrides.empty()
          ? rt.select(g)
          : with_gemm_epilogue(with_overrides(rt.select(g), overrides), g.m, g.n, g.k, sms);
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

// The heuristic's gemm spec for a shape, dense or grouped, as JSON (for `fp8jit compile --spec`);
// with --db, the one the runtime would take from that tuning database on this GPU, its source on
// stderr.
int select_gemm(const GemmOptions& o) {
  const std::optional<GroupedShape> grouped = grouped_shape_from(o);
  GemmProblem p = problem_from(o);
  if (grouped) p.layout = grouped->layout;
  auto pick = [&](const GpuKey& gpu, int smem, const std::string& db, TunePolicy policy) {
    const std::string shipped = RuntimeOptions::from_settings().shipped_tuning_dir;
    if (grouped)
      return lookup_grouped_gemm(p, grouped->groups, expected_rows(*grouped), o.n, o.k, db, policy,
                                 gpu, smem, shipped);
    GemmLookup found = lookup_gemm(p, o.m, o.n, o.k, db, policy, gpu, smem, shipped);
    found.spec =
        with_gemm_epilogue(found.spec, o.m, o.n, o.k, gpu.sm_count);  // as the runtime builds it
    return found;
  };
  if (o.db.empty()) {
    const GpuLimits limits = gpu_limits();
    fmt::print("{}\n",
               spec_to_json(
                   pick({"", 9, 0, limits.sm_count}, limits.smem_bytes, "", TunePolicy::off).spec));
    return 0;
  }
  require_gpu();
  const GemmLookup found =
      pick(current_gpu_key(), driver::device_info().max_smem_optin, o.db, TunePolicy::cached);
  report("select-gemm", fmt::format("{} from {}", spec_name(found.spec), to_string(found.source)));
  fmt::print("{}\n", spec_to_json(found.spec));
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
  // A value after it (--bias=2x) is refused, not read as a count.
  sub->add_flag("--bias", o.bias,
                "add a bias over the columns (random, in the output dtype; dense GEMMs)")
      ->disable_flag_override();
  add_choice(sub, "--layout", o.layout, {"dense", "contiguous", "masked", "indexed"},
             "grouped (mixture-of-experts) GEMMs: contiguous (--m rows split among the groups), "
             "indexed (the same by a group index per row, each group from a multiple of 128 rows) or "
             "masked (--m rows per group, M_max); needs --groups");
  sub->add_option("--groups", o.groups,
                  "groups (experts) of a grouped GEMM, each with its own N x K weights")
      ->check(integer_in(1, kMaxGroups));
  sub->add_option(
         "--expected-m", o.expected_m,
         "rows per group the kernel is chosen for (default: m / groups contiguous, m masked)")
      ->check(integer_in(0, kMaxDim));
}

}  // namespace

void add_gemm_commands(CLI::App& app) {
  auto* g = app.add_subcommand("gemm", "GPU: one scaled FP8 GEMM, checked against a float64 reference, in TFLOP/s");
  auto go = std::make_shared<GemmOptions>();
  add_problem_options(g, *go);
  add_choice(g, "--a-format", go->a_format, {"e4m3", "e5m2"}, "FP8 format of A");
  add_choice(g, "--b-format", go->b_format, {"e4m3", "e5m2"}, "FP8 format of B");
  add_choice(g, "--scale-layout-a", go->scale_layout_a, {"col_major_tma", "row_major"},
             "layout of A's scales (block and group scaling: its 1x128 groups): col_major_tma, read "
             "by TMA, or row_major (DeepSeek-V3 kernel.py's act_quant, fp8jit.quantize's default), "
             "copied by the kernel's producer warp");
  g->add_option("--iters", go->iters, "timed iterations")->check(integer_in(1, 100000))->capture_default_str();
  g->add_option("--config", go->config,
                "JSON of gemm config fields that replace the runtime's choice, e.g. '{\"block_n\":160,\"stages\":5}'");
  on_run(g, [=] { return gemm(*go); });

  auto* s = app.add_subcommand("select-gemm", "the heuristic's gemm spec for a shape, as JSON (no GPU needed)");
  auto so = std::make_shared<GemmOptions>();
  add_problem_options(s, *so);
  s->add_option("--db", so->db,
                "GPU: the spec the runtime takes from this tuning database for this GPU (exact "
                "row, nearest M, else "
                "the heuristic); its source is printed on stderr")
      ->check(non_empty());
  on_run(s, [=] { return select_gemm(*so); });
}

}  // namespace fp8jit::cli
