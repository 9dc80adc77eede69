// fp8jit gemm --groups G --layout contiguous|masked|indexed: one grouped (mixture-of-experts) GEMM on the
// GPU over a ragged, seeded routing, checked group by group against the float64 reference (rows
// outside every group must stay poisoned), timed.
#include <fmt/format.h>

#include <algorithm>

#include "autotune/gemm_tuning.hpp"
#include "autotune/grouped_reference.hpp"
#include "autotune/timer.hpp"
#include "runtime/jit/driver.hpp"
#include "tools/cli.hpp"
#include "tools/gemm_command.hpp"
#include "tools/grouped_operands.hpp"

namespace fp8jit::cli {
namespace {

// The option a grouped_shape_problem() field came from.
std::string option_of(const std::string& field) {
  if (field == "groups") return "--groups";
  if (field == "expected_m") return "--expected-m";
  if (field == "groups*m") return "--groups/--m";
  if (field == "groups*n") return "--groups/--n";
  return "--" + field;
}

}  // namespace

std::optional<GroupedShape> grouped_shape_from(const GemmOptions& o) {
  const GemmLayout layout =
      *parse_gemm_layout(o.layout);  // admitted by the option's IsMember check
  if (layout == GemmLayout::dense) {
    if (o.groups > 0)
      throw CLI::ValidationError(
          "--groups", fmt::format("{} needs a grouped layout: add --layout contiguous, masked or "
                                  "indexed (a dense GEMM has no groups)",
                                  o.groups));
    if (o.expected_m >= 0)
      throw CLI::ValidationError(
          "--expected-m",
          "only grouped GEMMs take it: add --layout contiguous|masked|indexed and --groups");
    return std::nullopt;
  }
  if (o.groups == 0)
    throw CLI::ValidationError(
        "--groups",
        fmt::format("required with --layout {} (the number of groups, i.e. experts)", o.layout));
  if (o.bias)
    throw CLI::ValidationError("--bias",
                               "grouped GEMMs have no bias: drop it or use --layout dense");
  if (o.scale == "group")
    throw CLI::ValidationError("--scale",
                               "group: grouped GEMMs take tensor, rowwise or block scaling");
  const GroupedShape s{layout, o.groups, o.m, o.n, o.k, std::max<std::int64_t>(0, o.expected_m)};
  if (const ShapeProblem p = grouped_shape_problem(s); !p.field.empty())
    throw CLI::ValidationError(option_of(p.field), p.why);
  return s;
}

int run_grouped_gemm(const GemmOptions& o, const GroupedShape& s) {
  const auto overrides = config_overrides(o.config);
  GemmProblem problem = problem_from(o);
  problem.layout = s.layout;
  GroupedGemmArgs g = grouped_gemm_args(problem, s);
  g.scale_a_layout = *parse_scale_layout(o.scale_layout_a);  // admitted by the option's check
  require_gpu();
  Runtime rt;
  const GroupedOperands operands = make_grouped_operands(rt, g, 1);
  const KernelSpec spec = with_overrides(rt.select(g), overrides);
  const GroupedReference ref(g);
  ref.poison_d();  // rows outside every group must keep it
  rt.grouped_gemm(g, spec, nullptr);
  const GroupedCheck check = ref.check();
  const double tol = gemm_tolerance(g);
  const double ms = time_median_ms([&] { rt.grouped_gemm(g, spec, nullptr); }, 3, o.iters);
  // Only the groups' rows are work: padding rows (masked) and empty groups cost nothing useful.
  const double tflops =
      2.0 * static_cast<double>(ref.valid_rows()) * g.n * g.k / (ms * 1e-3) * 1e-12;
  fmt::print(
      "{} [{}, {} groups, {} of {} rows x {} x {}, expected M {}] on {}: {:.4f} ms, {:.1f} "
      "TFLOP/s, "
      "worst group relative error {:.2e} ({} {:.0e})\n",
      spec_name(spec), to_string(g.layout), g.groups, ref.valid_rows(), ref.total_rows(), g.n, g.k,
      g.expected_m, driver::device_info().name, ms, tflops, check.worst_error,
      check.worst_error <= tol ? "within" : "ABOVE", tol);
  const std::string failure = check.failure(tol);
  if (!failure.empty()) report("gemm", failure);
  return failure.empty() ? 0 : 1;
}

}  // namespace fp8jit::cli
