// The quantize family: config space, rules, names and source.
#include <fmt/format.h>

#include <algorithm>

#include "fp8jit/error.hpp"
#include "generator/families/elementwise.hpp"
#include "generator/family.hpp"

namespace fp8jit {
namespace {

using namespace elementwise;

enum class Strategy { stream, row, tile };

Strategy strategy_of(Granularity g, bool transpose) {
  if (g == Granularity::block128 || transpose) return Strategy::tile;
  if (g == Granularity::row) return Strategy::row;
  return Strategy::stream;
}

Strategy strategy_of(const KernelSpec& spec) {
  return strategy_of(granularity_param(spec), spec.i("transpose") != 0);
}

// Per-tensor scaling, and per-row scaling with a transposed output (scaled per column of x), find
// their amaxes in a pass of their own before the cast, and turn them into scales after it.
bool needs_amax_pass(const KernelSpec& spec) {
  const Granularity g = granularity_param(spec);
  return g == Granularity::tensor || (g == Granularity::row && spec.i("transpose") != 0);
}

std::string check(const KernelSpec& spec) {
  if (std::string why = check_config(spec); !why.empty()) return why;
  const Granularity g = granularity_param(spec);
  if (spec.s("arithmetic") == "deepseek" &&
      (g != Granularity::group128 || spec.i("transpose") || spec.s("format") != "e4m3"))
    return "arithmetic = deepseek reproduces DeepSeek-V3's act_quant: granularity 1x128, format e4m3, "
           "transpose 0";
  if (spec.i("column_sums") != 0 && (!spec.i("transpose") || spec.s("arithmetic") != "ieee"))
    return "column_sums = 1 sums the columns in the transposed cast's 128x128 tiles: transpose = 1 "
           "and arithmetic = ieee";
  // The tile strategy reads `unroll` only in the amax pass of per-tensor scaling: other values
  // would be duplicates of unroll = 1.
  if (strategy_of(spec) == Strategy::tile && g != Granularity::tensor && spec.i("unroll") != 1)
    return fmt::format("unroll = {} has no effect on the tile strategy; use 1", spec.i("unroll"));
  return "";
}

std::string name_of(const KernelSpec& spec) {
  return fmt::format("quant_sm90_{}_{}_{}{}{}{}{}", spec.s("input"), spec.s("format"),
                     spec.s("granularity"), spec.i("transpose") ? "_tr" : "",
                     spec.s("arithmetic") == "deepseek" ? "_ds" : "",
                     spec.i("column_sums") ? "_cs" : "", config_suffix(spec));
}

std::string render_body(const KernelSpec& spec) {
  const QuantizeProblem p = quantize_problem_of(spec);
  const ElementwiseConfig c = elementwise_config_of(spec);
  const Strategy s = strategy_of(spec);
  const char *e = dev_elem(p.input), *f = dev_fp8(p.format), *g = dev_gran(p.granularity);
  std::string out;
  if (s == Strategy::stream)
    out = fmt::format(
        "using Strategy = StreamQuantizer<{}, {}, {}, /*VEC=*/{}, /*THREADS=*/{}, /*UNROLL=*/{}{}>;\n", e, f, g,
        c.vec, c.threads, c.unroll, p.deepseek_arithmetic ? ", /*DEEPSEEK=*/true" : "");
  else if (s == Strategy::row)
    out = fmt::format("using Strategy = RowQuantizer<{}, {}, /*VEC=*/{}, /*THREADS=*/{}, /*UNROLL=*/{}>;\n",
                      e, f, c.vec, c.threads, c.unroll);
  else
    out = fmt::format(
        "using Strategy = TileQuantizer<{}, {}, {}, /*TRANSPOSE=*/{}, /*VEC=*/{}, "
        "/*THREADS=*/{}{}>;\n",
        e, f, g, p.transpose ? "true" : "false", c.vec, c.threads,
        p.column_sums ? ", /*COLSUM=*/true" : "");
  const std::string head = fmt::format(
      "extern \"C\" __global__ void __launch_bounds__({})", c.threads);
  const bool per_tensor = p.granularity == Granularity::tensor;
  if (needs_amax_pass(spec) && per_tensor) {
    out += fmt::format(
        "using AmaxPass = StreamQuantizer<{}, {}, kTensor, {}, {}, {}>;\n\n"
        "{} fp8jit_amax(const __grid_constant__ QuantParams p) {{\n"
        "  enter_dependent_grid();\n  AmaxPass::amax_pass(p);\n}}\n",
        e, f, c.vec, c.threads, c.unroll, head);
  } else if (needs_amax_pass(spec)) {
    out += fmt::format(
        "\n{} fp8jit_amax(const __grid_constant__ QuantParams p) {{\n"
        "  enter_dependent_grid();\n  Strategy::row_col_amax(p);\n}}\n",
        head);
  }
  out += "\n";
  // Column sums: an explicit minimum of CTAs a multiprocessor, or ptxas picks fewer registers than
  // the fold needs and spills (sm_90a, NVRTC 13: per row, bf16, vec 8, 256 threads 48 registers
  // and 8 bytes of local memory; with a minimum of 2, 62 and none). 2 where the tile is cast as it
  // is loaded (per tensor, per row: at most 128 registers a thread at 256 threads), 1 where the
  // values stay in registers (1x128, 128x128: 100-124 at 256 threads), so every config of the
  // space compiles without local memory.
  const std::string quant_head =
      p.column_sums ? fmt::format("extern \"C\" __global__ void __launch_bounds__({}, {})", c.threads,
                                  per_tensor || p.granularity == Granularity::row ? 2 : 1)
                    : head;
  if (s == Strategy::tile)
    out += quant_head + " fp8jit_quantize(const __grid_constant__ QuantParams p) {\n"
                  "  extern __shared__ float smem[];\n  enter_dependent_grid();\n  Strategy::run(p, smem);\n}\n";
  else
    out += head + " fp8jit_quantize(const __grid_constant__ QuantParams p) {\n"
                  "  enter_dependent_grid();\n  Strategy::run(p);\n}\n";
  if (needs_amax_pass(spec))
    out += fmt::format(
        "\nextern \"C\" __global__ void fp8jit_finalize(const __grid_constant__ QuantParams p) {{\n"
        "  enter_dependent_grid();\n  {}<{}>(p);\n}}\n",
        per_tensor ? "finalize_tensor_scale" : "finalize_row_col_scales", f);
  if (p.column_sums)
    out +=
        "\nextern \"C\" __global__ void __launch_bounds__(kColumnSumThreads) "
        "fp8jit_colsum(const __grid_constant__ QuantParams p) {\n"
        "  enter_dependent_grid();\n  add_column_partials(p);\n}\n";
  return out;
}

// Column sums add the tiles' partial sums last (fp8jit_colsum).
std::vector<std::string> entry_points(const KernelSpec& spec) {
  std::vector<std::string> out;
  if (needs_amax_pass(spec))
    out = {"fp8jit_amax", "fp8jit_quantize", "fp8jit_finalize"};
  else
    out = {"fp8jit_quantize"};
  if (spec.i("column_sums")) out.push_back("fp8jit_colsum");
  return out;
}

// Mirrors TileQuantizer::smem_bytes(): per-tensor and per-row scaling stage the 128x128 tile's FP8
// codes (rows padded to 132) and row/column reciprocals; 1x128 and 128x128 with 256 threads or
// more the codes, column reciprocals and scratch; with fewer the 128x129 float tile, row/column
// reciprocals and scratch. Column sums from registers reuse that memory for their threads' partial
// sums, one float per column for each of the threads * vec / 128 rows a pass covers, grown where
// those are more; the float tile is summed where it lies.
int dynamic_smem(const KernelSpec& spec) {
  if (strategy_of(spec) != Strategy::tile) return 0;
  const Granularity g = granularity_param(spec);
  const int threads = static_cast<int>(spec.i("threads"));
  const int partials =
      spec.i("column_sums") ? threads * static_cast<int>(spec.i("vec")) / 128 * 128 * 4 : 0;
  if (g == Granularity::tensor || g == Granularity::row)
    return std::max(128 * 132 + 2 * 128 * 4, partials);
  if (threads >= 256) return std::max(128 * 132 + (128 + 32) * 4, partials);
  return (128 * 129 + 2 * 128 + 32) * 4;
}

int block_threads(const KernelSpec& spec) { return static_cast<int>(spec.i("threads")); }

FamilyDef make_family() {
  FamilyDef f;
  f.name = "quantize";
  f.min_arch = 89;  // FP8 conversions (cvt.rn.satfinite.e4m3x2) exist from sm_89
  f.sm90a_only = false;
  f.generation = 1;  // FamilyDef::generation: bump when a kernel change re-times its configs
  f.header = "fp8jit/quant/quantize.cuh";
  f.params = {
      {"input", false, {"bf16", "fp16", "fp32"}, "element type of the input"},
      {"format", false, {"e4m3", "e5m2"}, "FP8 format of the output"},
      {"granularity", false, {"tensor", "row", "1x128", "128x128"}, "elements sharing one scale"},
      {"transpose", false, {0, 1}, "also write the transposed FP8 tensor"},
      {"arithmetic", false, {"ieee", "deepseek"},
       "ieee: IEEE round-to-nearest scales and codes (the host reference's bytes); deepseek: DeepSeek-V3's "
       "act_quant arithmetic (Triton's approximate divisions, amax floored at 1e-4), its bytes",
       std::string("ieee")},
      {"column_sums", false, {0, 1},
       "1: also the fp32 sum over the rows of every column of x (a Linear layer's bias gradient "
       "from dY), from the transposed cast's tiles and an fp8jit_colsum kernel",
       std::int64_t{0}},
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

const FamilyDef& quantize_family() {
  static const FamilyDef family = make_family();
  return family;
}

KernelSpec make_quantize_spec(const QuantizeProblem& p, const ElementwiseConfig& c) {
  KernelSpec spec{"quantize",
                  {{"input", std::string(to_string(p.input))},
                   {"format", std::string(to_string(p.format))},
                   {"granularity", std::string(to_string(p.granularity))},
                   {"transpose", std::int64_t{p.transpose}},
                   {"arithmetic", std::string(p.deepseek_arithmetic ? "deepseek" : "ieee")},
                   {"column_sums", std::int64_t{p.column_sums}},
                   {"vec", std::int64_t{c.vec}},
                   {"threads", std::int64_t{c.threads}},
                   {"unroll", std::int64_t{c.unroll}}}};
  validate_spec(spec);
  return spec;
}

QuantizeProblem quantize_problem_of(const KernelSpec& spec) {
  if (spec.family != "quantize") throw_invalid("family", spec.family, "expected quantize");
  return {
      dtype_param(spec, "input"), format_param(spec, "format"),       granularity_param(spec),
      spec.i("transpose") != 0,   spec.s("arithmetic") == "deepseek", spec.i("column_sums") != 0};
}

ElementwiseConfig elementwise_config_of(const KernelSpec& spec) {
  return {static_cast<int>(spec.i("vec")), static_cast<int>(spec.i("threads")),
          static_cast<int>(spec.i("unroll"))};
}

}  // namespace fp8jit
