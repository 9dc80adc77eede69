// Architectures other than sm_90a (no GPU needed): the elementwise families need only FP8
// conversions, so every quantize and dequantize problem's default compiles for sm_89 (Ada: L40S,
// L20) and sm_120, its PTX free of Hopper-only instructions; the GEMM family is refused off
// sm_90a, and the runtime's own options stay sm_90a.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/parallel.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/family.hpp"
#include "runtime/jit/nvrtc.hpp"

namespace fp8jit {
namespace {

std::vector<KernelSpec> elementwise_defaults() {
  std::vector<KernelSpec> out;
  for (const KernelSpec& s : enumerate_specs(quantize_family())) {
    KernelSpec d = default_quantize_spec(quantize_problem_of(s));
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  for (const KernelSpec& s : enumerate_specs(dequantize_family())) {
    KernelSpec d = default_dequantize_spec(dequantize_problem_of(s));
    if (std::find(out.begin(), out.end(), d) == out.end()) out.push_back(d);
  }
  return out;
}

void expect_compiles_for(const GpuArch& arch) {
  const std::vector<KernelSpec> specs = elementwise_defaults();
  ASSERT_EQ(specs.size(),
            99u);  // 75 quantize problems (24 of them with column sums), 24 dequantize
  std::vector<std::string> errors(specs.size());
  parallel_for(specs.size(), 2, [&](std::size_t i) {
    const std::string name = spec_name(specs[i]);
    try {
      const std::string cubin =
          nvrtc_compile(name, render_source(specs[i]), CompileTarget::cubin, arch).binary;
      if (cubin.compare(0, 4,
                        "\x7f"
                        "ELF") != 0)
        errors[i] = name + ": not an ELF cubin";
    } catch (const std::exception& e) {
      errors[i] = name + ": " + e.what();
    }
  });
  for (const std::string& e : errors) EXPECT_TRUE(e.empty()) << arch.name() << ": " << e;
}

TEST(CompileArch, EveryElementwiseDefaultCompilesForAda) {
  expect_compiles_for(parse_gpu_arch("sm_89"));
}

TEST(CompileArch, EveryElementwiseDefaultCompilesForBlackwell) {
  expect_compiles_for(parse_gpu_arch("sm_120"));
}

// The PTX for compute_89 (what a driver JIT-compiles for any later GPU) targets sm_89 and holds
// no programmatic-dependent-launch instruction, which sm_89 lacks; the sm_90a PTX keeps it.
TEST(CompileArch, Compute89PtxHasNoHopperInstructions) {
  const KernelSpec spec =
      default_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::group128, true});
  const std::string src = render_source(spec), name = spec_name(spec);
  const std::string ptx89 =
      nvrtc_compile(name, src, CompileTarget::ptx, parse_gpu_arch("sm_89")).binary;
  EXPECT_NE(ptx89.find(".target sm_89"), std::string::npos);
  EXPECT_EQ(ptx89.find("griddepcontrol"), std::string::npos);
  EXPECT_NE(ptx89.find("cvt.rn.satfinite.e4m3x2"), std::string::npos);
  const std::string ptx90a = nvrtc_compile(name, src, CompileTarget::ptx).binary;
  EXPECT_NE(ptx90a.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(ptx90a.find("griddepcontrol.wait"), std::string::npos);
}

TEST(CompileArch, RuntimeOptionsStaySm90a) {
  EXPECT_EQ(nvrtc_options(CompileTarget::cubin).front(), "--gpu-architecture=sm_90a");
  EXPECT_EQ(nvrtc_options(CompileTarget::ptx).front(), "--gpu-architecture=compute_90a");
  EXPECT_EQ(nvrtc_options(CompileTarget::cubin, parse_gpu_arch("sm_89")).front(),
            "--gpu-architecture=sm_89");
  EXPECT_EQ(nvrtc_options(CompileTarget::ptx, parse_gpu_arch("sm_120")).front(),
            "--gpu-architecture=compute_120");
  EXPECT_EQ(parse_gpu_arch("sm_90a"), kSm90a);
  EXPECT_EQ(kSm90a.name(), "sm_90a");
}

TEST(CompileArch, FamiliesSayWhereTheyRun) {
  const FamilyDef& gemm = find_family("gemm");
  EXPECT_EQ(arch_refusal(gemm, 90, true), "");
  for (const char* arch : {"sm_89", "sm_90", "sm_100", "sm_120"}) {
    const GpuArch a = parse_gpu_arch(arch);
    EXPECT_NE(arch_refusal(gemm, a.number, a.arch_specific).find("need sm_90a"), std::string::npos)
        << arch;
  }
  for (const char* family : {"quantize", "dequantize"}) {
    const FamilyDef& f = find_family(family);
    for (const char* arch : {"sm_89", "sm_90", "sm_90a", "sm_100", "sm_120"}) {
      const GpuArch a = parse_gpu_arch(arch);
      EXPECT_EQ(arch_refusal(f, a.number, a.arch_specific), "") << family << " " << arch;
    }
    EXPECT_NE(arch_refusal(f, 80, false).find("sm_89 or later"), std::string::npos) << family;
  }
}

TEST(CompileArch, BadArchitecturesAreRefusedByName) {
  for (const char* bad :
       {"", "sm_", "sm_x", "sm89", "compute_89", "sm_89a", "sm_999", "sm_-1", "sm_9o", "sm_1000"}) {
    try {
      parse_gpu_arch(bad);
      ADD_FAILURE() << "'" << bad << "' accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << bad;
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad + "'"), std::string::npos)
          << e.what();
    }
  }
  // Huge: refused, the message cut (not a 100000-character echo); control bytes escaped.
  for (const std::string bad : {"sm_" + std::string(100000, '9'), std::string("sm_\x1b[2J89")}) {
    try {
      parse_gpu_arch(bad);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
      EXPECT_LT(std::string(e.what()).size(), 1000u);
      EXPECT_EQ(std::string(e.what()).find('\x1b'), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace fp8jit
