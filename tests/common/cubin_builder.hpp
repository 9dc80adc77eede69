// Hand-built cubins for the FFMA post-pass tests: an ELF64 file whose one executable section
// holds chosen sm_90 instructions (runtime/sass/cubin_code.hpp has the encoding).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace fp8jit::test {

struct Instr {
  std::uint64_t lo, hi;
};

constexpr std::size_t kCodeOffset = 64;  // the code section starts right after the ELF header

// An ELF64 file holding `code` in one executable section (plus the null section header).
inline std::string elf_with(const std::vector<Instr>& code) {
  const std::size_t code_bytes = code.size() * 16, shoff = kCodeOffset + code_bytes;
  std::string b(shoff + 2 * 64, '\0');
  auto put = [&](std::size_t at, auto v) { std::memcpy(b.data() + at, &v, sizeof v); };
  b.replace(0, 4, "\177ELF");
  b[4] = 2;  // 64-bit
  b[5] = 1;  // little-endian
  put(40, std::uint64_t{shoff});
  put(58, std::uint16_t{64});
  put(60, std::uint16_t{2});
  for (std::size_t i = 0; i < code.size(); ++i) {
    put(kCodeOffset + 16 * i, code[i].lo);
    put(kCodeOffset + 16 * i + 8, code[i].hi);
  }
  const std::size_t sh = shoff + 64;  // section 1: PROGBITS, ALLOC | EXECINSTR
  put(sh + 4, std::uint32_t{1});
  put(sh + 8, std::uint64_t{0x6});
  put(sh + 24, std::uint64_t{kCodeOffset});
  put(sh + 32, std::uint64_t{code_bytes});
  return b;
}

inline std::uint64_t word_at(const std::string& b, std::size_t at) {
  std::uint64_t v;
  std::memcpy(&v, b.data() + at, sizeof v);
  return v;
}

// Indices of the instructions whose bytes differ between two such files; fails the test if any
// bits other than `allowed` (of the high, control word) changed, or the size did.
inline std::vector<std::size_t> changed_instructions(const std::string& before,
                                                     const std::string& after,
                                                     std::uint64_t allowed) {
  EXPECT_EQ(before.size(), after.size());
  std::vector<std::size_t> out;
  for (std::size_t at = 0; at + 8 <= before.size() && at + 8 <= after.size(); at += 8) {
    const std::uint64_t x = word_at(before, at) ^ word_at(after, at);
    if (!x) continue;
    EXPECT_EQ(x & ~allowed, 0u) << "word at " << at;
    EXPECT_EQ(at % 16, 8u) << "only high words (controls) may change";
    out.push_back((at - kCodeOffset) / 16);
  }
  return out;
}

}  // namespace fp8jit::test
