// KernelCache and Runtime without a GPU: cubins come from NVRTC once, then from the disk cache;
// a damaged cache file is recompiled; argument errors are reported before any driver use.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "runtime/jit/nvrtc.hpp"
#include "runtime/sass/ffma_reuse.hpp"
#include "runtime/sass/gemm_post_passes.hpp"
#include "tests/common/expect_error.hpp"
#include "tests/common/fake_pointers.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool is_elf(const std::string& bin) {
  return bin.size() > 4 && bin.compare(0, 4,
                                       "\x7f"
                                       "ELF") == 0;
}

class KernelCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fp8jit_kernel_cache_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string cache_file(KernelCache& c) { return c.disk().path_for(c.cubin_key(spec_)); }

  std::string dir_;
  const KernelSpec spec_ =
      make_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::row, false}, {8, 128, 2});
};

TEST_F(KernelCacheTest, CompileOnceThenDiskHitThenRecompileCorruptFile) {
  std::string original;
  {
    KernelCache c({.cache_dir = dir_});
    original = c.cubin(spec_);
    ASSERT_TRUE(is_elf(original));
    const CacheStats s = c.stats();
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.disk_misses, 1u);
    EXPECT_EQ(s.disk_writes, 1u);
    EXPECT_EQ(s.disk_hits, 0u);
    EXPECT_EQ(s.disk_corrupt, 0u);
    EXPECT_GT(s.compile_seconds, 0.0);
    const std::string file = cache_file(c);
    ASSERT_EQ(file.rfind(dir_ + "/", 0), 0u) << file;
    ASSERT_TRUE(fs::is_regular_file(file)) << file;
    EXPECT_GT(fs::file_size(file), original.size());
  }
  {
    KernelCache c({.cache_dir = dir_});  // a new process would see exactly this
    EXPECT_EQ(c.cubin(spec_), original);
    const CacheStats s = c.stats();
    EXPECT_EQ(s.compiles, 0u);
    EXPECT_EQ(s.disk_hits, 1u);
    EXPECT_EQ(s.disk_misses, 0u);
    EXPECT_EQ(s.disk_writes, 0u);
    EXPECT_EQ(s.compile_seconds, 0.0);
    c.reset_stats();
    const CacheStats z = c.stats();
    EXPECT_EQ(z.disk_hits + z.compiles + z.disk_misses, 0u);
  }
  {
    KernelCache c({.cache_dir = dir_});
    const std::string file = cache_file(c);
    fs::resize_file(file, fs::file_size(file) / 2);  // a torn write
    EXPECT_EQ(c.cubin(spec_), original);
    const CacheStats s = c.stats();
    EXPECT_EQ(s.compiles, 1u);
    EXPECT_EQ(s.disk_corrupt, 1u);
    EXPECT_EQ(s.disk_misses, 1u);
    EXPECT_EQ(s.disk_hits, 0u);
    EXPECT_EQ(s.disk_writes, 1u);
    EXPECT_EQ(read_bytes(file).size(), fs::file_size(file));
  }
  {
    KernelCache c({.cache_dir = dir_});  // the rewritten entry is whole again
    EXPECT_EQ(c.cubin(spec_), original);
    EXPECT_EQ(c.stats().disk_hits, 1u);
    EXPECT_EQ(c.stats().compiles, 0u);
    // Flip one payload byte: the checksum catches it.
    const std::string file = cache_file(c);
    std::string bytes = read_bytes(file);
    bytes[bytes.size() - 100] ^= 0x5a;
    std::ofstream(file, std::ios::binary | std::ios::trunc)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_EQ(c.cubin(spec_), original);
    EXPECT_EQ(c.stats().disk_corrupt, 1u);
    EXPECT_EQ(c.stats().compiles, 1u);
  }
}

TEST_F(KernelCacheTest, DistinctSpecsGetDistinctFiles) {
  KernelCache c({.cache_dir = dir_});
  const KernelSpec other =
      make_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::row, false}, {8, 256, 2});
  const std::string a = c.cubin(spec_), b = c.cubin(other);
  EXPECT_NE(a, b);
  EXPECT_NE(cache_file(c),
            c.disk().path_for(binary_cache_key(render_source(other), CompileTarget::cubin)));
  EXPECT_EQ(c.stats().compiles, 2u);
  EXPECT_EQ(c.stats().disk_writes, 2u);
  EXPECT_EQ(c.cubin(other), b);
  EXPECT_EQ(c.stats().disk_hits, 1u);
}

