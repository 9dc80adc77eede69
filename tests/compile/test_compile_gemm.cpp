// NVRTC compiles the gemm family for sm_90a (no GPU needed). The space has about 10^5 variants of
// up to a few seconds each, so this compiles a fixed spread sample (with every config parameter's
// extremes) and the heuristic default of every DeepSeek-V3 shape, and checks that the PTX of
// three tile widths carries the instructions the kernel is built around.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/family.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/parallel.hpp"

namespace fp8jit {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

bool is_elf(const std::string& bin) { return bin.size() > 4 && bin.compare(0, 4, "\x7f" "ELF") == 0; }

template <class T>
T read_le(const std::string& b, std::size_t at) {
  T v{};
  if (at + sizeof(T) <= b.size()) std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

// Registers per thread ptxas gave `function` in an sm_90a cubin: the top byte of sh_info of its
// .text.<function> section (what cuobjdump prints as REG). -1 where the section is missing.
int cubin_registers(const std::string& elf, const std::string& function) {
  const auto shoff = read_le<std::uint64_t>(elf, 0x28);
  const auto shentsize = read_le<std::uint16_t>(elf, 0x3A), shnum = read_le<std::uint16_t>(elf, 0x3C),
             shstrndx = read_le<std::uint16_t>(elf, 0x3E);
  if (elf.size() < 0x40 || shentsize < 0x40 || shstrndx >= shnum) return -1;
  const auto strtab = read_le<std::uint64_t>(elf, shoff + std::uint64_t{shstrndx} * shentsize + 0x18);
  const std::string want = ".text." + function;
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const std::uint64_t sh = shoff + std::uint64_t{i} * shentsize;
    const std::uint64_t name = strtab + read_le<std::uint32_t>(elf, sh);
    if (name >= elf.size() || elf.compare(name, want.size() + 1, want.c_str(), want.size() + 1) != 0) continue;
    return static_cast<int>(read_le<std::uint32_t>(elf, sh + 0x2C) >> 24);
  }
  return -1;
}

struct Outcome {
  std::string name;
  std::size_t bytes = 0;
  bool elf = false;
  double seconds = 0;
  std::string error;
  std::string log;
  int registers = -1;
};

// Compiles every spec to a cubin on all hardware threads; checks each one and reports the times.
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
      o.log = r.log;
      o.registers = cubin_registers(r.binary, "fp8jit_gemm");
    } catch (const std::exception& e) {
      o.error = e.what();
    }
  });
  const double wall = seconds_since(t0);
  double slowest = 0, sum = 0;
  std::string slowest_name;
  for (const Outcome& o : out) {
    EXPECT_TRUE(o.error.empty()) << o.name << ": " << o.error;
    EXPECT_TRUE(o.elf) << o.name << ": " << o.bytes << " bytes, not an ELF cubin";
    if (!o.log.empty()) std::printf("LOG %s:\n%s\n", o.name.c_str(), o.log.c_str());
    std::printf("REGS %s %d\n", o.name.c_str(), o.registers);
    sum += o.seconds;
    if (o.seconds > slowest) {
      slowest = o.seconds;
      slowest_name = o.name;
    }
  }
  const double mean = specs.empty() ? 0 : sum / static_cast<double>(specs.size());
  std::printf("[ compiled ] %s: %zu variants for sm_90a in %.1f s wall on %d threads (mean %.3f s, slowest %.3f s: %s)\n",
              what, specs.size(), wall, jobs, mean, slowest, slowest_name.c_str());
  ::testing::Test::RecordProperty("variants", static_cast<int>(specs.size()));
  ::testing::Test::RecordProperty("wall_ms", static_cast<int>(wall * 1000));
  ::testing::Test::RecordProperty("mean_compile_ms", static_cast<int>(mean * 1000));
  ::testing::Test::RecordProperty("slowest_compile_ms", static_cast<int>(slowest * 1000));
}

struct Shape {
  std::int64_t m, n, k;
};

// DeepSeek-V3's GEMM shapes, from the shared shape list (empty where the file is absent).
std::vector<Shape> deepseek_shapes() {
  std::ifstream in(std::string(FP8JIT_SOURCE_DIR) + "/../shared/shapes/deepseek_v3.csv");
  std::vector<Shape> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("m,", 0) == 0) continue;
    std::istringstream fields(line);
    Shape s{};
    char c1 = 0, c2 = 0;
    if (fields >> s.m >> c1 >> s.n >> c2 >> s.k && c1 == ',' && c2 == ',') out.push_back(s);
    else ADD_FAILURE() << "bad line in deepseek_v3.csv: " << line;
  }
  return out;
}

