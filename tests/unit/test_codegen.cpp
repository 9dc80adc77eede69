// Code generation: golden sources, the shape of every generated translation unit, entry points,
// shared memory, and the binary cache key built from the source and the embedded headers.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <tuple>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/families/gemm_geometry.hpp"
#include "generator/family.hpp"
#include "common/hash.hpp"
#include "runtime/jit/headers.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "runtime/jit/nvrtc.hpp"
#include "runtime/sass/gemm_post_passes.hpp"

namespace fp8jit {
namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string golden(const std::string& name) {
  return read_text(std::string(FP8JIT_SOURCE_DIR) + "/tests/golden/" + name);
}

std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

// Every quantize and dequantize spec, and a spread sample of the gemm family (about 3 x 10^5
// variants: rendering them all would take most of this binary's time budget). Computed once.
const std::vector<KernelSpec>& all_specs() {
  static const std::vector<KernelSpec> specs = [] {
    std::vector<KernelSpec> out;
    for (const FamilyDef* f : all_families()) {
      std::vector<KernelSpec> some = f->name == "gemm" ? spread_sample(*f, 400) : enumerate_specs(*f);
      for (KernelSpec& s : some) out.push_back(std::move(s));
    }
    return out;
  }();
  return specs;
}

std::size_t family_count(const std::string& family) {
  return static_cast<std::size_t>(std::count_if(all_specs().begin(), all_specs().end(),
                                                [&](const KernelSpec& s) { return s.family == family; }));
}

// Configs per problem (vec x threads x unroll) and on the tile strategy (unroll fixed to 1).
std::size_t allowed_count(const std::string& name) {
  for (const ParamDef& d : quantize_family().params)
    if (d.name == name) return d.allowed.size();
  return 0;
}
int configs_per_problem() { return static_cast<int>(allowed_count("vec") * allowed_count("threads") * allowed_count("unroll")); }
int tile_configs() { return static_cast<int>(allowed_count("vec") * allowed_count("threads")); }

bool is_tile(const KernelSpec& s) {
  return s.family == "quantize" && (s.s("granularity") == "128x128" || s.i("transpose") == 1);
}

TEST(CodegenGolden, Quantize1x128) {
  const KernelSpec spec = spec_from_json(
      R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128","transpose":0},)"
      R"("config":{"vec":8,"threads":256,"unroll":2}})");
  EXPECT_EQ(render_source(spec), golden("quant_sm90_bf16_e4m3_1x128_v8_t256_u2.cu"));
}

TEST(CodegenGolden, DequantizeRowFp32) {
  const KernelSpec spec =
      make_dequantize_spec({Fp8Format::e5m2, DType::fp32, Granularity::row}, {4, 128, 4});
  EXPECT_EQ(render_source(spec), golden("dequant_sm90_e5m2_fp32_row_v4_t128_u4.cu"));
}

// DeepSeek-V3's GEMM: 1x128 x 128x128 block scaling, 128x128 tiles, bf16 out.
TEST(CodegenGolden, GemmBlockScaled128x128) {
  const KernelSpec spec = make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false},
                                         {128, 128, 5, 8});
  EXPECT_EQ(spec_name(spec), "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8");
  EXPECT_EQ(render_source(spec), golden("gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8.cu"));
}

// The same kernel in a 2-CTA cluster (along M, then N): the source differs from the golden one in
// its name, its spec and the two cluster arguments only; the launch bounds stay (one CTA per SM).
TEST(CodegenGolden, GemmClusterVariantsDifferOnlyInTheClusterArguments) {
  const std::string base = golden("gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8.cu");
  const std::string base_name = "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8";
  const std::string base_config = R"("cluster_m":1,"cluster_n":1)";
  const std::string base_args = "/*CLUSTER_M=*/1, /*CLUSTER_N=*/1>;";
  ASSERT_EQ(count(base, base_name), 1u);
  ASSERT_EQ(count(base, base_config), 1u);
  ASSERT_EQ(count(base, base_args), 1u);
  for (const auto& [cm, cn, suffix] : {std::tuple{2, 1, "_c2m"}, std::tuple{1, 2, "_c2n"}}) {
    SCOPED_TRACE(suffix);
    const KernelSpec spec = make_gemm_spec(
        {Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false}, {128, 128, 5, 8, cm, cn});
    std::string want = base;
    want.replace(want.find(base_name), base_name.size(), base_name + suffix);
    want.replace(want.find(base_config), base_config.size(), fmt::format(R"("cluster_m":{},"cluster_n":{})", cm, cn));
    want.replace(want.find(base_args), base_args.size(), fmt::format("/*CLUSTER_M=*/{}, /*CLUSTER_N=*/{}>;", cm, cn));
    EXPECT_EQ(render_source(spec), want);
  }
}

