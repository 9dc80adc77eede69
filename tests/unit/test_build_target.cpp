// What each family is built as on each GPU (no GPU needed): GEMMs only as sm_90a cubins on
// compute capability 9.0; quantize and dequantize from 8.9 on, as the GPU's own cubin, as
// compute_89 PTX where this NVRTC does not know the GPU, or as the PTX the runtime is asked for.
// Each build has its own cache key, Hopper's keys are those of before, and bad values of the
// option are refused by name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/settings.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"
#include "runtime/jit/build_target.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "tests/common/expect_error.hpp"

namespace fp8jit {
namespace {

const std::vector<int> kArchs = {75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121};
const BuildTarget kCompute89{GpuArch{89, false}, CompileTarget::ptx};

BuildTarget target(const FamilyDef& f, int major, int minor,
                   std::optional<BuildTarget> forced = std::nullopt) {
  return build_target_for(f, major, minor, "0 (test GPU)", forced, kArchs);
}

TEST(BuildTarget, GemmsOnlyOnHopper) {
  EXPECT_EQ(target(gemm_family(), 9, 0), kHopperCubin);
  for (auto [major, minor] : {std::pair{8, 9}, {10, 0}, {12, 0}, {9, 1}, {8, 0}}) {
    const std::string msg = test::error_message(ErrorKind::unsupported,
                                                [&] { (void)target(gemm_family(), major, minor); });
    EXPECT_NE(msg.find("0 (test GPU)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("gemm kernels need 9.0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sm_90a"), std::string::npos) << msg;
  }
  // The elementwise option never reaches a GEMM.
  EXPECT_EQ(target(gemm_family(), 9, 0, kCompute89), kHopperCubin);
}

TEST(BuildTarget, ElementwiseFromAdaOn) {
  for (const FamilyDef* f : {&quantize_family(), &dequantize_family()}) {
    EXPECT_EQ(target(*f, 9, 0), kHopperCubin);  // Hopper: the binaries and keys of before
    EXPECT_EQ(target(*f, 8, 9), (BuildTarget{GpuArch{89, false}, CompileTarget::cubin}));
    EXPECT_EQ(target(*f, 12, 0), (BuildTarget{GpuArch{120, false}, CompileTarget::cubin}));
    EXPECT_EQ(target(*f, 10, 0), (BuildTarget{GpuArch{100, false}, CompileTarget::cubin}));
    // A GPU newer than this NVRTC knows: PTX from the family's oldest architecture.
    EXPECT_EQ(target(*f, 13, 5), kCompute89);
    const std::string msg =
        test::error_message(ErrorKind::unsupported, [&] { (void)target(*f, 8, 6); });
    EXPECT_NE(msg.find("compute capability 8.6"), std::string::npos) << msg;
    EXPECT_NE(msg.find("need 8.9 or later"), std::string::npos) << msg;
  }
}

TEST(BuildTarget, ElementwiseOverride) {
  const FamilyDef& q = quantize_family();
  EXPECT_EQ(target(q, 9, 0, kCompute89), kCompute89);
  EXPECT_EQ(target(q, 8, 9, kCompute89), kCompute89);
  EXPECT_EQ(target(q, 12, 0, kCompute89), kCompute89);
  const BuildTarget compute100{GpuArch{100, false}, CompileTarget::ptx};
  EXPECT_EQ(target(q, 12, 0, compute100), compute100);
  // PTX for a newer architecture than the GPU cannot load there.
  const std::string msg =
      test::error_message(ErrorKind::unsupported, [&] { (void)target(q, 9, 0, compute100); });
  EXPECT_NE(msg.find("compute_100"), std::string::npos) << msg;
  EXPECT_NE(msg.find("compute_90 or older"), std::string::npos) << msg;
  EXPECT_EQ(kCompute89.name(), "compute_89");
  EXPECT_EQ(kHopperCubin.name(), "sm_90a");
}

TEST(BuildTarget, ParsesTheOption) {
  EXPECT_EQ(parse_elementwise_arch(""), std::nullopt);
  EXPECT_EQ(parse_elementwise_arch("compute_89"), kCompute89);
  EXPECT_EQ(parse_elementwise_arch("compute_120"),
            (BuildTarget{GpuArch{120, false}, CompileTarget::ptx}));
  for (const std::string& bad : std::vector<std::string>{
           "sm_89", "compute_", "compute_8", "compute_86", "compute_80", "compute_999",
           "compute_89a", "COMPUTE_89", "compute_-89", "compute_89 ", " compute_89",
           std::string("compute_\x1b[2J"), "compute_" + std::string(100000, '9')}) {
    const std::string msg = test::invalid_message([&] { (void)parse_elementwise_arch(bad); });
    EXPECT_NE(msg.find("elementwise_arch (FP8JIT_ELEMENTWISE_ARCH)"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\x1b'), std::string::npos) << "control bytes are escaped";
    EXPECT_LT(msg.size(), 1000u) << "a huge value is cut";
  }
  EXPECT_NE(test::invalid_message([] {
              (void)parse_elementwise_arch("compute_86");
            }).find("start at compute_89"),
            std::string::npos);
}

TEST(BuildTarget, RuntimeRefusesABadOptionAndReadsTheSetting) {
  RuntimeOptions o;
  o.cache_dir.clear();
  o.db_path.clear();
  o.elementwise_arch = "compute_80";
  EXPECT_NE(test::invalid_message([&] { Runtime rt(o); }).find("compute_80"), std::string::npos);
  ::setenv("FP8JIT_ELEMENTWISE_ARCH", "compute_89", 1);
  const Settings s = Settings::from_env();
  ::unsetenv("FP8JIT_ELEMENTWISE_ARCH");
  EXPECT_EQ(s.elementwise_arch, "compute_89");
  EXPECT_EQ(Settings::from_env().elementwise_arch, "");
}

TEST(BuildTarget, EachBuildHasItsOwnKeyAndHoppersIsUnchanged) {
  const KernelSpec spec = default_quantize_spec({});
  const std::string source = render_source(spec);
  const std::string hopper = binary_cache_key(source, CompileTarget::cubin);
  EXPECT_EQ(binary_cache_key(source, CompileTarget::cubin, {}, kSm90a), hopper);
  EXPECT_NE(hopper.find("--gpu-architecture=sm_90a"), std::string::npos);
  const std::string ada = binary_cache_key(source, CompileTarget::cubin, {}, GpuArch{89, false});
  const std::string ptx = binary_cache_key(source, CompileTarget::ptx, {}, GpuArch{89, false});
  EXPECT_NE(ada, hopper);
  EXPECT_NE(ptx, ada);
  EXPECT_NE(ptx.find("--gpu-architecture=compute_89"), std::string::npos);
  KernelCache cache({});
  EXPECT_EQ(cache.cubin_key(spec), cache.cubin_key(spec, kHopperCubin));
  EXPECT_NE(cache.cubin_key(spec, kCompute89), cache.cubin_key(spec));
}

TEST(BuildTarget, CompilesElementwisePtxForCompute89) {
  KernelCache cache({});
  const std::string ptx = cache.cubin(default_quantize_spec({}), kCompute89);
  EXPECT_NE(ptx.find(".target sm_89"), std::string::npos);
  EXPECT_EQ(ptx.find("griddepcontrol"), std::string::npos)
      << "a Hopper instruction in compute_89 PTX";
  EXPECT_NE(ptx.find("cvt.rn.satfinite.e4m3x2"), std::string::npos);
  EXPECT_EQ(cache.stats().compiles, 1u);
}

}  // namespace
}  // namespace fp8jit