TEST(CompileGemm, SpreadSampleOfTheConfigSpace) {
  const std::vector<KernelSpec> specs = spread_sample(gemm_family(), 60);
  // 60 evenly spaced picks plus the smallest and largest value of each config parameter.
  ASSERT_GE(specs.size(), 60u);
  ASSERT_LE(specs.size(), 68u);
  std::set<std::int64_t> block_n, block_m;
  for (const KernelSpec& s : specs) {
    block_n.insert(s.i("block_n"));
    block_m.insert(s.i("block_m"));
  }
  EXPECT_TRUE(block_n.count(16) && block_n.count(256));
  EXPECT_TRUE(block_m.count(64) && block_m.count(256));
  compile_all(specs, "gemm spread sample");
}

TEST(CompileGemm, DeepSeekV3Defaults) {
  const std::vector<Shape> shapes = deepseek_shapes();
  if (shapes.empty()) GTEST_SKIP() << "no " FP8JIT_SOURCE_DIR "/../shared/shapes/deepseek_v3.csv";
  std::vector<KernelSpec> specs;
  std::set<std::string> seen;
  for (const Shape& sh : shapes)
    for (ScaleMode mode : {ScaleMode::block, ScaleMode::tensor}) {
      const KernelSpec s = default_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, mode, false}, sh.m, sh.n, sh.k);
      if (seen.insert(spec_name(s)).second) specs.push_back(s);
    }
  ASSERT_GE(specs.size(), 2u);
  compile_all(specs, "gemm DeepSeek-V3 defaults (block and tensor scaling, bf16 out)");
}

// Narrowest, DeepSeek's and widest (fast accumulation only) tiles, with different format pairs,
// scale modes and warpgroup counts: the PTX holds the variant's wgmma, TMA loads, mbarrier waits
// and register moves.
TEST(CompileGemmPtx, WgmmaTmaMbarrierAndSetmaxnreg) {
  const std::vector<KernelSpec> specs = {
      make_gemm_spec({Fp8Format::e5m2, Fp8Format::e4m3, DType::fp32, ScaleMode::rowwise, true}, {64, 16, 4, 1}),
      make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false}, {128, 128, 5, 8}),
      make_gemm_spec({Fp8Format::e4m3, Fp8Format::e5m2, DType::fp16, ScaleMode::tensor, false, true}, {128, 256, 4, 16}),
  };
  std::vector<std::string> ptx(specs.size());
  parallel_for(specs.size(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), [&](std::size_t i) {
    try {
      ptx[i] = nvrtc_compile(spec_name(specs[i]), render_source(specs[i]), CompileTarget::ptx).binary;
    } catch (const std::exception& e) {
      ptx[i] = std::string("ERROR ") + e.what();
    }
  });
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const KernelSpec& s = specs[i];
    const std::string& p = ptx[i];
    SCOPED_TRACE(spec_name(s));
    ASSERT_EQ(p.rfind("ERROR ", 0), std::string::npos) << p;
    EXPECT_FALSE(is_elf(p));
    EXPECT_EQ(p.find('\0'), std::string::npos) << "PTX text carries a NUL";
    const std::string wgmma = fmt::format("wgmma.mma_async.sync.aligned.m64n{}k32.f32.{}.{}", s.i("block_n"),
                                          s.s("a_format"), s.s("b_format"));
    EXPECT_NE(p.find(wgmma), std::string::npos) << wgmma;
    // No wgmma of another width or format pair.
    std::size_t wgmmas = 0, other = 0;
    for (auto pos = p.find("wgmma.mma_async"); pos != std::string::npos; pos = p.find("wgmma.mma_async", pos + 1)) {
      ++wgmmas;
      if (p.compare(pos, wgmma.size(), wgmma) != 0) ++other;
    }
    EXPECT_GT(wgmmas, 0u);
    EXPECT_EQ(other, 0u);
    for (const char* needle : {"cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity", "setmaxnreg.inc",
                               "setmaxnreg.dec", "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group",
                               ".target sm_90a", ".entry fp8jit_gemm("})
      EXPECT_NE(p.find(needle), std::string::npos) << needle;
    // The producer gives registers up; the consumers (one or two warpgroups) take them.
    EXPECT_NE(p.find("setmaxnreg.dec.sync.aligned.u32 40;"), std::string::npos);
    EXPECT_NE(p.find(fmt::format("setmaxnreg.inc.sync.aligned.u32 {};", s.i("block_m") == 64 ? 240 : 232)),
              std::string::npos);
  }
}

}  // namespace
}  // namespace fp8jit