TEST(CodegenShape, EverySourceIsShortWithOneHeaderAndItsSpec) {
  ASSERT_GE(family_count("gemm"), 400u);
  int c2m = 0, c2n = 0;
  for (const KernelSpec& s : all_specs()) {
    const std::string src = render_source(s);
    const FamilyDef& f = find_family(s.family);
    SCOPED_TRACE(spec_name(s));
    // gemm sources are longer: the wgmma specialisation spells out N/2 accumulator registers.
    ASSERT_LT(std::count(src.begin(), src.end(), '\n'), s.family == "gemm" ? 60 : 40);
    ASSERT_EQ(count(src, "#include"), 1u);
    ASSERT_NE(src.find("#include \"" + f.header + "\"\n"), std::string::npos);
    ASSERT_EQ(src.rfind("// " + spec_name(s) + " -- generated by fp8jit; spec: " + spec_to_json(s) + "\n", 0), 0u);
    ASSERT_EQ(src.back(), '\n');
    // Every instantiation argument comes from the closed set, never from the spec's text.
    if (s.family == "gemm") {
      ASSERT_NE(src.find(fmt::format("/*BLOCK_M=*/{}, /*BLOCK_N=*/{}, /*kStages=*/{}, ", s.i("block_m"),
                                     s.i("block_n"), s.i("stages"))),
                std::string::npos);
      // Dense GEMMs take the kernel's default scheduler; grouped layouts name theirs.
      const std::string layout = s.s("layout");
      const bool swapped = s.params.count("swap_ab") && s.i("swap_ab");
      const std::string scheduler =
          swapped             ? ", /*kTmaEpilogue=*/false, /*kSwapAB=*/true>;"
          : layout == "dense" ? ">;"
          : layout == "indexed"
              ? fmt::format(
                    ", /*kTmaEpilogue=*/false, /*kSwapAB=*/false,\n    IndexedTileScheduler<{}, "
                    "{}, {}, "
                    "/*CLUSTER_N=*/{}>>;",
                    s.i("block_m"), s.i("block_n"), s.i("group_m"), s.i("cluster_n"))
              : fmt::format(
                    ", /*kTmaEpilogue=*/false, /*kSwapAB=*/false,\n    GroupedTileScheduler<{}, "
                    "{}, {}, "
                    "/*CLUSTER_M=*/{}, /*CLUSTER_N=*/{}, {}>>;",
                    s.i("block_m"), s.i("block_n"), s.i("group_m"), s.i("cluster_m"),
                    s.i("cluster_n"),
                    layout == "contiguous" ? "kContiguousLayout" : "kMaskedLayout");
      ASSERT_NE(src.find(fmt::format("/*kBias=*/{}, /*GROUP_M=*/{}, /*kFastAccum=*/{}, /*CLUSTER_M=*/{}, "
                                     "/*CLUSTER_N=*/{}{}",
                                     s.i("bias") ? "true" : "false", s.i("group_m"),
                                     s.s("accum") == "fast" ? "true" : "false", s.i("cluster_m"), s.i("cluster_n"),
                                     scheduler)),
                std::string::npos);
      ASSERT_EQ(spec_name(s).find("_" + layout + "_") != std::string::npos, layout != "dense");
      // The wgmma's N: the tile's width, or half of it for precise tiles computed in two halves.
      const int wgmma_n =
          static_cast<int>(s.i("block_n")) / gemm_geometry(gemm_problem_of(s), gemm_config_of(s)).chunks;
      ASSERT_NE(src.find(fmt::format("template <> struct Wgmma<{}, ", wgmma_n)), std::string::npos);
      // Swapped operands: the kernel's A is the problem's B.
      ASSERT_NE(src.find(fmt::format("wgmma.mma_async.sync.aligned.m64n{}k32.f32.{}.{} {{%0, ",
                                     wgmma_n, s.s(swapped ? "b_format" : "a_format"),
                                     s.s(swapped ? "a_format" : "b_format"))),
                std::string::npos);
      // The register list ends at N/2 - 1, followed by the two descriptors and the predicate.
      const int regs = wgmma_n / 2;
      ASSERT_NE(src.find(fmt::format("%{}}}, %{}, %{}, p, 1, 1;", regs - 1, regs, regs + 1)), std::string::npos);
      ASSERT_NE(src.find(fmt::format("setp.ne.b32 p, %{}, 0;", regs + 2)), std::string::npos);
      ASSERT_EQ(count(src, "\"+f\"(d["), static_cast<std::size_t>(regs));
      // A cluster shows in the name (and only then) and in the instantiation, never both axes.
      const std::int64_t cm = s.i("cluster_m"), cn = s.i("cluster_n");
      ASSERT_LE(cm * cn, 2);
      ASSERT_EQ(spec_name(s).ends_with("_c2m"), cm == 2);
      ASSERT_EQ(spec_name(s).ends_with("_c2n"), cn == 2);
      ASSERT_EQ(spec_cluster_size(s), cm * cn);
      c2m += cm == 2;
      c2n += cn == 2;
    } else {
      ASSERT_NE(src.find(fmt::format("/*THREADS=*/{}", s.i("threads"))), std::string::npos);
      ASSERT_NE(src.find(fmt::format("/*VEC=*/{}", s.i("vec"))), std::string::npos);
      ASSERT_EQ(spec_cluster_size(s), 1);
    }
  }
  // The sample renders 2-CTA clusters along both axes.
  EXPECT_GT(c2m, 0);
  EXPECT_GT(c2n, 0);
}

