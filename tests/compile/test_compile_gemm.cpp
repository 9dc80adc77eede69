// NVRTC compiles the gemm family for sm_90a (no GPU needed). The space has about 3 x 10^5 variants
// of up to a few seconds each, so this compiles a fixed spread sample (with every config
// parameter's extremes, 2-CTA clusters along M and N among them, and every problem value) and the
// heuristic default of every DeepSeek-V3 shape, and checks that the PTX of three tile widths and
// of a cluster along each axis carries the instructions the kernel is built around.
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

#include "tests/common/ptx_checks.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/families/gemm_geometry.hpp"
#include "generator/family.hpp"
#include "runtime/jit/nvrtc.hpp"
#include "common/parallel.hpp"
#include "tests/common/deepseek_shapes.hpp"

namespace fp8jit {
namespace {

using test::deepseek_shapes;
using test::Shape;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool is_elf(const std::string& bin) {
  return bin.size() > 4 && bin.compare(0, 4,
                                       "\x7f"
                                       "ELF") == 0;
}

template <class T>
T read_le(const std::string& b, std::size_t at) {
  T v{};
  if (at + sizeof(T) <= b.size()) std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

// What ptxas recorded for one kernel of an sm_90a cubin, from its ELF .nv.info section (what
// `cuobjdump -res-usage` prints): registers per thread and the stack frame, which is non-zero only
// where registers spill to local memory (the gemm kernel has no local arrays or calls).
struct KernelResources {
  int registers = -1;
  int frame_bytes = -1;
};

KernelResources cubin_resources(const std::string& elf, const std::string& function) {
  KernelResources out;
  if (elf.size() < 0x40 ||
      elf.compare(0, 4,
                  "\x7f"
                  "ELF") != 0 ||
      elf[4] != 2)
    return out;  // ELF64 only
  const auto shoff = read_le<std::uint64_t>(elf, 0x28);
  const std::uint16_t shentsize = read_le<std::uint16_t>(elf, 0x3A),
                      shnum = read_le<std::uint16_t>(elf, 0x3C);
  const std::uint16_t shstrndx = read_le<std::uint16_t>(elf, 0x3E);
  if (shentsize < 0x40 || shstrndx >= shnum) return out;
  struct Section {
    std::string name;
    std::uint32_t type;
    std::uint64_t offset, size, entsize;
    std::uint32_t link;
  };
  std::vector<Section> sections(shnum);
  for (std::uint16_t i = 0; i < shnum; ++i) {
    const std::uint64_t sh = shoff + std::uint64_t{i} * shentsize;
    sections[i] = {{},
                   read_le<std::uint32_t>(elf, sh + 4),
                   read_le<std::uint64_t>(elf, sh + 0x18),
                   read_le<std::uint64_t>(elf, sh + 0x20),
                   read_le<std::uint64_t>(elf, sh + 0x38),
                   read_le<std::uint32_t>(elf, sh + 0x28)};
  }
  auto c_string = [&](std::uint64_t at) {
    if (at >= elf.size()) return std::string();
    const std::size_t end = elf.find('\0', at);
    return elf.substr(at, end == std::string::npos ? std::string::npos : end - at);
  };
  for (Section& sec : sections)
    sec.name = c_string(
        sections[shstrndx].offset +
        read_le<std::uint32_t>(elf, shoff + std::uint64_t(&sec - sections.data()) * shentsize));
  // The function's index in the symbol table.
  std::int64_t symbol = -1;
  for (const Section& sec : sections) {
    if (sec.type != 2 /* SHT_SYMTAB */ || sec.entsize < 24 || sec.link >= shnum) continue;
    for (std::uint64_t i = 0; i * sec.entsize < sec.size; ++i)
      if (c_string(sections[sec.link].offset +
                   read_le<std::uint32_t>(elf, sec.offset + i * sec.entsize)) == function)
        symbol = static_cast<std::int64_t>(i);
  }
  if (symbol < 0) return out;
  // .nv.info: records of {u8 format, u8 attribute, value}; format 4 (EIFMT_SVAL) carries a u16 size
  // and that many bytes, the others a u16. EIATTR_REGCOUNT (0x2f) and EIATTR_FRAME_SIZE (0x11) are
  // {u32 symbol, u32 value}.
  for (const Section& sec : sections) {
    if (sec.name != ".nv.info") continue;
    for (std::uint64_t at = sec.offset; at + 4 <= sec.offset + sec.size;) {
      const auto format = static_cast<std::uint8_t>(elf[at]),
                 attribute = static_cast<std::uint8_t>(elf[at + 1]);
      const std::uint16_t size = read_le<std::uint16_t>(elf, at + 2);
      if (format == 4 && size == 8 &&
          read_le<std::uint32_t>(elf, at + 4) == static_cast<std::uint32_t>(symbol)) {
        if (attribute == 0x2f)
          out.registers = static_cast<int>(read_le<std::uint32_t>(elf, at + 8));
        if (attribute == 0x11)
          out.frame_bytes = static_cast<int>(read_le<std::uint32_t>(elf, at + 8));
      }
      at += format == 4 ? 4 + size : 4;
    }
  }
  return out;
}

struct Outcome {
  std::string name;
  std::size_t bytes = 0;
  bool elf = false;
  double seconds = 0;
  std::string error;
  std::string log;
  KernelResources resources, reduce;
  int threads = 0;
  bool dense = true;
  KernelResources columns;    // fp8jit_gemm_scale_columns
  bool row_scales_a = false;  // whether the module must hold it (block and group scaling)
};

// Compiles every spec to a cubin on all hardware threads; checks each one (an ELF cubin whose
// kernel fits the register file and does not spill) and reports the times.
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
      o.resources = cubin_resources(r.binary, "fp8jit_gemm");
      o.reduce = cubin_resources(r.binary, "fp8jit_gemm_reduce");
      o.columns = cubin_resources(r.binary, "fp8jit_gemm_scale_columns");
      o.row_scales_a = gemm_reads_row_scales_a(gemm_problem_of(specs[i]));
      o.threads = spec_block_threads(specs[i]);
      // Grouped launches never split K, nor do kernels built for TMA epilogues: no reduction.
      o.dense = gemm_problem_of(specs[i]).layout == GemmLayout::dense &&
                gemm_config_of(specs[i]).epilogue == GemmEpilogue::any;
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
    // ptxas fitted the kernel into the register file at launch, below the consumers' setmaxnreg
    // target (an increase must not shrink the allocation), and spilt nothing.
    const int consumer_regs = o.threads == 256 ? 240 : 232;
    EXPECT_GT(o.resources.registers, 0) << o.name;
    EXPECT_LE(o.resources.registers * o.threads, 65536)
        << o.name << ": " << o.resources.registers << " registers";
    EXPECT_LE(o.resources.registers, consumer_regs) << o.name;
    EXPECT_EQ(o.resources.frame_bytes, 0) << o.name << ": registers spill to a stack frame";
    EXPECT_EQ(o.log.find("warning"), std::string::npos) << o.name << ":\n" << o.log;
    if (o.dense) {
      EXPECT_GT(o.reduce.registers, 0) << o.name << ": no fp8jit_gemm_reduce in the cubin";
      EXPECT_EQ(o.reduce.frame_bytes, 0) << o.name << ": fp8jit_gemm_reduce spills";
    } else {
      EXPECT_LT(o.reduce.registers, 0)
          << o.name << ": a reduction kernel in a cubin that never splits K";
    }
    if (o.row_scales_a) {
      EXPECT_GT(o.columns.registers, 0) << o.name << ": no fp8jit_gemm_scale_columns in the cubin";
      EXPECT_EQ(o.columns.frame_bytes, 0) << o.name << ": fp8jit_gemm_scale_columns spills";
    } else {
      EXPECT_LT(o.columns.registers, 0) << o.name << ": a scale copy where A has no 1x128 scales";
    }
    sum += o.seconds;
    if (o.seconds > slowest) {
      slowest = o.seconds;
      slowest_name = o.name;
    }
  }
  const double mean = specs.empty() ? 0 : sum / static_cast<double>(specs.size());
  std::printf(
      "[ compiled ] %s: %zu variants for sm_90a in %.1f s wall on %d threads (mean %.3f s, slowest "
      "%.3f s: %s)\n",
      what, specs.size(), wall, jobs, mean, slowest, slowest_name.c_str());
  ::testing::Test::RecordProperty("variants", static_cast<int>(specs.size()));
  ::testing::Test::RecordProperty("wall_ms", static_cast<int>(wall * 1000));
  ::testing::Test::RecordProperty("mean_compile_ms", static_cast<int>(mean * 1000));
  ::testing::Test::RecordProperty("slowest_compile_ms", static_cast<int>(slowest * 1000));
}


TEST(CompileGemm, SpreadSampleOfTheConfigSpace) {
  // 50 evenly spaced picks plus the smallest and largest value of each config parameter and each
  // value of each problem parameter (the picks shrink as problem parameters gain values).
  constexpr std::size_t kPicks = 50;
  const std::vector<KernelSpec> specs = spread_sample(gemm_family(), kPicks);
  std::size_t extras = 0;
  for (const ParamDef& def : gemm_family().params) extras += def.is_config ? 2 : def.allowed.size();
  ASSERT_GE(specs.size(), kPicks);
  ASSERT_LE(specs.size(), kPicks + extras);
  // The CI budget: each variant takes NVRTC and ptxas up to about a second on 2 cores.
  ASSERT_LE(specs.size(), 80u) << "the spread sample outgrew the compile test's time budget";
  std::set<std::int64_t> block_n, block_m, cluster_m, cluster_n;
  std::set<std::string> scales;
  int c2m = 0, c2n = 0;
  for (const KernelSpec& s : specs) {
    block_n.insert(s.i("block_n"));
    block_m.insert(s.i("block_m"));
    cluster_m.insert(s.i("cluster_m"));
    cluster_n.insert(s.i("cluster_n"));
    scales.insert(s.s("scale"));
    c2m += s.i("cluster_m") == 2;
    c2n += s.i("cluster_n") == 2;
  }
  // 8: the narrowest (swapped operands' decode tiles); 256: the widest tile (precise
  // accumulation in two column halves).
  EXPECT_TRUE(block_n.count(8) && block_n.count(256));
  EXPECT_TRUE(block_m.count(64) && block_m.count(256));
  // Single CTAs and 2-CTA clusters along M (B multicast) and along N (A multicast) all compile
  // without spilling.
  EXPECT_TRUE(cluster_m.count(1) && cluster_m.count(2));
  EXPECT_TRUE(cluster_n.count(1) && cluster_n.count(2));
  EXPECT_GT(c2m, 0);
  EXPECT_GT(c2n, 0);
  EXPECT_EQ(scales.size(), 4u);
  compile_all(specs, "gemm spread sample");
}

TEST(CompileGemm, DeepSeekV3Defaults) {
  const std::vector<Shape> shapes = deepseek_shapes();
  ASSERT_FALSE(shapes.empty()) << "no shapes from " << test::kDeepseekShapesCsv;
  std::vector<KernelSpec> specs;
  std::set<std::string> seen;
  for (const Shape& sh : shapes)
    for (const GemmProblem& p :
         {GemmProblem{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block},
          GemmProblem{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor},
          GemmProblem{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor, false,
                      true}}) {
      const KernelSpec s = default_gemm_spec(p, sh.m, sh.n, sh.k);
      if (seen.insert(spec_name(s)).second) specs.push_back(s);
    }
  ASSERT_GE(specs.size(), 2u);
  compile_all(specs, "gemm DeepSeek-V3 defaults (block, tensor and tensor fast scaling, bf16 out)");
}

// The 256x128 defaults with a bias (per tensor precise and fast, block; every output type): the
// forward GEMMs of FP8 training's Linear at 8192 tokens take them from 16 K blocks. None spills.
TEST(CompileGemm, TallDefaultsWithABias) {
  const Shape shapes[] = {{8192, 8192, 2048}, {8192, 16384, 4096}, {4096, 6144, 4096}};
  std::vector<KernelSpec> specs;
  std::set<std::string> seen;
  for (const Shape& sh : shapes)
    for (ScaleMode scale : {ScaleMode::tensor, ScaleMode::block})
      for (bool fast : {false, true})
        for (DType out : {DType::bf16, DType::fp16, DType::fp32}) {
          if (scale == ScaleMode::block && fast) continue;
          const GemmProblem p{Fp8Format::e4m3, Fp8Format::e4m3, out, scale, true, fast};
          const KernelSpec s = default_gemm_spec(p, sh.m, sh.n, sh.k);
          EXPECT_EQ(gemm_config_of(s).block_m, 256) << spec_name(s);
          if (seen.insert(spec_name(s)).second) specs.push_back(s);
        }
  ASSERT_GE(specs.size(), 9u);
  compile_all(specs, "256x128 gemm defaults with a bias");
}

// The grouped defaults of DeepSeek-V3's MoE suite (bench/shapes/deepseek_v3_moe.csv, block
// scaling, bf16 out): 64-row, 128-row and, for contiguous groups of 1024 rows or more, 256x128
// tiles with A's scales in two boxes; none spills.
TEST(CompileGemm, DeepSeekV3MoeDefaults) {
  const std::string path = FP8JIT_SOURCE_DIR "/bench/shapes/deepseek_v3_moe.csv";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::vector<KernelSpec> specs;
  std::set<std::string> seen;
  int tall = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line.rfind("layout,", 0) == 0) continue;
    std::istringstream fields(line);
    std::string layout, f;
    std::getline(fields, layout, ',');
    std::int64_t v[5];
    for (std::int64_t& x : v) {
      ASSERT_TRUE(std::getline(fields, f, ',')) << line;
      x = std::stoll(f);
    }
    GemmProblem p{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block};
    p.layout = layout == "masked" ? GemmLayout::masked : GemmLayout::contiguous;
    const KernelSpec s = default_grouped_gemm_spec(p, v[0], v[4], v[2], v[3]);
    if (!seen.insert(spec_name(s)).second) continue;
    tall += gemm_config_of(s).block_m == 256;
    specs.push_back(s);
  }
  ASSERT_GE(specs.size(), 3u);
  EXPECT_GT(tall, 0) << "no 256-row default among the MoE suite's";
  compile_all(specs, "grouped DeepSeek-V3 MoE defaults (block, bf16 out)");
}

