// NVRTC compiles generated sources for sm_90a (no GPU needed): a fixed, spread sample of kernel
// variants (every problem's default config, every config of one problem per strategy), and the
// PTX of the defaults carries the instructions the kernels are built around.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/family.hpp"
#include "runtime/jit/nvrtc.hpp"
#include "common/parallel.hpp"
#include "tests/common/ptx_checks.hpp"

namespace fp8jit {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool is_elf(const std::string& bin) { return bin.size() > 4 && bin.compare(0, 4, "\x7f" "ELF") == 0; }

struct Outcome {
  std::string name;
  std::size_t bytes = 0;
  bool elf = false;
  double seconds = 0;
  std::string error;
};

// Compiles every spec to a cubin on all hardware threads; checks and reports each one.
void compile_all(const std::vector<KernelSpec>& specs, const char* what) {
  const int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<Outcome> out(specs.size());
  const auto t0 = Clock::now();
  parallel_for(specs.size(), jobs, [&](std::size_t i) {
    Outcome& o = out[i];
    try {
      o.name = spec_name(specs[i]);
      const CompileResult r = nvrtc_compile(o.name, render_source(specs[i]), CompileTarget::cubin);
      o.bytes = r.binary.size();
      o.elf = is_elf(r.binary);
      o.seconds = r.seconds;
    } catch (const std::exception& e) {
      o.error = e.what();
    }
  });
  const double wall = seconds_since(t0);
  double slowest = 0;
  for (const Outcome& o : out) {
    EXPECT_TRUE(o.error.empty()) << o.name << ": " << o.error;
    EXPECT_TRUE(o.elf) << o.name << ": " << o.bytes << " bytes, not an ELF cubin";
    slowest = std::max(slowest, o.seconds);
  }
  static std::size_t total_variants = 0;  // over every sample compiled by this binary so far
  static double total_wall = 0;
  total_variants += specs.size();
  total_wall += wall;
  std::printf("[ compiled ] %s: %zu variants for sm_90a in %.1f s wall on %d threads (slowest %.3f s); "
              "%zu variants in %.1f s so far\n",
              what, specs.size(), wall, jobs, slowest, total_variants, total_wall);
  ::testing::Test::RecordProperty("variants", static_cast<int>(specs.size()));
  ::testing::Test::RecordProperty("wall_ms", static_cast<int>(wall * 1000));
}

std::vector<KernelSpec> problems_of(const FamilyDef& family) {
  std::vector<KernelSpec> out;
  std::set<std::map<std::string, ParamValue>> seen;
  for (KernelSpec s : enumerate_specs(family)) {
    for (const ParamDef& d : family.params)
      if (d.is_config) s.params.erase(d.name);
    if (seen.insert(s.params).second) out.push_back(s);
  }
  return out;
}

std::vector<KernelSpec> configs_of(const KernelSpec& problem) {
  return enumerate_configs(find_family(problem.family), problem);
}

// Configs per problem (vec x threads x unroll) and on the tile strategy (unroll fixed to 1).
std::size_t allowed_count(const std::string& name) {
  for (const ParamDef& d : quantize_family().params)
    if (d.name == name) return d.allowed.size();
  return 0;
}
std::size_t configs_per_problem() { return allowed_count("vec") * allowed_count("threads") * allowed_count("unroll"); }
std::size_t tile_configs() { return allowed_count("vec") * allowed_count("threads"); }

KernelSpec quant_problem(DType in, Fp8Format f, Granularity g, bool transpose) {
  KernelSpec s = make_quantize_spec({in, f, g, transpose}, {8, 256, 1});
  for (const char* k : {"vec", "threads", "unroll"}) s.params.erase(k);
  return s;
}

TEST(CompileTiming, ColdCompileOfOneQuantizeVariant) {
  const KernelSpec spec = make_quantize_spec({DType::fp16, Fp8Format::e5m2, Granularity::group128, false}, {8, 128, 4});
  const auto t0 = Clock::now();
  const CompileResult r = nvrtc_compile(spec_name(spec), render_source(spec), CompileTarget::cubin);
  const double wall = seconds_since(t0);
  EXPECT_TRUE(is_elf(r.binary));
  EXPECT_GT(r.seconds, 0.0);
  EXPECT_LE(r.seconds, wall + 1e-3);
  EXPECT_LT(wall, 2.0) << "cold NVRTC compile of " << spec_name(spec);
  RecordProperty("cold_compile_ms", static_cast<int>(wall * 1000));
  std::printf("[ compiled ] cold compile of %s: %.3f s, %zu bytes\n", spec_name(spec).c_str(), wall, r.binary.size());
}

TEST(CompileDefaults, EveryQuantizeProblem) {
  std::vector<KernelSpec> specs;
  for (const KernelSpec& p : problems_of(quantize_family())) specs.push_back(default_quantize_spec(quantize_problem_of(p)));
  // 48 IEEE problems + DeepSeek's act_quant arithmetic for each input type + column sums of the 24
  // transposed IEEE problems
  ASSERT_EQ(specs.size(), 75u);
  compile_all(specs, "quantize defaults");
}

TEST(CompileDefaults, EveryDequantizeProblem) {
  std::vector<KernelSpec> specs;
  for (const KernelSpec& p : problems_of(dequantize_family()))
    specs.push_back(default_dequantize_spec(dequantize_problem_of(p)));
  ASSERT_EQ(specs.size(), 24u);
  compile_all(specs, "dequantize defaults");
}

TEST(CompileConfigs, QuantizeStreamBf16E4m3Group128) {
  const auto specs = configs_of(quant_problem(DType::bf16, Fp8Format::e4m3, Granularity::group128, false));
  ASSERT_EQ(specs.size(), configs_per_problem());
  compile_all(specs, "quantize stream bf16 e4m3 1x128, every config");
}

TEST(CompileConfigs, QuantizeRowFp16E5m2) {
  const auto specs = configs_of(quant_problem(DType::fp16, Fp8Format::e5m2, Granularity::row, false));
  ASSERT_EQ(specs.size(), configs_per_problem());
  compile_all(specs, "quantize row fp16 e5m2, every config");
}

TEST(CompileConfigs, QuantizeTileFp32E4m3Block128Transpose) {
  const auto specs = configs_of(quant_problem(DType::fp32, Fp8Format::e4m3, Granularity::block128, true));
  ASSERT_EQ(specs.size(), tile_configs());  // unroll is fixed to 1 on the tile strategy
  compile_all(specs, "quantize tile fp32 e4m3 128x128 transposed, every config");
}

TEST(CompileConfigs, QuantizePerTensorBf16E4m3) {
  const auto specs = configs_of(quant_problem(DType::bf16, Fp8Format::e4m3, Granularity::tensor, false));
  ASSERT_EQ(specs.size(), configs_per_problem());
  compile_all(specs, "quantize per-tensor bf16 e4m3, every config");
}

TEST(CompileConfigs, DequantizeE5m2Fp16Group128) {
  KernelSpec problem = make_dequantize_spec({Fp8Format::e5m2, DType::fp16, Granularity::group128}, {});
  const auto specs = configs_of(problem);
  ASSERT_EQ(specs.size(), configs_per_problem());
  compile_all(specs, "dequantize e5m2 fp16 1x128, every config");
}

std::string ptx_of(const KernelSpec& spec) {
  const CompileResult r = nvrtc_compile(spec_name(spec), render_source(spec), CompileTarget::ptx);
  EXPECT_FALSE(is_elf(r.binary));
  EXPECT_EQ(r.binary.find('\0'), std::string::npos) << "PTX text carries a NUL";
  return r.binary;
}

// The read-only global load a vector of `bytes` bytes compiles to (see load_words).
std::string load_for(std::int64_t bytes) {
  return bytes >= 16 ? "ld.global.nc.v4.u32" : bytes == 8 ? "ld.global.nc.v2.u32" : "ld.global.nc.u32";
}

TEST(CompilePtx, QuantizeDefault1x128) {
  const KernelSpec spec = default_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::group128, false});
  const std::string ptx = ptx_of(spec);
  EXPECT_NE(ptx.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(ptx.find("cvt.rn.satfinite.e4m3x2.f32"), std::string::npos);
  EXPECT_EQ(ptx.find("cvt.rn.satfinite.e5m2x2.f32"), std::string::npos);
  EXPECT_NE(ptx.find(load_for(spec.i("vec") * 2)), std::string::npos) << spec_name(spec);
  EXPECT_NE(ptx.find(".entry fp8jit_quantize("), std::string::npos);
}