TEST(CodegenShape, FamilyHeadersAreEmbedded) {
  for (const FamilyDef* f : all_families()) EXPECT_NE(find_embedded_header(f->header), nullptr) << f->header;
  EXPECT_EQ(find_embedded_header("fp8jit/does/not/exist.cuh"), nullptr);
}

TEST(CodegenEntryPoints, PerTensorHasThreePassesEachDefinedOnce) {
  int per_tensor = 0, gemms = 0;
  for (const KernelSpec& s : all_specs()) {
    const std::string src = render_source(s);
    const std::vector<std::string> entries = spec_entry_points(s);
    SCOPED_TRACE(spec_name(s));
    std::vector<std::string> want;
    if (s.family == "dequantize") want = {"fp8jit_dequantize"};
    else if (s.family == "gemm") {
      want = {"fp8jit_gemm"};
      if (s.s("layout") == "dense") want.emplace_back("fp8jit_gemm_reduce");  // grouped: no split-K
      // A's 1x128 scales, which callers may give row-major: their column-major copy comes last.
      if (s.s("scale") == "block" || s.s("scale") == "group")
        want.emplace_back("fp8jit_gemm_scale_columns");
    } else if (s.s("granularity") == "tensor" ||
               (s.s("granularity") == "row" && s.i("transpose"))) {
      // Per row with a transposed output: row and column amaxes, the cast, the scales.
      want = {"fp8jit_amax", "fp8jit_quantize", "fp8jit_finalize"};
      per_tensor += s.s("granularity") == "tensor";
    } else {
      want = {"fp8jit_quantize"};
    }
    // Column sums: the tiles' partial sums added last.
    if (s.family == "quantize" && s.i("column_sums")) want.emplace_back("fp8jit_colsum");
    ASSERT_EQ(entries, want);
    ASSERT_EQ(count(src, "__global__"), entries.size());
    for (const std::string& e : entries) ASSERT_EQ(count(src, " " + e + "("), 1u) << e;
    if (s.family == "gemm") {
      // One producer warpgroup plus one consumer warpgroup per 64..128 rows (two from 128 on); one
      // CTA per SM (the persistent grid).
      ++gemms;
      const int threads = s.i("block_m") == 64 ? 256 : 384;
      ASSERT_EQ(spec_block_threads(s), threads);
      ASSERT_NE(src.find(fmt::format("__launch_bounds__({}, 1) fp8jit_gemm(const __grid_constant__ GemmParams p)", threads)),
                std::string::npos);
      if (s.s("scale") == "block" || s.s("scale") == "group")
        ASSERT_NE(src.find("  ScaleColumns::run(src, rs, cs, rows, cols, dst, ld);"),
                  std::string::npos);
      // The reduction sums FP32 partials into D's type, adding the bias once (dense GEMMs only).
      if (s.s("layout") != "dense") continue;
      ASSERT_NE(src.find(" fp8jit_gemm_reduce(const __grid_constant__ GemmParams p)"), std::string::npos);
      ASSERT_NE(src.find(fmt::format("Sm90GemmReduce<k{}, {}>::run(p);", s.s("out") == "bf16" ? "BF16" : s.s("out") == "fp16" ? "FP16" : "FP32",
                                     s.i("bias") ? "true" : "false")),
                std::string::npos);
      continue;
    }
    // The main kernel declares the block size the launcher uses.
    ASSERT_EQ(spec_block_threads(s), s.i("threads"));
    const std::string main = s.family == "dequantize" ? "fp8jit_dequantize" : "fp8jit_quantize";
    // (Column sums add a minimum of CTAs a multiprocessor: `__launch_bounds__(threads, n)`.)
    const std::size_t entry = src.find(fmt::format(" {}(const __grid_constant__", main));
    ASSERT_NE(entry, std::string::npos);
    const std::string bounds = fmt::format("__launch_bounds__({}", s.i("threads"));
    const std::size_t at = src.rfind("__launch_bounds__(", entry);
    ASSERT_NE(at, std::string::npos);
    ASSERT_EQ(src.compare(at, bounds.size(), bounds), 0) << src.substr(at, 40);
    ASSERT_TRUE(src[at + bounds.size()] == ')' || (s.i("column_sums") && src[at + bounds.size()] == ','));
  }
  // input x format x (transpose, transpose with column sums, none) x configs
  EXPECT_EQ(per_tensor, 3 * 2 * 3 * configs_per_problem());
  EXPECT_EQ(static_cast<std::size_t>(gemms), family_count("gemm"));
  EXPECT_GE(gemms, 400);
}