// gemm cubins go through gemm's post-passes before they are stored and loaded: with FFMA reuse,
// exactly the bytes the reuse pass makes of NVRTC's (what the cache stored before the passes
// were registered per family); without, NVRTC's bytes, under their own key.
TEST_F(KernelCacheTest, GemmCubinsThroughTheirPostPasses) {
  GemmProblem block{};
  block.scale = ScaleMode::block;
  const KernelSpec g = make_gemm_spec(block, GemmConfig{128, 256, 3, 16});
  const std::string nvrtc =
      nvrtc_compile(spec_name(g), render_source(g), CompileTarget::cubin).binary;
  std::string hinted = nvrtc;
  ASSERT_GT(hold_ffma_factors(hinted).held, 0);
  {
    KernelCache c({.cache_dir = dir_, .post_passes = gemm_post_passes(true)});
    EXPECT_EQ(c.cubin(g), hinted);
    EXPECT_EQ(c.stats().compiles, 1u);
  }
  KernelCache c({.cache_dir = dir_, .post_passes = gemm_post_passes(false)});
  EXPECT_EQ(c.cubin(g), nvrtc);
  EXPECT_EQ(c.stats().disk_hits, 0u);
  EXPECT_EQ(c.stats().compiles, 1u);
  // Registered for gemm, they leave other families' cubins and keys alone: one shared entry.
  KernelCache q({.cache_dir = dir_, .post_passes = gemm_post_passes(true)});
  const std::string quantize = q.cubin(spec_);
  EXPECT_EQ(c.cubin(spec_), quantize);
  EXPECT_EQ(c.stats().disk_hits, 1u);
}

TEST_F(KernelCacheTest, KeepSourceWritesTheSourceBesideTheCubin) {
  KernelCache plain({.cache_dir = dir_});
  plain.cubin(spec_);
  EXPECT_FALSE(fs::exists(cache_file(plain) + ".cu"));
  fs::remove(cache_file(plain));
  KernelCache keep({.cache_dir = dir_, .keep_source = true});
  keep.cubin(spec_);
  EXPECT_EQ(read_bytes(cache_file(keep) + ".cu"), render_source(spec_));
}

TEST(KernelCacheDisabled, EmptyDirAlwaysCompiles) {
  KernelCache c({});
  const KernelSpec spec = default_dequantize_spec({Fp8Format::e4m3, DType::bf16, Granularity::row});
  const std::string a = c.cubin(spec);
  const std::string b = c.cubin(spec);
  EXPECT_TRUE(is_elf(a));
  EXPECT_EQ(a, b);  // NVRTC output is deterministic
  const CacheStats s = c.stats();
  EXPECT_EQ(s.compiles, 2u);
  EXPECT_EQ(s.disk_misses, 2u);
  EXPECT_EQ(s.disk_hits, 0u);
  EXPECT_EQ(s.disk_writes, 0u);
  EXPECT_EQ(c.disk().path_for("anything"), "");
}

TEST_F(KernelCacheTest, RuntimeCompileUsesTheDiskCache) {
  std::string first;
  {
    Runtime rt(RuntimeOptions{dir_});
    EXPECT_EQ(rt.cache_dir(), dir_);
    first = rt.compile(spec_);
    ASSERT_TRUE(is_elf(first));
    EXPECT_EQ(rt.cache_stats().compiles, 1u);
    EXPECT_EQ(rt.cache_stats().disk_writes, 1u);
    EXPECT_EQ(rt.compile(spec_), first);  // the cubin path does not keep bytes in memory
    EXPECT_EQ(rt.cache_stats().disk_hits, 1u);
    rt.reset_cache_stats();
    EXPECT_EQ(rt.cache_stats().compiles + rt.cache_stats().disk_hits, 0u);
  }
  {
    Runtime rt(RuntimeOptions{dir_});
    EXPECT_EQ(rt.compile(spec_), first);
    EXPECT_EQ(rt.cache_stats().compiles, 0u);
    EXPECT_EQ(rt.cache_stats().disk_hits, 1u);
  }
  {
    Runtime rt(RuntimeOptions{""});
    EXPECT_EQ(rt.compile(spec_), first);
    EXPECT_EQ(rt.cache_stats().compiles, 1u);
    EXPECT_EQ(rt.cache_stats().disk_writes, 0u);
  }
  EXPECT_THROW((void)Runtime(RuntimeOptions{dir_}).compile(KernelSpec{"quantize", {}}), Error);
}

// ---- Runtime::quantize / dequantize without a GPU ------------------------------------------

using test::fake;
using test::fake_f;

QuantizeArgs valid_quantize_args() {
  QuantizeArgs a;
  a.x = fake(0x10000);
  a.m = 256;
  a.k = 512;
  a.q = fake(0x200000);
  a.scales = fake_f(0x400000);
  return a;
}

DequantizeArgs valid_dequantize_args() {
  DequantizeArgs d;
  d.q = fake(0x10000);
  d.m = 256;
  d.k = 512;
  d.scales = fake_f(0x400000);
  d.y = fake(0x200000);
  return d;
}