TEST(CompilePtx, DequantizeDefault128x128) {
  const KernelSpec spec = default_dequantize_spec({Fp8Format::e4m3, DType::bf16, Granularity::block128});
  const std::string ptx = ptx_of(spec);
  EXPECT_NE(ptx.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(ptx.find("cvt.rn.f16x2.e4m3x2"), std::string::npos);
  EXPECT_EQ(ptx.find("cvt.rn.f16x2.e5m2x2"), std::string::npos);
  EXPECT_NE(ptx.find(load_for(spec.i("vec"))), std::string::npos) << spec_name(spec);
  EXPECT_NE(ptx.find(".entry fp8jit_dequantize("), std::string::npos);
}

TEST(CompilePtx, SixteenByteAccessesAreSingleV4Loads) {
  const KernelSpec q = make_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::group128, false}, {8, 256, 2});
  const std::string qp = ptx_of(q);
  EXPECT_NE(qp.find("ld.global.nc.v4.u32"), std::string::npos);
  EXPECT_NE(qp.find("cvt.rn.satfinite.e4m3x2.f32"), std::string::npos);
  const KernelSpec d = make_dequantize_spec({Fp8Format::e4m3, DType::bf16, Granularity::block128}, {16, 256, 2});
  const std::string dp = ptx_of(d);
  EXPECT_NE(dp.find("ld.global.nc.v4.u32"), std::string::npos);
  EXPECT_NE(dp.find("cvt.rn.f16x2.e4m3x2"), std::string::npos);
  EXPECT_NE(dp.find(".target sm_90a"), std::string::npos);
}