TEST(CodegenSmem, OverDefaultLimitExactlyForTileStrategy) {
  int tiles = 0, gemms = 0;
  for (const KernelSpec& s : all_specs()) {
    const int smem = spec_dynamic_smem(s);
    SCOPED_TRACE(spec_name(s));
    if (s.family == "gemm") {
      // The stage ring (with the staged scales of block and group scaling), a full and an empty
      // mbarrier per stage, 128 bytes to align the epilogue's
      // staging of the BLOCK_M x BLOCK_N tile of D, and 1 KiB to align the ring for the 128-byte
      // swizzle; always within the opt-in limit of H100/H200.
      ++gemms;
      const GemmConfig c = gemm_config_of(s);
      const int out_bytes = s.s("out") == "fp32" ? 4 : 2;
      // Swapped block scaling stages its A's one block scale (padded to 128 bytes) and a scale
      // per column.
      const int staged = s.s("scale") == "block"   ? (c.swap_ab ? 32 + c.block_n : c.block_m + 8)
                         : s.s("scale") == "group" ? c.block_m + c.block_n
                                                   : 0;
      const int scales = (staged + 31) / 32 * 32;  // 128-byte aligned per stage
      ASSERT_EQ(smem, c.stages * ((c.block_m + c.block_n) * 128 + 4 * scales + 16) + 128 +
                          c.block_m * c.block_n * out_bytes + 1024);
      ASSERT_EQ(smem, gemm_geometry(gemm_problem_of(s), c).smem_bytes);
      ASSERT_LE(smem, 232448);
      ASSERT_NE(render_source(s).find("extern __shared__ __align__(1024) u8 smem[];"), std::string::npos);
      continue;
    }
    // Per tensor and per row: the 128x128 tile's FP8 codes (rows padded to 132) and two 128-float
    // reciprocal vectors; 1x128 and 128x128 with 256 threads or more (values in registers): the
    // codes, a 128-float vector and 32 floats of scratch. Otherwise the 128x129 float tile, two
    // 128-float reciprocal vectors and 32 floats of scratch, over the 48 KiB a launch gets without
    // opting in.
    // Column sums from registers (all but the float tile) reuse it for threads * vec / 128 rows of
    // 128 floats, more where those need more.
    const bool preset = s.s("granularity") == "tensor" || s.s("granularity") == "row";
    const bool registers = !preset && s.i("threads") >= 256;
    const int folds = s.family == "quantize" && s.i("column_sums") && (preset || registers)
                          ? static_cast<int>(s.i("threads") * s.i("vec") / 128 * 128 * 4)
                          : 0;
    ASSERT_EQ(smem > 48 * 1024, is_tile(s) && !preset && !registers);
    ASSERT_EQ(smem, !is_tile(s) ? 0
                    : preset    ? std::max(128 * 132 + 2 * 128 * 4, folds)
                    : registers ? std::max(128 * 132 + (128 + 32) * 4, folds)
                                : (128 * 129 + 2 * 128 + 32) * 4);
    if (is_tile(s)) {
      ++tiles;
      ASSERT_NE(render_source(s).find("extern __shared__ float smem[];"), std::string::npos);
    }
  }
  // Per input x format: 128x128 (both transposes), 1x128 and per-row transposed, unroll 1; tensor
  // transposed, any unroll; the transposed ones again with column sums.
  EXPECT_EQ(tiles, 3 * 2 *
                       (4 * tile_configs() + configs_per_problem() + 3 * tile_configs() +
                        configs_per_problem()));
  EXPECT_GE(gemms, 400);
}