TEST(KernelCacheRuntime, QuantizeWithoutGpuIsADriverError) {
  if (driver::available()) GTEST_SKIP() << "a GPU is present";
  Runtime rt(RuntimeOptions{""});
  for (const std::string& msg :
       {test::error_message(ErrorKind::driver,
                            [&] { rt.quantize(valid_quantize_args(), nullptr); }),
        test::error_message(ErrorKind::driver,
                            [&] { rt.dequantize(valid_dequantize_args(), nullptr); }),
        test::error_message(ErrorKind::driver, [&] {
          rt.quantize(valid_quantize_args(), default_quantize_spec({}), nullptr);
        })}) {
    EXPECT_NE(msg.find("libcuda"), std::string::npos) << msg;
  }
  EXPECT_EQ(rt.cache_stats().compiles, 0u);  // nothing compiled for a launch that cannot happen
}

TEST(KernelCacheRuntime, InvalidQuantizeArgsNamedBeforeDriverUse) {
  Runtime rt(RuntimeOptions{""});
  struct Case {
    const char* needle;
    void (*edit)(QuantizeArgs&);
  };
  const Case cases[] = {
      {"invalid m = 0", [](QuantizeArgs& a) { a.m = 0; }},
      {"invalid k = -5", [](QuantizeArgs& a) { a.k = -5; }},
      {"invalid x = nullptr", [](QuantizeArgs& a) { a.x = nullptr; }},
      {"invalid q = nullptr", [](QuantizeArgs& a) { a.q = nullptr; }},
      {"invalid scales = nullptr", [](QuantizeArgs& a) { a.scales = nullptr; }},
      {"invalid ldx = 511: must be at least 512", [](QuantizeArgs& a) { a.ldx = 511; }},
      {"invalid ldq = 100", [](QuantizeArgs& a) { a.ldq = 100; }},
      {"invalid x = 0x10001: must be aligned to 2 bytes",
       [](QuantizeArgs& a) { a.x = fake(0x10001); }},
      {"invalid x = 0x10002: must be aligned to 4 bytes",
       [](QuantizeArgs& a) { a.x = fake(0x10002), a.input = DType::fp32; }},
      {"invalid static_scale", [](QuantizeArgs& a) { a.static_scale = fake_f(0x500000); }},
      {"invalid scales_t", [](QuantizeArgs& a) { a.scales_t = fake_f(0x600000); }},
      {"invalid scales_t = nullptr",
       [](QuantizeArgs& a) { a.granularity = Granularity::row, a.qt = fake(0x700000); }},
      {"invalid scales_t = nullptr", [](QuantizeArgs& a) { a.qt = fake(0x700000); }},
      {"invalid ldqt = 256", [](QuantizeArgs& a) { a.ldqt = 256; }},
      {"invalid deepseek_arithmetic = true: DeepSeek's act_quant arithmetic is 1x128 E4M3 without "
       "a "
       "transposed output; here granularity 128x128",
       [](QuantizeArgs& a) {
         a.deepseek_arithmetic = true, a.granularity = Granularity::block128;
       }},
      {"format e5m2",
       [](QuantizeArgs& a) { a.deepseek_arithmetic = true, a.format = Fp8Format::e5m2; }},
      {"qt given",
       [](QuantizeArgs& a) {
         a.deepseek_arithmetic = true, a.qt = fake(0x700000), a.scales_t = fake_f(0x600000);
       }},
  };
  for (const Case& c : cases) {
    QuantizeArgs a = valid_quantize_args();
    c.edit(a);
    SCOPED_TRACE(c.needle);
    for (const std::string& msg :
         {test::error_message(ErrorKind::invalid_argument, [&] { rt.quantize(a, nullptr); }),
          test::error_message(ErrorKind::invalid_argument,
                              [&] { rt.quantize(a, default_quantize_spec({}), nullptr); }),
          test::error_message(ErrorKind::invalid_argument, [&] { (void)rt.select(a); })})
      EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
  }
  // A spec that does not match the arguments is refused before the driver, too.
  const std::string msg = test::error_message(ErrorKind::invalid_argument, [&] {
    rt.quantize(valid_quantize_args(),
                default_quantize_spec({DType::fp16, Fp8Format::e4m3, Granularity::group128, false}),
                nullptr);
  });
  EXPECT_NE(msg.find("invalid spec = quant_sm90_fp16_e4m3_1x128"), std::string::npos) << msg;
  // So is the IEEE kernel for DeepSeek's arithmetic, and the reverse: the bytes would differ.
  QuantizeArgs ds = valid_quantize_args();
  ds.deepseek_arithmetic = true;
  QuantizeProblem ds_problem;
  ds_problem.deepseek_arithmetic = true;
  for (const auto& [args, spec] :
       {std::pair{ds, default_quantize_spec({})},
        std::pair{valid_quantize_args(), default_quantize_spec(ds_problem)}}) {
    const std::string m =
        test::error_message(ErrorKind::invalid_argument, [&] { rt.quantize(args, spec, nullptr); });
    EXPECT_NE(m.find("transpose or arithmetic"), std::string::npos) << m;
  }
  EXPECT_EQ(rt.cache_stats().compiles, 0u);
}