// Programmatic dependent launch: every entry point of every strategy (per-tensor's three passes,
// rows, per row with a transposed output, 1x128, the tile strategy, dequantize) waits for the previous
// grid before it touches global memory.
TEST(CompilePtx, EveryElementwiseEntryWaitsForThePreviousGridFirst) {
  const std::pair<KernelSpec, int> cases[] = {
      {default_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::tensor, false}), 3},
      {default_quantize_spec({DType::fp16, Fp8Format::e5m2, Granularity::row, false}), 1},
      {default_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::row, true}), 3},
      {default_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::group128, false}), 1},
      {default_quantize_spec({DType::fp32, Fp8Format::e4m3, Granularity::block128, true}), 1},
      {default_dequantize_spec({Fp8Format::e4m3, DType::bf16, Granularity::block128}), 1},
  };
  for (const auto& [spec, entries] : cases) {
    SCOPED_TRACE(spec_name(spec));
    EXPECT_EQ(test::expect_grid_dependency_wait_first(ptx_of(spec)), entries);
  }
}

TEST(CompileErrors, BrokenSourceThrowsCompileErrorWithLog) {
  try {
    (void)nvrtc_compile("broken_kernel", "#include \"fp8jit/quant/quantize.cuh\"\nthis is not C++;\n", CompileTarget::cubin);
    FAIL() << "compiled a broken source";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::compile);
    const std::string msg = e.what();
    EXPECT_NE(msg.find("broken_kernel"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--gpu-architecture=sm_90a"), std::string::npos) << msg;
    EXPECT_NE(msg.find("log:"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace fp8jit
