// The cubin post-pass over FFMA runs (runtime/sass/ffma_yield.hpp): on a hand-built ELF whose
// instructions are known, and on a block-scaled gemm cubin from NVRTC.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/family.hpp"
#include "runtime/sass/ffma_yield.hpp"
#include "runtime/jit/nvrtc.hpp"
#include "common/settings.hpp"
#include "tests/common/cubin_builder.hpp"
#include "tests/common/expect_error.hpp"

namespace fp8jit {
namespace {

constexpr std::uint64_t kFreedBits = (std::uint64_t{1} << 45) | (std::uint64_t{0xf} << 58);

using test::elf_with;
using test::Instr;

// As ptxas writes promotion (nvdisasm): `FFMA R192, R24, R196.reuse, R192` (reuse hint on operand
// b, no-yield flag), then the same without reuse; and an instruction that is not an FFMA.
constexpr Instr kFfmaReuse{0x000000c418c07223, 0x080fe200000000c0};
constexpr Instr kFfmaPlain{0x000000c419c17223, 0x000fc200000000c1};
constexpr Instr kOther{0x000000c418c07224, 0x080fe200000000c0};  // IMAD's opcode, same controls

// fn throws fp8jit::Error(kind) whose message names `part`.
template <class F>
void expect_error(ErrorKind kind, F&& fn, const std::string& part) {
  const std::string what = test::error_message(kind, std::forward<F>(fn));
  EXPECT_NE(what.find(part), std::string::npos) << what;
}

std::vector<std::size_t> changed(const std::string& before, const std::string& after) {
  return test::changed_instructions(before, after, kFreedBits);
}

// A run of 20 FFMAs (reuse hints on the even ones), a break, a run of 8 (too short), a break and
// a run of 16 that ends the section.
std::vector<Instr> sample_code() {
  std::vector<Instr> c;
  for (int i = 0; i < 20; ++i) c.push_back(i % 2 ? kFfmaPlain : kFfmaReuse);
  c.push_back(kOther);
  for (int i = 0; i < 8; ++i) c.push_back(kFfmaReuse);
  c.push_back(kOther);
  for (int i = 0; i < 16; ++i) c.push_back(i % 2 ? kFfmaPlain : kFfmaReuse);
  return c;
}

TEST(FfmaYield, WholeRunsOfSixteenOrMoreAndOnlyTheirHints) {
  const std::string before = elf_with(sample_code());
  std::string after = before;
  const FfmaYieldStats st = release_ffma_runs(after, 16);
  EXPECT_EQ(st.runs, 2);
  EXPECT_EQ(st.released, 10 + 8);
  std::vector<std::size_t> expect;
  for (std::size_t i = 0; i < 20; i += 2) expect.push_back(i);
  for (std::size_t i = 30; i < 46; i += 2) expect.push_back(i);
  EXPECT_EQ(changed(before, after), expect);  // not the 8-run, not the other instructions
}

TEST(FfmaYield, TheLeadingShareOfEachRun) {
  const std::string before = elf_with(sample_code());
  std::string half = before;
  const FfmaYieldStats st = release_ffma_runs(half, 8);
  EXPECT_EQ(st.released, 5 + 4);  // the first 10 of 20 and the first 8 of 16
  EXPECT_EQ(changed(before, half), (std::vector<std::size_t>{0, 2, 4, 6, 8, 30, 32, 34, 36}));
  std::string off = before;
  EXPECT_EQ(release_ffma_runs(off, 0).released, 0);
  EXPECT_EQ(off, before);
}

TEST(FfmaYield, MalformedInputIsAnErrorAndLeftAlone) {
  std::string not_elf =
      "definitely not an ELF file, but long enough to hold a header of 64 bytes....";
  const std::string copy = not_elf;
  expect_error(
      ErrorKind::internal, [&] { release_ffma_runs(not_elf, 16); }, "not a well-formed ELF64");
  EXPECT_EQ(not_elf, copy);
  std::string cut = elf_with(sample_code());
  cut.resize(cut.size() - 64);  // the code section's header is gone
  const std::string cut_copy = cut;
  expect_error(
      ErrorKind::internal, [&] { release_ffma_runs(cut, 16); }, "section headers");
  EXPECT_EQ(cut, cut_copy);
  std::string odd = elf_with(sample_code());
  const std::size_t size_at =
      odd.size() - 64 + 32;  // the code section's size: not whole instructions
  const std::uint64_t size = test::word_at(odd, size_at) - 8;
  std::memcpy(odd.data() + size_at, &size, sizeof size);
  expect_error(
      ErrorKind::internal, [&] { release_ffma_runs(odd, 16); }, "code section 1");
  std::string ok = elf_with(sample_code());
  expect_error(
      ErrorKind::invalid_argument, [&] { release_ffma_runs(ok, 17); }, "0 to 16");
}

TEST(FfmaYield, BlockScaledGemmCubinFromNvrtc) {
  GemmProblem block{};
  block.scale = ScaleMode::block;
  const KernelSpec spec = make_gemm_spec(block, GemmConfig{128, 256, 3, 16});
  const std::string before =
      nvrtc_compile(spec_name(spec), render_source(spec), CompileTarget::cubin).binary;
  std::string after = before;
  const FfmaYieldStats st = release_ffma_runs(after, 16);
  // Promotion of the two column halves: one run each (58 and 59 FFMAs with CUDA 13.0).
  EXPECT_GE(st.runs, 2);
  EXPECT_GE(st.released, 40);
  EXPECT_EQ(changed(before, after).size(), static_cast<std::size_t>(st.released));
  // Per-tensor scaling promotes without scale factors: nothing to release.
  GemmProblem tensor{};
  tensor.scale = ScaleMode::tensor;
  const KernelSpec t = make_gemm_spec(tensor, GemmConfig{128, 192, 4, 16});
  std::string tcubin = nvrtc_compile(spec_name(t), render_source(t), CompileTarget::cubin).binary;
  EXPECT_EQ(release_ffma_runs(tcubin, 16).released, 0);
}

TEST(FfmaYield, SettingIsReadAndChecked) {
  ::setenv("FP8JIT_FFMA_YIELD", "9", 1);
  EXPECT_EQ(Settings::from_env().ffma_yield, 9);
  ::setenv("FP8JIT_FFMA_YIELD", "17", 1);
  expect_error(
      ErrorKind::invalid_argument, [&] { Settings::from_env(); }, "FP8JIT_FFMA_YIELD");
  ::unsetenv("FP8JIT_FFMA_YIELD");
  EXPECT_EQ(Settings::from_env().ffma_yield, 0);
}

}  // namespace
}  // namespace fp8jit