TEST(KernelCacheRuntime, DeepSeekArithmeticIsPartOfTheSelectedKernel) {
  Runtime rt(RuntimeOptions{""});
  QuantizeArgs a = valid_quantize_args();
  a.deepseek_arithmetic = true;
  const KernelSpec spec = rt.select(a);
  EXPECT_EQ(spec.s("arithmetic"), "deepseek");
  EXPECT_TRUE(quantize_problem_of(spec).deepseek_arithmetic);
  EXPECT_EQ(spec_name(spec).find("_ds_") != std::string::npos, true) << spec_name(spec);
  EXPECT_EQ(rt.select(valid_quantize_args()).s("arithmetic"), "ieee");
}

TEST(KernelCacheRuntime, HostReferenceRefusesDeepSeekArithmetic) {
  std::vector<std::uint16_t> x(4 * 128, 0x3f80);  // bf16 1.0
  std::vector<std::uint8_t> q(x.size(), 0xAB);
  std::vector<float> scales(4, -1.0f);
  QuantizeArgs a;
  a.x = x.data();
  a.m = 4;
  a.k = 128;
  a.q = q.data();
  a.scales = scales.data();
  a.deepseek_arithmetic = true;
  const std::string msg =
      test::error_message(ErrorKind::invalid_argument, [&] { reference::quantize(a); });
  EXPECT_NE(msg.find("IEEE arithmetic only"), std::string::npos) << msg;
  EXPECT_EQ(q, std::vector<std::uint8_t>(x.size(), 0xAB));  // nothing written
  a.deepseek_arithmetic = false;
  reference::quantize(a);
  EXPECT_EQ(scales[0], 1.0f / 448.0f);
  EXPECT_EQ(q[0], 0x7E);  // 448 in E4M3
}

TEST(KernelCacheRuntime, InvalidDequantizeArgsNamedBeforeDriverUse) {
  Runtime rt(RuntimeOptions{""});
  const std::pair<const char*, void (*)(DequantizeArgs&)> cases[] = {
      {"invalid m = 0", [](DequantizeArgs& d) { d.m = 0; }},
      {"invalid q = nullptr", [](DequantizeArgs& d) { d.q = nullptr; }},
      {"invalid y = 0x200001", [](DequantizeArgs& d) { d.y = fake(0x200001); }},
      {"invalid ldy = 3", [](DequantizeArgs& d) { d.ldy = 3; }},
      {"invalid scales = 0x400002", [](DequantizeArgs& d) { d.scales = fake_f(0x400002); }},
  };
  for (const auto& [needle, edit] : cases) {
    DequantizeArgs d = valid_dequantize_args();
    edit(d);
    EXPECT_NE(test::error_message(ErrorKind::invalid_argument, [&] { rt.dequantize(d, nullptr); })
                  .find(needle),
              std::string::npos)
        << needle;
  }
}

TEST(KernelCacheRuntime, SelectPicksTheHeuristicDefaultForTheAlignment) {
  Runtime rt(RuntimeOptions{""});
  QuantizeArgs a = valid_quantize_args();  // 64 KiB aligned, k = 512: any vector width
  EXPECT_EQ(rt.select(a), default_quantize_spec({}, 16));
  a.x = fake(0x10008);  // 8-byte aligned: 4 bf16 per access at most
  EXPECT_EQ(rt.select(a), default_quantize_spec({}, 4));
  EXPECT_EQ(rt.select(a).i("vec"), 4);
  a = valid_quantize_args();
  a.ldx = 520;  // rows 1040 bytes apart: 8 bf16 (16 bytes) per access at most
  EXPECT_EQ(rt.select(a), default_quantize_spec({}, 8));
  a = valid_quantize_args();
  a.granularity = Granularity::block128;
  a.qt = fake(0x700000);
  EXPECT_EQ(rt.select(a),
            default_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::block128, true}, 16));
  EXPECT_EQ(rt.select(valid_dequantize_args()), default_dequantize_spec({}, 16));
  DequantizeArgs d = valid_dequantize_args();
  d.q = fake(0x10004);  // FP8 codes 4-byte aligned
  EXPECT_EQ(rt.select(d), default_dequantize_spec({}, 4));
}

}  // namespace
}  // namespace fp8jit
