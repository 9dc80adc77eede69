// The cubin post-pass that keeps promotion's scale factor in the operand reuse cache
// (runtime/sass/ffma_reuse.hpp), its registration as gemm's post-pass, and the branch-target
// decoding it relies on (runtime/sass/cubin_code.hpp): on hand-built ELF files whose
// instructions are known, and on gemm cubins from NVRTC.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/settings.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/family.hpp"
#include "runtime/jit/nvrtc.hpp"
#include "runtime/sass/cubin_code.hpp"
#include "runtime/sass/ffma_reuse.hpp"
#include "runtime/sass/gemm_post_passes.hpp"
#include "tests/common/cubin_builder.hpp"
#include "tests/common/expect_error.hpp"

namespace fp8jit {
namespace {

using test::elf_with;
using test::Instr;
using test::kCodeOffset;

constexpr std::uint64_t kHeldBits = cubin::kReuseB | cubin::kNoYield;

// `FFMA Rd, R24, Rb, Rd` with ptxas's controls, hint-free or with the slot-b hint and no-yield.
constexpr Instr ffma(int d, int b, bool hinted = false) {
  const std::uint64_t lo =
      0x7223 | (std::uint64_t(d) << 16) | (std::uint64_t{24} << 24) | (std::uint64_t(b) << 32);
  return {lo, (hinted ? 0x080fe20000000000 : 0x000fc20000000000) | std::uint64_t(d)};
}
constexpr Instr kOther{0x000000c418c07224, 0x000fc200000000c0};  // IMAD's opcode
// `BRA` (or `BSSY B0`) to the instruction `k` after the next one; k < 64.
constexpr Instr bra(int k) {
  return {0x947 | (std::uint64_t(4 * k) << 16), 0x000fea0003800000};
}
constexpr Instr bssy(int k) {
  return {0x945 | (std::uint64_t(4 * k) << 34), 0x000fe20003800000};
}
constexpr Instr kIndirect{0x949,
                          0x000fea0003800000};  // a branch-unit opcode without a decoded target
constexpr Instr kBreak{0x0000000001007942, 0x000fe20003800000};  // `BREAK B1`: moves no thread

std::vector<std::size_t> changed(const std::string& before, const std::string& after) {
  return test::changed_instructions(before, after, kHeldBits);
}

// Promotion as ptxas leaves it: 20 FFMAs reading R196 with the hint on every other one, then 18
// reading R197 and R198 (nine each), the one that switches register hint-free.
std::vector<Instr> promotion_runs() {
  std::vector<Instr> c;
  for (int i = 0; i < 20; ++i) c.push_back(ffma(100 + i, 196, i % 2 == 1));
  c.push_back(kOther);
  for (int i = 0; i < 18; ++i) c.push_back(ffma(130 + i, i < 9 ? 197 : 198));
  return c;
}

TEST(FfmaReuse, EveryFfmaWhoseSuccessorReadsTheSameFactor) {
  const std::string before = elf_with(promotion_runs());
  std::string after = before;
  const FfmaReuseStats st = hold_ffma_factors(after);
  EXPECT_EQ(st.runs, 2);
  EXPECT_EQ(st.skipped, 0);
  // First run: the even ones but the last (index 19 has no successor in the run, and is odd:
  // hinted by ptxas already). Second run (from 21): all but the switch (29) and the last (38).
  std::vector<std::size_t> expect;
  for (std::size_t i = 0; i < 19; i += 2) expect.push_back(i);
  for (std::size_t i = 21; i < 38; ++i)
    if (i != 29) expect.push_back(i);
  EXPECT_EQ(changed(before, after), expect);
  EXPECT_EQ(st.held, static_cast<int>(expect.size()));
  std::string again = after;
  EXPECT_EQ(hold_ffma_factors(again).held, 0);  // idempotent
  EXPECT_EQ(again, after);
}

// The hook the kernel cache runs: the same rewrite, on gemm cubins only, and only when asked for.
TEST(FfmaReuse, GemmPostPassHook) {
  const std::string before = elf_with(promotion_runs());
  std::string direct = before, hooked = before, other = before;
  const FfmaReuseStats st = hold_ffma_factors(direct);
  const std::vector<CubinPostPass> passes = gemm_post_passes(true);
  ASSERT_EQ(passes.size(), 1u);
  EXPECT_EQ(passes[0].family, "gemm");
  EXPECT_EQ(passes[0].key, "ffma_reuse 1");
  EXPECT_EQ(run_post_passes(passes, "gemm", hooked),
            std::vector<std::string>{fmt::format(
                "ffma_reuse: {} FFMAs keep their factor cached (2 runs, 0 left alone)", st.held)});
  EXPECT_EQ(hooked, direct);
  EXPECT_TRUE(run_post_passes(passes, "quantize", other).empty());
  EXPECT_EQ(other, before);
  EXPECT_TRUE(gemm_post_passes(false).empty());
}

TEST(FfmaReuse, NotWhereTheFactorIsOverwrittenPredicatedOrRzOrTheRunIsShort) {
  std::vector<Instr> c;
  for (int i = 0; i < 16; ++i) {
    Instr f = ffma(i == 5 ? 196 : 100 + i, i == 12 ? 255 : 196);  // #5 writes R196, #12 reads RZ
    if (i == 9) f.lo &= ~std::uint64_t{0xf000};                   // #9: @P0
    c.push_back(f);
  }
  c.push_back(kOther);
  for (int i = 0; i < 15; ++i) c.push_back(ffma(140 + i, 196));  // too short
  const std::string before = elf_with(c);
  std::string after = before;
  EXPECT_EQ(hold_ffma_factors(after).runs, 1);
  EXPECT_EQ(changed(before, after), (std::vector<std::size_t>{0, 1, 2, 3, 4, 6, 7, 10, 13, 14}));
}

TEST(FfmaReuse, RunsThatABranchMayEnterInsideAreLeftAlone) {
  auto code_with = [](Instr branch) {
    std::vector<Instr> c = {branch, kOther};
    for (int i = 0; i < 20; ++i) c.push_back(ffma(100 + i, 196));  // instructions 2..21
    return c;
  };
  for (const Instr& inside : {bra(5), bssy(3), bra(19)}) {  // targets 6, 4, 20
    std::string b = elf_with(code_with(inside));
    const std::string copy = b;
    const FfmaReuseStats st = hold_ffma_factors(b);
    EXPECT_EQ(st.skipped, 1);
    EXPECT_EQ(b, copy);
  }
  for (const Instr& outside :
       {bra(1), bra(21), bssy(0), kBreak}) {  // the run's first instruction, past it
    std::string b = elf_with(code_with(outside));
    EXPECT_EQ(hold_ffma_factors(b).held, 19);
  }
  std::string unknown = elf_with(code_with(kIndirect));
  const std::string copy = unknown;
  EXPECT_EQ(hold_ffma_factors(unknown).skipped, 1);
  EXPECT_EQ(unknown, copy);
}

TEST(FfmaReuse, BackwardBranchTargetsDecode) {
  // A loop: the branch at index 21 jumps back to index 3, inside the run 2..20.
  std::vector<Instr> c = {kOther, kOther};
  for (int i = 0; i < 19; ++i) c.push_back(ffma(100 + i, 196));
  const std::int64_t words = -4 * 19;  // from index 22 back to 3
  const std::uint64_t field = static_cast<std::uint64_t>(words >> 8);
  c.push_back({0x947 | ((static_cast<std::uint64_t>(words) & 0xff) << 16) | (field << 34),
               0x000fea0003800000 | ((field >> 30) & 0x3ffff)});
  const std::string b = elf_with(c);
  const auto targets = cubin::branch_targets(b, {kCodeOffset, c.size() * 16});
  ASSERT_TRUE(targets.has_value());
  EXPECT_EQ(*targets, std::vector<std::size_t>{kCodeOffset + 3 * 16});
}

TEST(FfmaReuse, MalformedInputIsAnErrorAndLeftAlone) {
  std::string cut = elf_with(promotion_runs());
  cut.resize(cut.size() - 64);
  const std::string copy = cut;
  const std::string what =
      test::error_message(ErrorKind::internal, [&] { hold_ffma_factors(cut); });
  EXPECT_NE(what.find("hold_ffma_factors"), std::string::npos) << what;
  EXPECT_EQ(cut, copy);
}

// Each BRA's and BSSY's decoded target lies on an instruction of its section: a wrong field
// would land between instructions or outside. A section with a call or return (the split-K
// reduction's 64-bit division) is reported as undecodable, so its runs would be left alone.
void expect_targets_decode(const std::string& cubin) {
  std::size_t branches = 0, targets = 0;
  for (const cubin::Span& s : cubin::code_sections(cubin, "test")) {
    std::size_t here = 0, calls = 0;
    for (std::size_t at = s.offset; at < s.offset + s.size; at += 16) {
      const std::uint64_t op = cubin::low_word(cubin, at) & 0xfff;
      here += op == 0x947 || op == 0x945;
      calls += op == 0x944 || op == 0x950;
    }
    const auto t = cubin::branch_targets(cubin, s);
    EXPECT_EQ(t.has_value(), calls == 0);
    if (!t) continue;
    for (std::size_t x : *t) EXPECT_EQ((x - s.offset) % 16, 0u);
    branches += here;
    targets += t->size();
  }
  EXPECT_GT(branches, 10u);
  EXPECT_EQ(targets, branches);
}

TEST(FfmaReuse, BlockScaledGemmCubinFromNvrtc) {
  GemmProblem block{};
  block.scale = ScaleMode::block;
  const KernelSpec spec = make_gemm_spec(block, GemmConfig{128, 256, 3, 16});
  const std::string before =
      nvrtc_compile(spec_name(spec), render_source(spec), CompileTarget::cubin).binary;
  expect_targets_decode(before);
  std::string after = before;
  const FfmaReuseStats st = hold_ffma_factors(after);
  // Promotion of the two column halves: one run each (58 and 59 FFMAs with CUDA 13.0), ptxas
  // hinting about every other one.
  EXPECT_GE(st.runs, 2);
  EXPECT_EQ(st.skipped, 0);
  EXPECT_GE(st.held, 40);
  EXPECT_EQ(changed(before, after).size(), static_cast<std::size_t>(st.held));
  // Per-tensor scaling promotes with FADDs: no FFMA runs.
  GemmProblem tensor{};
  tensor.scale = ScaleMode::tensor;
  const KernelSpec t = make_gemm_spec(tensor, GemmConfig{128, 192, 4, 16});
  std::string tcubin = nvrtc_compile(spec_name(t), render_source(t), CompileTarget::cubin).binary;
  expect_targets_decode(tcubin);
  EXPECT_EQ(hold_ffma_factors(tcubin).held, 0);
  // A grouped layout's scheduler walks the groups in a loop with a divergent exit (a BREAK):
  // its promotion runs are held too.
  GemmProblem grouped = block;
  grouped.layout = GemmLayout::contiguous;
  const KernelSpec g = make_gemm_spec(grouped, GemmConfig{128, 256, 3, 16});
  std::string gcubin = nvrtc_compile(spec_name(g), render_source(g), CompileTarget::cubin).binary;
  expect_targets_decode(gcubin);
  const FfmaReuseStats gs = hold_ffma_factors(gcubin);
  EXPECT_GE(gs.runs, 2);
  EXPECT_EQ(gs.skipped, 0);
  EXPECT_GE(gs.held, 40);
}

TEST(FfmaReuse, SettingIsReadAndChecked) {
  EXPECT_TRUE(Settings::from_env().ffma_reuse);  // on by default
  ::setenv("FP8JIT_FFMA_REUSE", "0", 1);
  EXPECT_FALSE(Settings::from_env().ffma_reuse);
  ::setenv("FP8JIT_FFMA_REUSE", "maybe", 1);
  const std::string what =
      test::error_message(ErrorKind::invalid_argument, [] { Settings::from_env(); });
  EXPECT_NE(what.find("FP8JIT_FFMA_REUSE"), std::string::npos) << what;
  ::unsetenv("FP8JIT_FFMA_REUSE");
}

}  // namespace
}  // namespace fp8jit
