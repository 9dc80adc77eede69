#include "runtime/sass/ffma_yield.hpp"

#include <string>

#include "fp8jit/error.hpp"
#include "runtime/sass/cubin_code.hpp"

namespace fp8jit {
namespace {

// The leading part of one run [first, first + n) of FFMAs.
int release_run(std::string& b, std::size_t first, std::size_t n, int sixteenths) {
  int released = 0;
  const std::size_t lead = n * static_cast<std::size_t>(sixteenths) / 16;
  for (std::size_t i = 0; i < lead; ++i) {
    const std::size_t at = first + i * cubin::kInstrBytes;
    const std::uint64_t hi = cubin::high_word(b, at);
    if (!(hi & cubin::kReuseHints) || !(hi & cubin::kNoYield)) continue;
    cubin::set_high_word(b, at, hi & ~(cubin::kReuseHints | cubin::kNoYield));
    ++released;
  }
  return released;
}

}  // namespace

FfmaYieldStats release_ffma_runs(std::string& b, int sixteenths) {
  if (sixteenths < 0 || sixteenths > 16)
    throw_invalid("sixteenths", std::to_string(sixteenths),
                  "the share of each FFMA run to release, 0 to 16");
  FfmaYieldStats stats;
  if (sixteenths == 0) return stats;
  const auto code = cubin::code_sections(b, "release_ffma_runs");
  stats.runs =
      cubin::for_each_ffma_run(b, code, kMinFfmaRun, [&](std::size_t first, std::size_t n) {
        stats.released += release_run(b, first, n, sixteenths);
      });
  return stats;
}

}  // namespace fp8jit