// A kernel built for TMA epilogues (no split-K, no direct stores) against the same config built
// for every launch: measured 2208 against 4456 SASS instructions and 0.33 against 0.87 s of
// NVRTC for block 128x256 (CUDA 13.0). Fails if the epilogue specialisation stops removing code:
// the tma cubins must be at least a quarter smaller. (Times are printed, not compared: NVRTC's own
// cache of compilations makes a repeated run's times meaningless.)
TEST(CompileGemm, TmaEpilogueKernelsCarryLessCode) {
  const GemmProblem block{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block};
  const GemmProblem tensor{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor};
  const GemmProblem rowwise_bias{Fp8Format::e4m3, Fp8Format::e4m3, DType::fp16, ScaleMode::rowwise,
                                 true};
  const std::vector<std::pair<GemmProblem, GemmConfig>> configs = {
      {block, {128, 256, 3, 16}},
      {tensor, {128, 160, 5, 16}},
      {block, {64, 64, 6, 8}},
      {rowwise_bias, {128, 128, 4, 8}}};
  double any_seconds = 0, tma_seconds = 0;
  for (auto [p, c] : configs) {
    const KernelSpec any = make_gemm_spec(p, c);
    c.epilogue = GemmEpilogue::tma;
    const KernelSpec tma = make_gemm_spec(p, c);
    SCOPED_TRACE(spec_name(tma));
    const CompileResult a = nvrtc_compile(spec_name(any), render_source(any), CompileTarget::cubin);
    const CompileResult t = nvrtc_compile(spec_name(tma), render_source(tma), CompileTarget::cubin);
    EXPECT_LT(t.binary.size() * 4, a.binary.size() * 3)
        << t.binary.size() << " against " << a.binary.size();
    EXPECT_EQ(cubin_resources(t.binary, "fp8jit_gemm").frame_bytes, 0);
    EXPECT_LT(cubin_resources(t.binary, "fp8jit_gemm_reduce").registers, 0) << "a reduction kernel";
    any_seconds += a.seconds;
    tma_seconds += t.seconds;
  }
  std::printf(
      "[ compiled ] tma epilogue kernels %.2f s against %.2f s for the same configs built for any "
      "launch\n",
      tma_seconds, any_seconds);
}