TEST(CodegenCacheKey, HeaderHashMatchesTemplatesOnDisk) {
  const HeaderSet& h = embedded_headers();
  ASSERT_EQ(h.names.size(), h.contents.size());
  ASSERT_GE(h.names.size(), 5u);
  std::uint64_t hash = kStableHashSeed;
  for (std::size_t i = 0; i < h.names.size(); ++i) {
    const std::string text = read_text(std::string(FP8JIT_SOURCE_DIR) + "/templates/" + h.names[i]);
    EXPECT_EQ(std::string(h.contents[i]), text) << h.names[i];
    hash = stable_hash64(h.names[i], hash);
    hash = stable_hash64(text, hash);
  }
  EXPECT_EQ(h.hash, hash);
}

TEST(CodegenCacheKey, KeyCoversSourceHeadersTargetAndHasNoPaths) {
  const KernelSpec a = default_quantize_spec({});
  const KernelSpec b = default_dequantize_spec({});
  const std::string sa = render_source(a), sb = render_source(b);
  const std::string ka = binary_cache_key(sa, CompileTarget::cubin);
  EXPECT_EQ(ka, binary_cache_key(sa, CompileTarget::cubin));  // deterministic
  EXPECT_NE(ka, binary_cache_key(sb, CompileTarget::cubin));
  EXPECT_NE(ka, binary_cache_key(sa + " ", CompileTarget::cubin));
  EXPECT_NE(ka, binary_cache_key(sa, CompileTarget::ptx));
  // Every spec's source gives its own key.
  EXPECT_NE(binary_cache_key(render_source(make_quantize_spec({}, {8, 256, 4})), CompileTarget::cubin), ka);

  EXPECT_NE(ka.find(fmt::format("headers {:016x}\n", embedded_headers().hash)), std::string::npos) << ka;
  EXPECT_NE(ka.find("nvrtc " + nvrtc_version() + "\n"), std::string::npos);
  EXPECT_NE(ka.find("--gpu-architecture=sm_90a"), std::string::npos);
  EXPECT_NE(binary_cache_key(sa, CompileTarget::ptx).find("--gpu-architecture=compute_90a"), std::string::npos);
  EXPECT_EQ(ka.substr(ka.size() - sa.size()), sa);
  EXPECT_EQ(ka.rfind("fp8jit ", 0), 0u);
  for (const char* path : {"/work", "/usr", "/home", "/tmp", "/opt", FP8JIT_SOURCE_DIR})
    EXPECT_EQ(ka.find(path), std::string::npos) << path << " in key:\n" << ka;
  for (const std::string& o : nvrtc_options(CompileTarget::cubin))
    EXPECT_EQ(o.rfind("-I", 0), std::string::npos) << "include path option: " << o;
}

// A post-pass's key line is in the keys of its family's cubins only, before the source: gemm's
// FFMA reuse pass changes gemm keys, never a quantize or dequantize key.
TEST(CodegenCacheKey, PostPassLinesOnlyInTheirFamilysKeys) {
  const KernelCache reuse({.post_passes = gemm_post_passes(true)});
  const KernelCache plain({.post_passes = gemm_post_passes(false)});
  auto head = [](const std::string& key, const KernelSpec& spec) {
    const std::string source = render_source(spec);
    EXPECT_EQ(key.substr(key.size() - source.size()), source);
    return key.substr(0, key.size() - source.size());
  };
  for (const KernelSpec& s : {default_quantize_spec({}), default_dequantize_spec({})}) {
    const std::string key = reuse.cubin_key(s);
    EXPECT_EQ(key, binary_cache_key(render_source(s), CompileTarget::cubin));
    EXPECT_EQ(key, plain.cubin_key(s));
    EXPECT_EQ(head(key, s).find("ffma"), std::string::npos) << key;
  }
  GemmProblem block{};
  block.scale = ScaleMode::block;
  const KernelSpec g = make_gemm_spec(block, GemmConfig{128, 256, 3, 16});
  const std::string with = reuse.cubin_key(g), without = plain.cubin_key(g);
  EXPECT_NE(with, without);
  EXPECT_EQ(without, binary_cache_key(render_source(g), CompileTarget::cubin));
  EXPECT_EQ(head(with, g), head(without, g) + "ffma_reuse 1\n");
}

}  // namespace
}  // namespace fp8jit
