#include "runtime/sass/ffma_reuse.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "runtime/sass/cubin_code.hpp"

namespace fp8jit {
namespace {

constexpr int kRz = 255;

// Whether a branch may land on one of the run's instructions after its first.
bool entered_inside(const std::vector<std::size_t>& sorted_targets, std::size_t first,
                    std::size_t n) {
  const auto it = std::upper_bound(sorted_targets.begin(), sorted_targets.end(), first);
  return it != sorted_targets.end() && *it < first + n * cubin::kInstrBytes;
}

int hold_run(std::string& b, std::size_t first, std::size_t n) {
  int held = 0;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const std::size_t at = first + i * cubin::kInstrBytes, next = at + cubin::kInstrBytes;
    // Both always execute (a predicated-off instruction need not fill or read the cache); RZ
    // is no register to cache.
    const int reg = cubin::ffma_b(b, at);
    if (reg == kRz || cubin::ffma_b(b, next) != reg || cubin::ffma_dest(b, at) == reg ||
        !cubin::unpredicated(b, at) || !cubin::unpredicated(b, next))
      continue;
    const std::uint64_t hi = cubin::high_word(b, at);
    const std::uint64_t want = hi | cubin::kReuseB | cubin::kNoYield;
    if (want == hi) continue;
    cubin::set_high_word(b, at, want);
    ++held;
  }
  return held;
}

}  // namespace

FfmaReuseStats hold_ffma_factors(std::string& b) {
  FfmaReuseStats stats;
  for (const cubin::Span& s : cubin::code_sections(b, "hold_ffma_factors")) {
    std::optional<std::vector<std::size_t>> targets = cubin::branch_targets(b, s);
    if (targets) std::sort(targets->begin(), targets->end());
    stats.runs +=
        cubin::for_each_ffma_run(b, {s}, kMinFfmaRun, [&](std::size_t first, std::size_t n) {
          if (!targets || entered_inside(*targets, first, n))
            ++stats.skipped;
          else
            stats.held += hold_run(b, first, n);
        });
  }
  return stats;
}

}  // namespace fp8jit