// Group scaling's promotion also reads a scale per column of B: the family's register rule keeps
// its tiles narrower (160 columns, 64 with 256 rows) than the others'. Its defaults, with the largest output type
// and bias, must not spill either.
TEST(CompileGemm, GroupScalingDefaultsDoNotSpill) {
  const std::vector<Shape> shapes = deepseek_shapes();
  ASSERT_FALSE(shapes.empty()) << "no shapes from " << test::kDeepseekShapesCsv;
  std::vector<KernelSpec> specs;
  std::set<std::string> seen;
  for (const Shape& sh : shapes)
    for (DType out : {DType::bf16, DType::fp32}) {
      const KernelSpec s = default_gemm_spec(
          {Fp8Format::e4m3, Fp8Format::e4m3, out, ScaleMode::group, out == DType::fp32}, sh.m, sh.n,
          sh.k);
      if (seen.insert(spec_name(s)).second) specs.push_back(s);
    }
  compile_all(specs, "gemm DeepSeek-V3 defaults (group scaling, bf16 and fp32 + bias out)");
}

// Swapped operands (GemmConfig::swap_ab) at decode-sized M: the heuristic's tiles for M up to 16,
// every scale mode and accumulation, bf16 and fp32 with bias, 64- and 128-row tiles, and 32
// columns (the tuner's widest at 32 rows): none spills.
TEST(CompileGemm, SwappedOperandDefaultsDoNotSpill) {
  std::vector<KernelSpec> specs;
  std::set<std::string> seen;
  const Fp8Format e4 = Fp8Format::e4m3, e5 = Fp8Format::e5m2;
  for (const GemmProblem& p : {GemmProblem{e4, e4, DType::bf16, ScaleMode::block},
                               GemmProblem{e5, e4, DType::fp32, ScaleMode::block, true},
                               GemmProblem{e4, e4, DType::bf16, ScaleMode::tensor},
                               GemmProblem{e4, e4, DType::fp32, ScaleMode::rowwise, true},
                               GemmProblem{e4, e4, DType::bf16, ScaleMode::tensor, true, true}})
    for (const auto& [m, n] : {std::pair{1, 6144}, std::pair{16, 28672}}) {
      const KernelSpec s = default_gemm_spec(p, m, n, 4096);
      EXPECT_EQ(gemm_config_of(s).swap_ab, 1) << spec_name(s);
      if (seen.insert(spec_name(s)).second) specs.push_back(s);
    }
  GemmConfig wide{64, 32, 12, 8};
  wide.swap_ab = 1;
  specs.push_back(make_gemm_spec({e4, e4, DType::bf16, ScaleMode::block, true}, wide));
  compile_all(specs, "gemm swapped-operand decode tiles");
}

