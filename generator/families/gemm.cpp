// The gemm family: config space, validity rules and resource model, names and source.
#include <fmt/format.h>

#include "fp8jit/error.hpp"
#include "generator/families/elementwise.hpp"
#include "generator/families/gemm_geometry.hpp"
#include "generator/family.hpp"

namespace fp8jit {
namespace {

using elementwise::dev_elem;
using elementwise::dev_fp8;

const char* dev_scale(ScaleMode m) {
  switch (m) {
    case ScaleMode::tensor:
      return "kPerTensor";
    case ScaleMode::rowwise:
      return "kPerRow";
    case ScaleMode::block:
      return "kBlockScale";
    case ScaleMode::group:
      return "kGroupScale";
  }
  throw Error(ErrorKind::internal, "dev_scale: bad ScaleMode");
}

// The cross-parameter rules on typed values. `why` null: the verdict only, so enumerating the
// space's millions of combinations formats no messages; else the reason of a rejection.
bool rules_pass(const GemmProblem& p, const GemmConfig& c, std::string* why) {
  const GemmGeometry g = gemm_geometry(p, c);
  const auto reject = [why](auto&& message) {
    if (why) *why = message();
    return false;
  };
  if (p.a_format == Fp8Format::e5m2 && p.b_format == Fp8Format::e5m2)
    return reject(
        [&] { return "a_format = b_format = e5m2: FP8 GEMMs need at least one E4M3 operand"; });
  if (p.fast_accum && (p.scale == ScaleMode::block || p.scale == ScaleMode::group))
    return reject([&] {
      return fmt::format(
          "accum = fast is for tensor and rowwise scaling; {} scaling promotes every 128 of K",
          to_string(p.scale));
    });
  if (p.layout != GemmLayout::dense) {
    if (p.scale == ScaleMode::group)
      return reject([&] {
        return fmt::format("layout = {} takes tensor, rowwise or block scaling, not group",
                           to_string(p.layout));
      });
    if (p.bias)
      return reject([&] {
        return fmt::format("layout = {}: grouped GEMMs take no bias", to_string(p.layout));
      });
    if (c.epilogue != GemmEpilogue::any)
      return reject([&] {
        return fmt::format("layout = {}: grouped GEMMs take epilogue = any", to_string(p.layout));
      });
    // Contiguous and masked pairs along M take two tile-rows of one group (grouped_scheduler.cuh);
    // the indexed layout's tiles sit on a grid over all rows, where a pair could span two groups.
    if (c.cluster_m != 1 && p.layout == GemmLayout::indexed)
      return reject([&] {
        return "layout = indexed: cluster_m = 2 would pair tiles of different groups; use "
               "cluster_n";
      });
    if (c.swap_ab)
      return reject([&] {
        return fmt::format("layout = {}: swap_ab = 1 is for dense GEMMs", to_string(p.layout));
      });
    if (p.layout == GemmLayout::indexed && dev::kGemmIndexedAlignment % c.block_m != 0)
      return reject([&] {
        return fmt::format(
            "layout = indexed: block_m = {} tiles would span groups, whose rows start every {} "
            "rows",
            c.block_m, dev::kGemmIndexedAlignment);
      });
  }
  if (c.swap_ab) {
    if (c.epilogue != GemmEpilogue::any)
      return reject(
          [&] { return "swap_ab = 1 writes D transposed by direct stores: epilogue = any"; });
    if (c.cluster_m * c.cluster_n != 1)
      return reject([&] { return "swap_ab = 1 takes no cluster: cluster_m = cluster_n = 1"; });
    if (c.block_m > 128 || c.block_n > 128)
      return reject([&] {
        return fmt::format(
            "swap_ab = 1 with {}x{} tiles: at most 128x128 (its tile rows are N's, within one "
            "128-row scale block of B; its columns are M's, a few rows)",
            c.block_m, c.block_n);
      });
  }
  if (g.smem_bytes > kGemmSmemLimit)
    return reject([&] {
      return fmt::format(
          "stages = {} with {}x{} tiles ({} out) needs {} bytes of shared memory; the limit is {}",
          c.stages, c.block_m, c.block_n, to_string(p.out), g.smem_bytes, kGemmSmemLimit);
    });
  if (g.accumulators > g.max_accumulators)
    return reject([&] {
      return fmt::format(
          "{}x{} tiles need {} accumulator registers per thread ({} scaling{}); at most {} fit",
          c.block_m, c.block_n, g.accumulators, to_string(p.scale),
          p.fast_accum ? ", fast accumulation" : "", g.max_accumulators);
    });
  if (c.cluster_m * c.cluster_n > 2)
    return reject([&] {
      return fmt::format(
          "cluster_m = {} and cluster_n = {}: clusters have at most 2 CTAs, along M or N",
          c.cluster_m, c.cluster_n);
    });
  if (g.cluster_spills)
    return reject([&] {
      return fmt::format(
          "{} = 2: 2-CTA clusters with {} scaling and {}-row tiles spill registers; use "
          "cluster_m = cluster_n = 1",
          c.cluster_m == 2 ? "cluster_m" : "cluster_n", to_string(p.scale), c.block_m);
    });
  if (c.cluster_m == 2 && c.block_n % 16 != 0)
    return reject([&] {
      return fmt::format(
          "cluster_m = 2 multicasts halves of B's tile: block_n = {} must be a multiple of 16",
          c.block_n);
    });
  if (g.straddles_three_b_blocks)
    return reject([&] {
      return fmt::format("block_n = {} lets a tile straddle three 128x128 scale blocks of B",
                         c.block_n);
    });
  if (g.chunks == 2 && c.block_n % 16 != 0)
    return reject([&] {
      return fmt::format(
          "block_n = {} (> {}, precise) is computed in two halves: it must be a multiple of 16",
          c.block_n, dev::kGemmUnchunkedMaxN);
    });
  if (g.grouped_spills)
    return reject([&] {
      return fmt::format(
          "layout = {} with {} scaling and block_n = {} (> {}, computed in halves) spills "
          "registers",
          to_string(p.layout), to_string(p.scale), c.block_n, dev::kGemmUnchunkedMaxN);
    });
  if (g.bias_spills)
    return reject([&] {
      return fmt::format(
          "block_n = {} with bias spills registers (precise accumulation); at most {} columns",
          c.block_n, dev::kGemmChunkedBiasMaxN);
    });
  return true;
}

std::string check(const KernelSpec& spec) {
  std::string why;
  rules_pass(gemm_problem_of(spec), gemm_config_of(spec), &why);
  return why;
}

// FamilyDef::walk_configs: the problem parsed once, each config combination built from typed
// values.
void walk_configs(const KernelSpec& problem, const std::function<void(const KernelSpec&)>& emit) {
  const GemmProblem p = gemm_problem_of(problem);
  const std::vector<ParamDef>& params = gemm_family().params;
  std::vector<const ParamDef*> defs;
  std::vector<int GemmConfig::*> fields;
  std::vector<std::vector<int>> values;  // each def's allowed values, unwrapped once
  for (const ParamDef& def : params) {
    // Build choices (the epilogue: gemm_epilogue_for) follow from the shape, not a choice to
    // walk: they keep `problem`'s value.
    if (!def.is_config || def.build_choice) continue;
    defs.push_back(&def);
    fields.push_back(def.name == "block_m"     ? &GemmConfig::block_m
                     : def.name == "block_n"   ? &GemmConfig::block_n
                     : def.name == "stages"    ? &GemmConfig::stages
                     : def.name == "group_m"   ? &GemmConfig::group_m
                     : def.name == "cluster_m" ? &GemmConfig::cluster_m
                     : def.name == "cluster_n" ? &GemmConfig::cluster_n
                     : def.name == "swap_ab"
                         ? &GemmConfig::swap_ab
                         : throw Error(ErrorKind::internal, "gemm walk_configs: " + def.name));
    values.emplace_back();
    for (const ParamValue& v : def.allowed)
      values.back().push_back(static_cast<int>(std::get<std::int64_t>(v)));
  }
  // An odometer over the config params, the last one turning fastest: the generic walk's order.
  std::vector<std::size_t> at(defs.size(), 0);
  GemmConfig c;
  if (problem.params.count("epilogue"))
    c.epilogue = parse_gemm_epilogue(problem.s("epilogue")).value_or(GemmEpilogue::any);
  while (true) {
    for (std::size_t i = 0; i < defs.size(); ++i)
      c.*fields[i] = values[i][at[i]];
    if (rules_pass(p, c, nullptr)) {
      KernelSpec spec = problem;
      for (std::size_t i = 0; i < defs.size(); ++i)
        if (!elided(*defs[i], defs[i]->allowed[at[i]]))  // held absent at its default (swap_ab 0)
          spec.params[defs[i]->name] = defs[i]->allowed[at[i]];
      emit(spec);
    }
    std::size_t i = defs.size();
    while (i > 0 && ++at[i - 1] == defs[i - 1]->allowed.size()) at[--i] = 0;
    if (i == 0) return;
  }
}

std::string name_of(const KernelSpec& spec) {
  const GemmProblem p = gemm_problem_of(spec);
  const GemmConfig c = gemm_config_of(spec);
  const std::string cluster = c.cluster_m == 2 ? "_c2m" : c.cluster_n == 2 ? "_c2n" : "";
  const std::string layout =
      p.layout == GemmLayout::dense ? "" : fmt::format("_{}", to_string(p.layout));
  return fmt::format("gemm_sm90_{}{}_{}_{}{}{}{}_{}x{}x128_s{}_g{}{}{}{}", to_string(p.a_format),
                     to_string(p.b_format), to_string(p.out), to_string(p.scale),
                     p.fast_accum ? "_fast" : "", p.bias ? "_bias" : "", layout, c.block_m,
                     c.block_n, c.stages, c.group_m, cluster,
                     c.epilogue == GemmEpilogue::tma ? "_tma" : "", c.swap_ab ? "_swap" : "");
}

// The m64nNk32 FP8 wgmma with its N/2 accumulator operands spelt out.
std::string render_wgmma(int n, Fp8Format a, Fp8Format b) {
  const int regs = n / 2;
  std::string list, outs;
  for (int i = 0; i < regs; ++i) {
    list += fmt::format("{}%{}", i ? ", " : "", i);
    outs += fmt::format("{}\"+f\"(d[{}])", i ? ", " : "", i);
  }
  return fmt::format(
      "template <> struct Wgmma<{0}, {1}, {2}> {{\n"
      "  static FP8JIT_DEVICE void mma(u64 desc_a, u64 desc_b, float (&d)[{3}], int scale_d) {{\n"
      "    asm volatile(\n"
      "        \"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{6}, 0;\\n\"\n"
      "        \"wgmma.mma_async.sync.aligned.m64n{0}k32.f32.{7}.{8} {{{4}}}, %{3}, %{5}, p, 1, "
      "1;\\n}}\\n\"\n"
      "        : {9}\n"
      "        : \"l\"(desc_a), \"l\"(desc_b), \"r\"(scale_d));\n"
      "  }}\n}};\n",
      n, dev_fp8(a), dev_fp8(b), regs, list, regs + 1, regs + 2, to_string(a), to_string(b), outs);
}

// The kernel's scheduler argument: none for dense GEMMs (the kernel's default), the grouped
// scheduler of the layout otherwise.
std::string render_scheduler(const GemmProblem& p, const GemmConfig& c) {
  if (p.layout == GemmLayout::dense) return "";
  if (p.layout == GemmLayout::indexed)
    return fmt::format(",\n    IndexedTileScheduler<{}, {}, {}, /*CLUSTER_N=*/{}>", c.block_m,
                       c.block_n, c.group_m, c.cluster_n);
  return fmt::format(
      ",\n    GroupedTileScheduler<{}, {}, {}, /*CLUSTER_M=*/{}, /*CLUSTER_N=*/{}, {}>", c.block_m,
      c.block_n, c.group_m, c.cluster_m, c.cluster_n,
      p.layout == GemmLayout::contiguous ? "kContiguousLayout" : "kMaskedLayout");
}

std::string render_body(const KernelSpec& spec) {
  const GemmProblem p = gemm_problem_of(spec);
  const GemmConfig c = gemm_config_of(spec);
  const GemmGeometry g = gemm_geometry(p, c);
  // Grouped launches never split K: no reduction kernel.
  const std::string reduce = p.layout != GemmLayout::dense || c.epilogue == GemmEpilogue::tma
                                 ? ""
                                 : fmt::format(
                                       "\nextern \"C\" __global__ void fp8jit_gemm_reduce(const "
                                       "__grid_constant__ GemmParams p) {{\n"
                                       "  Sm90GemmReduce<{}, {}>::run(p);\n}}\n",
                                       dev_elem(p.out), p.bias ? "true" : "false");
  // A's row-major 1x128 scales go column-major (TMA's layout) first, in the same module: the
  // runtime launches it where the caller's scales are row-major (ops::scale_columns_first).
  const std::string columns =
      gemm_reads_row_scales_a(p)
          ? "\nextern \"C\" __global__ void __launch_bounds__(256) fp8jit_gemm_scale_columns(const "
            "float* src, long long rs, long long cs, int rows, int cols, float* dst, long long ld) "
            "{\n"
            "  ScaleColumns::run(src, rs, cs, rows, cols, dst, ld);\n}\n"
          : "";
  return fmt::format(
      "{}\n"
      "using Kernel = Sm90Fp8Gemm</*BLOCK_M=*/{}, /*BLOCK_N=*/{}, /*kStages=*/{}, {}, {}, {}, {}, "
      "/*kBias=*/{}, "
      "/*GROUP_M=*/{}, /*kFastAccum=*/{}, /*CLUSTER_M=*/{}, /*CLUSTER_N=*/{}{}{}>;\n\n"
      "extern \"C\" __global__ void __launch_bounds__({}, 1) fp8jit_gemm(const __grid_constant__ "
      "GemmParams p) {{\n"
      "  extern __shared__ __align__(1024) u8 smem[];\n"
      "  Kernel::run(p, smem);\n}}\n{}{}",
      // The swapped kernel's A is the problem's B: their formats and block scaling swap too.
      render_wgmma(g.chunk_n, c.swap_ab ? p.b_format : p.a_format,
                   c.swap_ab ? p.a_format : p.b_format),
      c.block_m, c.block_n, c.stages,
      c.swap_ab && p.scale == ScaleMode::block ? "kSwappedBlockScale" : dev_scale(p.scale),
      dev_elem(p.out), dev_fp8(c.swap_ab ? p.b_format : p.a_format),
      dev_fp8(c.swap_ab ? p.a_format : p.b_format), p.bias ? "true" : "false", c.group_m,
      p.fast_accum ? "true" : "false", c.cluster_m, c.cluster_n,
      // Only where it differs from the default, or a grouped scheduler follows it.
      c.swap_ab                         ? ", /*kTmaEpilogue=*/false, /*kSwapAB=*/true"
      : c.epilogue == GemmEpilogue::tma ? ", /*kTmaEpilogue=*/true"
      : p.layout != GemmLayout::dense   ? ", /*kTmaEpilogue=*/false, /*kSwapAB=*/false"
                                        : "",
      render_scheduler(p, c), g.threads, reduce, columns);
}

std::vector<std::string> entry_points(const KernelSpec& spec) {
  const GemmProblem p = gemm_problem_of(spec);
  std::vector<std::string> entries = {"fp8jit_gemm"};
  if (p.layout == GemmLayout::dense && gemm_config_of(spec).epilogue != GemmEpilogue::tma)
    entries.emplace_back("fp8jit_gemm_reduce");
  if (gemm_reads_row_scales_a(p)) entries.emplace_back(kGemmScaleColumnsEntry);
  return entries;
}
GemmGeometry geometry_of(const KernelSpec& spec) {
  return gemm_geometry(gemm_problem_of(spec), gemm_config_of(spec));
}
int dynamic_smem(const KernelSpec& spec) {
  return geometry_of(spec).smem_bytes;
}
int block_threads(const KernelSpec& spec) {
  return geometry_of(spec).threads;
}
int cluster_size(const KernelSpec& spec) {
  return geometry_of(spec).cluster;
}

std::vector<ParamValue> range(int from, int to, int step) {
  std::vector<ParamValue> v;
  for (int i = from; i <= to; i += step) v.push_back(std::int64_t{i});
  return v;
}

FamilyDef make_family() {
  FamilyDef f;
  f.name = "gemm";
  f.generation = 1;  // FamilyDef::generation: bump when a kernel change re-times its configs
  f.header = "fp8jit/gemm/sm90_fp8_gemm.cuh";
  f.params = {
      {"a_format", false, {"e4m3", "e5m2"}, "FP8 format of A [M, K]"},
      {"b_format", false, {"e4m3", "e5m2"}, "FP8 format of B [N, K]"},
      {"out", false, {"bf16", "fp16", "fp32"}, "element type of D"},
      {"scale", false, {"tensor", "rowwise", "block", "group"}, "scale mode"},
      {"bias", false, {0, 1}, "add bias[N]"},
      {"accum",
       false,
       {"precise", "fast"},
       "precise: promote every 128 of K into FP32; fast: tensor-core accumulation"},
      {"layout",
       false,
       {"dense", "contiguous", "masked", "indexed"},
       "dense: one GEMM; contiguous / masked / indexed: grouped (mixture-of-experts) GEMMs, a B "
       "per group",
       std::string("dense")},
      {"block_m", true, {64, 128, 256}, "rows of D per tile"},
      {"block_n", true, range(8, 256, 8), "columns of D per tile"},
      {"stages", true, range(2, 32, 1), "shared-memory pipeline depth"},
      {"group_m", true, {1, 4, 8, 16}, "tile-rows per raster group"},
      {"cluster_m",
       true,
       {1, 2},
       "2: CTA pairs on neighbouring tile-rows share B's tile (TMA multicast)",
       std::int64_t{1}},
      {"cluster_n",
       true,
       {1, 2},
       "2: CTA pairs on neighbouring tile-columns share A's tile (TMA multicast)",
       std::int64_t{1}},
      {"epilogue",
       true,
       {"any", "tma"},
       "any: every launch (split-K, direct stores); tma: dense, K in one range, D by TMA stores "
       "only (half the code; the runtime picks it where K is not split)",
       std::string("any"),
       true,
       true},
      {"swap_ab",
       true,
       {0, 1},
       "1: compute D^T = B A^T, the problem's N along the tile's rows and M along its columns "
       "(decode-sized M: a stage carries block_n rows of A, not 64); dense, no cluster, tiles up "
       "to 128x128",
       std::int64_t{0},
       true},
  };
  f.check = check;
  f.walk_configs = walk_configs;
  f.name_of = name_of;
  f.render_body = render_body;
  f.entry_points = entry_points;
  f.dynamic_smem = dynamic_smem;
  f.block_threads = block_threads;
  f.cluster_size = cluster_size;
  return f;
}

}  // namespace

const FamilyDef& gemm_family() {
  static const FamilyDef family = make_family();
  return family;
}

KernelSpec make_gemm_spec(const GemmProblem& p, const GemmConfig& c) {
  KernelSpec spec{"gemm",
                  {{"a_format", std::string(to_string(p.a_format))},
                   {"b_format", std::string(to_string(p.b_format))},
                   {"out", std::string(to_string(p.out))},
                   {"scale", std::string(to_string(p.scale))},
                   {"bias", std::int64_t{p.bias}},
                   {"accum", std::string(p.fast_accum ? "fast" : "precise")},
                   {"layout", std::string(to_string(p.layout))},
                   {"block_m", std::int64_t{c.block_m}},
                   {"block_n", std::int64_t{c.block_n}},
                   {"stages", std::int64_t{c.stages}},
                   {"group_m", std::int64_t{c.group_m}},
                   {"cluster_m", std::int64_t{c.cluster_m}},
                   {"cluster_n", std::int64_t{c.cluster_n}}}};
  // Held only where it is not the default (ParamDef::elide_config).
  if (c.epilogue != GemmEpilogue::any) spec.params["epilogue"] = std::string(to_string(c.epilogue));
  if (c.swap_ab) spec.params["swap_ab"] = std::int64_t{c.swap_ab};
  validate_spec(spec);
  return spec;
}

GemmProblem gemm_problem_of(const KernelSpec& spec) {
  if (spec.family != "gemm") throw_invalid("family", spec.family, "expected gemm");
  auto scale = parse_scale_mode(spec.s("scale"));
  if (!scale) throw_invalid("scale", spec.s("scale"), "tensor, rowwise, block or group");
  auto layout = parse_gemm_layout(spec.s("layout"));
  if (!layout) throw_invalid("layout", spec.s("layout"), "dense, contiguous, masked or indexed");
  return {elementwise::format_param(spec, "a_format"),
          elementwise::format_param(spec, "b_format"),
          elementwise::dtype_param(spec, "out"),
          *scale,
          spec.i("bias") != 0,
          spec.s("accum") == "fast",
          *layout};
}

GemmConfig gemm_config_of(const KernelSpec& spec) {
  // Specs written before the parameter existed name the kernel that served every launch.
  const auto epilogue =
      spec.params.count("epilogue") ? parse_gemm_epilogue(spec.s("epilogue")) : GemmEpilogue::any;
  if (!epilogue) throw_invalid("epilogue", spec.s("epilogue"), "any or tma");
  return {static_cast<int>(spec.i("block_m")),
          static_cast<int>(spec.i("block_n")),
          static_cast<int>(spec.i("stages")),
          static_cast<int>(spec.i("group_m")),
          static_cast<int>(spec.i("cluster_m")),
          static_cast<int>(spec.i("cluster_n")),
          *epilogue,
          spec.params.count("swap_ab") ? static_cast<int>(spec.i("swap_ab")) : 0};
}

}  // namespace fp8jit
