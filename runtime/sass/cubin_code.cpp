#include "runtime/sass/cubin_code.hpp"

#include <fmt/format.h>

#include <cstring>
#include <string_view>

#include "fp8jit/error.hpp"

namespace fp8jit {
namespace cubin {
namespace {

constexpr std::uint64_t kOpcodeMask = 0xfff;
constexpr std::uint64_t kFfmaRegisterForm = 0x223;
// The branch unit's opcodes (0x940-0x95f): those with a decoded target, and those that move no
// thread elsewhere. BREAK only takes the active threads out of a convergence barrier (a loop
// with a divergent exit: the BRA after it jumps), so it enters no FFMA run.
constexpr std::uint64_t kBsync = 0x941, kBreak = 0x942, kBssy = 0x945, kYield = 0x946, kBra = 0x947,
                        kWarpsync = 0x948, kExit = 0x94d, kBpt = 0x95c;

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

}  // namespace

std::vector<Span> code_sections(const std::string& elf, const char* pass) {
  auto malformed = [&](const std::string& what) {
    throw Error(ErrorKind::internal,
                fmt::format("{}: the cubin is not a well-formed ELF64 file ({}); report "
                            "this with the kernel's spec",
                            pass, what));
  };
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

std::optional<std::vector<std::size_t>> branch_targets(const std::string& b, const Span& s) {
  std::vector<std::size_t> out;
  for (std::size_t at = s.offset; at < s.offset + s.size; at += kInstrBytes) {
    const std::uint64_t lo = low_word(b, at), hi = high_word(b, at), op = lo & kOpcodeMask;
    if (op < 0x940 || op > 0x95f || op == kBsync || op == kBreak || op == kYield ||
        op == kWarpsync || op == kExit || op == kBpt)
      continue;
    if (op != kBra && op != kBssy) return std::nullopt;
    // Bits 34-81, sign-extended: the high word's bits 0-17 continue the low word's 34-63.
    std::int64_t field = static_cast<std::int64_t>((lo >> 34) | (hi << 30));
    field = (field << 16) >> 16;
    const std::int64_t words =
        op == kBssy ? field : ((field << 8) | static_cast<std::int64_t>((lo >> 16) & 0xff));
    const std::int64_t target = static_cast<std::int64_t>(at + kInstrBytes) + 4 * words;
    if (target >= static_cast<std::int64_t>(s.offset) &&
        target < static_cast<std::int64_t>(s.offset + s.size))
      out.push_back(static_cast<std::size_t>(target));
  }
  return out;
}

std::uint64_t low_word(const std::string& b, std::size_t at) {
  return load<std::uint64_t>(b, at);
}
std::uint64_t high_word(const std::string& b, std::size_t at) {
  return load<std::uint64_t>(b, at + 8);
}
void set_high_word(std::string& b, std::size_t at, std::uint64_t v) {
  std::memcpy(b.data() + at + 8, &v, sizeof v);
}

bool is_ffma(const std::string& b, std::size_t at) {
  return (low_word(b, at) & kOpcodeMask) == kFfmaRegisterForm;
}
bool unpredicated(const std::string& b, std::size_t at) {
  return ((low_word(b, at) >> 12) & 0xf) == 0x7;
}
int ffma_dest(const std::string& b, std::size_t at) {
  return static_cast<int>((low_word(b, at) >> 16) & 0xff);
}
int ffma_b(const std::string& b, std::size_t at) {
  return static_cast<int>((low_word(b, at) >> 32) & 0xff);
}

}  // namespace cubin
}  // namespace fp8jit
