#include "runtime/ffma_yield.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "fp8jit/error.hpp"

namespace fp8jit {
namespace {

// sm_90 instructions are 128 bits, stored as two little-endian 64-bit words. The low word's bits
// 0-11 are the opcode with its operand form (0x223: FFMA Rd, Ra, Rb, Rc); the high word holds the
// scheduling controls: bit 45 "do not yield", bits 58-61 the reuse hints of operand slots a-d.
constexpr std::uint64_t kOpcodeMask = 0xfff;
constexpr std::uint64_t kFfmaRegisterForm = 0x223;
constexpr std::uint64_t kNoYield = std::uint64_t{1} << 45;
constexpr std::uint64_t kReuseHints = std::uint64_t{0xf} << 58;
constexpr std::size_t kInstrBytes = 16;

// ELF64 (the cubin container): header and section header fields used here.
constexpr std::size_t kEhdrBytes = 64, kShdrBytes = 64;
constexpr std::uint32_t kProgbits = 1;
constexpr std::uint64_t kExecInstr = 0x4;
constexpr std::string_view kElfMagic = "\177ELF";

template <class T>
T load(const std::string& b, std::size_t at) {
  T v;
  std::memcpy(&v, b.data() + at, sizeof(T));
  return v;
}

[[noreturn]] void malformed(const std::string& what) {
  throw Error(ErrorKind::internal,
              "release_ffma_runs: the cubin is not a well-formed ELF64 file (" + what +
                  "); report this with the kernel's spec");
}

struct Span {
  std::size_t offset, size;
};

// The executable sections' byte ranges, each checked to lie inside the file.
std::vector<Span> code_sections(const std::string& elf) {
  if (elf.size() < kEhdrBytes || std::string_view(elf).substr(0, 4) != kElfMagic)
    malformed("no ELF header");
  if (elf[4] != 2 || elf[5] != 1) malformed("not 64-bit little-endian");
  const auto shoff = load<std::uint64_t>(elf, 40);
  const auto shentsize = load<std::uint16_t>(elf, 58), shnum = load<std::uint16_t>(elf, 60);
  if (shentsize != kShdrBytes) malformed(fmt::format("section header size {}", shentsize));
  if (shoff > elf.size() || shnum > (elf.size() - shoff) / kShdrBytes)
    malformed(fmt::format("{} section headers at offset {} past the end ({} bytes)", shnum, shoff,
                          elf.size()));
  std::vector<Span> out;
  for (std::size_t i = 0; i < shnum; ++i) {
    const std::size_t h = shoff + i * kShdrBytes;
    const auto type = load<std::uint32_t>(elf, h + 4);
    const auto flags = load<std::uint64_t>(elf, h + 8);
    const auto offset = load<std::uint64_t>(elf, h + 24), size = load<std::uint64_t>(elf, h + 32);
    if (type != kProgbits || !(flags & kExecInstr)) continue;
    if (offset > elf.size() || size > elf.size() - offset || size % kInstrBytes != 0)
      malformed(
          fmt::format("code section {} spans [{}, +{}) of {} bytes", i, offset, size, elf.size()));
    out.push_back({static_cast<std::size_t>(offset), static_cast<std::size_t>(size)});
  }
  return out;
}

bool is_ffma(const std::string& b, std::size_t at) {
  return (load<std::uint64_t>(b, at) & kOpcodeMask) == kFfmaRegisterForm;
}

// The leading part of one run [first, first + n) of FFMAs.
int release_run(std::string& b, std::size_t first, std::size_t n, int sixteenths) {
  int released = 0;
  const std::size_t lead = n * static_cast<std::size_t>(sixteenths) / 16;
  for (std::size_t i = 0; i < lead; ++i) {
    const std::size_t hi_at = first + i * kInstrBytes + 8;
    const auto hi = load<std::uint64_t>(b, hi_at);
    if (!(hi & kReuseHints) || !(hi & kNoYield)) continue;
    const std::uint64_t freed = hi & ~(kReuseHints | kNoYield);
    std::memcpy(b.data() + hi_at, &freed, sizeof freed);
    ++released;
  }
  return released;
}

}  // namespace

FfmaYieldStats release_ffma_runs(std::string& cubin, int sixteenths) {
  if (sixteenths < 0 || sixteenths > 16)
    throw_invalid("sixteenths", std::to_string(sixteenths),
                  "the share of each FFMA run to release, 0 to 16");
  FfmaYieldStats stats;
  if (sixteenths == 0) return stats;
  for (const Span& s : code_sections(cubin)) {
    std::size_t run = 0;  // FFMAs in a row ending before `at`
    for (std::size_t at = s.offset;; at += kInstrBytes) {
      const bool end = at == s.offset + s.size;
      if (!end && is_ffma(cubin, at)) {
        ++run;
        continue;
      }
      if (run >= kMinFfmaRun) {
        ++stats.runs;
        stats.released += release_run(cubin, at - run * kInstrBytes, run, sixteenths);
      }
      run = 0;
      if (end) break;
    }
  }
  return stats;
}

}  // namespace fp8jit