// Fast accumulation defers its epilogue where the packed tile fits beside the accumulators
// (Sm90GemmTraits::kDeferRegisters, from a ptxas sweep): the widest tiles on each side of that bound,
// per tensor and rowwise, with and without bias, must not spill. A new ptxas that spills here
// moves the bound.
TEST(CompileGemm, FastAccumulationDeferralBoundsDoNotSpill) {
  std::vector<KernelSpec> specs;
  for (const bool bias : {false, true}) {
    const GemmProblem tensor{
        Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor, bias, true};
    const GemmProblem row{
        Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::rowwise, bias, true};
    for (const GemmConfig& c :
         {GemmConfig{128, 224, 3}, GemmConfig{128, 232, 3}, GemmConfig{128, 240, 3},
          GemmConfig{64, 224, 4}, GemmConfig{64, 232, 4}, GemmConfig{256, 112, 3}})
      specs.push_back(make_gemm_spec(tensor, c));
    for (const GemmConfig& c : {GemmConfig{128, 192, 4}, GemmConfig{128, 208, 4},
                                GemmConfig{64, 192, 4}, GemmConfig{64, 216, 4}})
      specs.push_back(make_gemm_spec(row, c));
  }
  compile_all(specs, "gemm fast accumulation around the deferred epilogue's register bound");
}

