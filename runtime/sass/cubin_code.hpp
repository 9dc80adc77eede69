// Reading and patching the instructions of a compiled sm_90a cubin in place: the executable
// sections of its ELF64 container and the fields of one instruction that the FFMA post-pass
// (runtime/sass/ffma_reuse.hpp) reads or sets.
//
// sm_90 instructions are 128 bits, stored as two little-endian 64-bit words. The low word's bits
// 0-11 are the opcode with its operand form (0x223: FFMA Rd, Ra, Rb, Rc), bits 16-23 Rd, 24-31 Ra,
// 32-39 Rb; the high word's bits 0-7 are Rc and it holds the scheduling controls: bit 45 "do not
// yield", bits 58-61 the reuse hints of operand slots a-d. Checked against nvdisasm (CUDA 13.0)
// on this project's kernels (G25, G29: all 708 branch targets of the 128x256 block kernel agree).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fp8jit {
namespace cubin {

constexpr std::size_t kInstrBytes = 16;
constexpr std::uint64_t kNoYield = std::uint64_t{1} << 45;
constexpr std::uint64_t kReuseHints = std::uint64_t{0xf} << 58;
constexpr std::uint64_t kReuseB = std::uint64_t{1} << 59;

// A byte range [offset, offset + size) of the file.
struct Span {
  std::size_t offset, size;
};

// The executable sections' byte ranges, each checked to lie inside the file and to hold whole
// instructions. Throws fp8jit::Error (internal) naming `pass` for a file that is not a
// well-formed ELF64.
std::vector<Span> code_sections(const std::string& elf, const char* pass);

// The two words of the instruction at byte `at`.
std::uint64_t low_word(const std::string& b, std::size_t at);
std::uint64_t high_word(const std::string& b, std::size_t at);
void set_high_word(std::string& b, std::size_t at, std::uint64_t v);

// The byte offsets (in the file) of the instructions that the branches of section `s` may jump
// to: BRA's target and BSSY's reconvergence point, decoded as `(low bits 16-23 | bits 34-81 << 8)`
// and `bits 34-81` (BSSY) instructions after the next one, which matches nvdisasm's labels on this
// project's kernels. nullopt where the section holds a control-flow instruction whose target this
// does not decode (an indirect branch, a call, a return): then any instruction may be a target.
std::optional<std::vector<std::size_t>> branch_targets(const std::string& b, const Span& s);

// A register-form FFMA and its registers.
bool is_ffma(const std::string& b, std::size_t at);
// Guarded by PT (bits 12-15: predicate 7, not negated): the instruction always executes.
bool unpredicated(const std::string& b, std::size_t at);
int ffma_dest(const std::string& b, std::size_t at);
int ffma_b(const std::string& b, std::size_t at);

// Calls fn(first, n) for each run of `min_run` or more consecutive register-form FFMAs in the
// code sections (`first`: the byte offset of the run's first instruction); returns how many.
template <class F>
int for_each_ffma_run(const std::string& b, const std::vector<Span>& code, std::size_t min_run,
                      F&& fn) {
  int runs = 0;
  for (const Span& s : code) {
    std::size_t run = 0;  // FFMAs in a row ending before `at`
    for (std::size_t at = s.offset;; at += kInstrBytes) {
      const bool end = at == s.offset + s.size;
      if (!end && is_ffma(b, at)) {
        ++run;
        continue;
      }
      if (run >= min_run) {
        ++runs;
        fn(at - run * kInstrBytes, run);
      }
      run = 0;
      if (end) break;
    }
  }
  return runs;
}

}  // namespace cubin
}  // namespace fp8jit
