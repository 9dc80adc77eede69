// The dequantize family: config space, rules, names and source.
#include <fmt/format.h>

#include "fp8jit/error.hpp"
#include "generator/families/elementwise.hpp"
#include "generator/family.hpp"

namespace fp8jit {
namespace {

using namespace elementwise;

std::string check(const KernelSpec& spec) { return check_config(spec); }

std::string name_of(const KernelSpec& spec) {
  return fmt::format("dequant_sm90_{}_{}_{}{}", spec.s("format"), spec.s("output"),
                     spec.s("granularity"), config_suffix(spec));
}

std::string render_body(const KernelSpec& spec) {
  const DequantizeProblem p = dequantize_problem_of(spec);
  const ElementwiseConfig c = elementwise_config_of(spec);
  return fmt::format(
      "using Strategy = Dequantizer<{}, {}, {}, /*VEC=*/{}, /*THREADS=*/{}, /*UNROLL=*/{}>;\n\n"
      "extern \"C\" __global__ void __launch_bounds__({}) fp8jit_dequantize("
      "const __grid_constant__ DequantParams p) {{\n"
      "  enter_dependent_grid();\n  Strategy::run(p);\n}}\n",
      dev_fp8(p.format), dev_elem(p.output), dev_gran(p.granularity), c.vec, c.threads, c.unroll,
      c.threads);
}

std::vector<std::string> entry_points(const KernelSpec&) { return {"fp8jit_dequantize"}; }
int dynamic_smem(const KernelSpec&) { return 0; }
int block_threads(const KernelSpec& spec) { return static_cast<int>(spec.i("threads")); }

FamilyDef make_family() {
  FamilyDef f;
  f.name = "dequantize";
  f.min_arch = 89;  // FP8 conversions (cvt.rn.satfinite.e4m3x2) exist from sm_89
  f.sm90a_only = false;
  f.generation = 1;  // FamilyDef::generation: bump when a kernel change re-times its configs
  f.header = "fp8jit/quant/dequantize.cuh";
  f.params = {
      {"format", false, {"e4m3", "e5m2"}, "FP8 format of the input"},
      {"output", false, {"bf16", "fp16", "fp32"}, "element type of the output"},
      {"granularity", false, {"tensor", "row", "1x128", "128x128"}, "elements sharing one scale"},
  };
  add_config_params(f.params);
  f.check = check;
  f.name_of = name_of;
  f.render_body = render_body;
  f.entry_points = entry_points;
  f.dynamic_smem = dynamic_smem;
  f.block_threads = block_threads;
  return f;
}

}  // namespace

const FamilyDef& dequantize_family() {
  static const FamilyDef family = make_family();
  return family;
}

KernelSpec make_dequantize_spec(const DequantizeProblem& p, const ElementwiseConfig& c) {
  KernelSpec spec{"dequantize",
                  {{"format", std::string(to_string(p.format))},
                   {"output", std::string(to_string(p.output))},
                   {"granularity", std::string(to_string(p.granularity))},
                   {"vec", std::int64_t{c.vec}},
                   {"threads", std::int64_t{c.threads}},
                   {"unroll", std::int64_t{c.unroll}}}};
  validate_spec(spec);
  return spec;
}

DequantizeProblem dequantize_problem_of(const KernelSpec& spec) {
  if (spec.family != "dequantize") throw_invalid("family", spec.family, "expected dequantize");
  return {format_param(spec, "format"), dtype_param(spec, "output"), granularity_param(spec)};
}

}  // namespace fp8jit