// Narrowest, DeepSeek's and widest (fast accumulation only, 240 columns) tiles, and 2-CTA clusters
// along N and M, with different format pairs, scale modes and warpgroup counts: the PTX holds the
// variant's wgmma, TMA loads, mbarrier waits and register moves, and for a cluster the multicast
// TMA loads, the arrivals on the peer's barriers and the cluster-wide barrier.
TEST(CompileGemmPtx, WgmmaTmaMbarrierAndSetmaxnreg) {
  const std::vector<KernelSpec> specs = {
      make_gemm_spec({Fp8Format::e5m2, Fp8Format::e4m3, DType::fp32, ScaleMode::rowwise, true},
                     {64, 16, 4, 1}),
      make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false},
                     {128, 128, 5, 8}),
      make_gemm_spec(
          {Fp8Format::e4m3, Fp8Format::e5m2, DType::fp16, ScaleMode::tensor, false, true},
          {128, 240, 3, 16}),
      // 2-CTA clusters along N (A multicast; block scaling) and M (B multicast; 64-row tiles).
      make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false},
                     {128, 160, 4, 16, 1, 2}),
      make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::fp32, ScaleMode::tensor, true},
                     {64, 96, 4, 8, 2, 1}),
  };
  std::vector<std::string> ptx(specs.size());
  parallel_for(specs.size(), static_cast<int>(std::max(1u, std::thread::hardware_concurrency())),
               [&](std::size_t i) {
                 try {
                   ptx[i] = nvrtc_compile(spec_name(specs[i]), render_source(specs[i]),
                                          CompileTarget::ptx)
                                .binary;
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
    // Precise tiles over 208 columns run their wgmmas on column halves.
    const int wgmma_n =
        static_cast<int>(s.i("block_n")) / gemm_geometry(gemm_problem_of(s), gemm_config_of(s)).chunks;
    const std::string wgmma = fmt::format("wgmma.mma_async.sync.aligned.m64n{}k32.f32.{}.{}", wgmma_n,
                                          s.s("a_format"), s.s("b_format"));
    EXPECT_NE(p.find(wgmma), std::string::npos) << wgmma;
    // No wgmma of another width or format pair.
    std::size_t wgmmas = 0, other = 0;
    for (auto pos = p.find("wgmma.mma_async"); pos != std::string::npos;
         pos = p.find("wgmma.mma_async", pos + 1)) {
      ++wgmmas;
      if (p.compare(pos, wgmma.size(), wgmma) != 0) ++other;
    }
    EXPECT_GT(wgmmas, 0u);
    EXPECT_EQ(other, 0u);
    for (const char* needle :
         {"cp.async.bulk.tensor.2d", "mbarrier.try_wait.parity", "setmaxnreg.inc", "setmaxnreg.dec",
          "wgmma.fence", "wgmma.commit_group", "wgmma.wait_group", ".target sm_90a",
          ".entry fp8jit_gemm(", ".entry fp8jit_gemm_reduce(",
          // TMA loads of A and B; the epilogue's TMA store of D and its waits
          "cp.async.bulk.tensor.2d.shared::cluster.global",
          "cp.async.bulk.tensor.2d.global.shared::cta", "cp.async.bulk.wait_group.read 0",
          "fence.proxy.async.shared::cta"})
      EXPECT_NE(p.find(needle), std::string::npos) << needle;
    // Clusters: multicast loads, peers' barriers and cluster-wide barriers; none otherwise.
    const bool clustered = s.i("cluster_m") * s.i("cluster_n") > 1;
    for (const char* needle :
         {"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster",
          ".multicast::cluster", "mbarrier.arrive.shared::cluster", "%cluster_ctarank"})
      EXPECT_EQ(p.find(needle) != std::string::npos, clustered) << needle;
    // Cluster-wide barriers and peers' shared memory: config clusters, and split-K summed in a
    // cluster where the stages hold a partial tile.
    const bool cluster_code = clustered || gemm_sums_splits_in_smem(gemm_config_of(s));
    for (const char* needle : {"barrier.cluster.arrive", "barrier.cluster.wait", "mapa.shared::cluster"})
      EXPECT_EQ(p.find(needle) != std::string::npos, cluster_code) << needle;
    if (!clustered && cluster_code) EXPECT_NE(p.find("ld.shared::cluster.v4.f32"), std::string::npos);
    // Programmatic dependent launch: every entry point waits for the previous grid first (the
    // scale copy of block and group scaling too: the scales are usually the previous kernel's).
    const bool columns = gemm_reads_row_scales_a(gemm_problem_of(s));
    EXPECT_EQ(p.find(".entry fp8jit_gemm_scale_columns(") != std::string::npos, columns);
    EXPECT_EQ(test::expect_grid_dependency_wait_first(p), columns ? 3 : 2);
    // The producer gives registers up; the consumers (one or two warpgroups) take them.
    EXPECT_NE(p.find("setmaxnreg.dec.sync.aligned.u32 40;"), std::string::npos);
    EXPECT_NE(p.find(fmt::format("setmaxnreg.inc.sync.aligned.u32 {};",
                                 s.i("block_m") == 64 ? 240 : 232)),
              std::string::npos);
  }
}

}  // namespace
}  // namespace fp8jit
