#include "runtime/sass/gemm_post_passes.hpp"

#include <fmt/format.h>

#include "runtime/sass/ffma_reuse.hpp"

namespace fp8jit {
namespace {

std::string hold_factors(std::string& cubin) {
  const FfmaReuseStats st = hold_ffma_factors(cubin);
  if (st.runs == 0) return "";
  return fmt::format("ffma_reuse: {} FFMAs keep their factor cached ({} runs, {} left alone)",
                     st.held, st.runs, st.skipped);
}

}  // namespace

std::vector<CubinPostPass> gemm_post_passes(bool ffma_reuse) {
  std::vector<CubinPostPass> passes;
  if (ffma_reuse) passes.push_back({"gemm", "ffma_reuse 1", hold_factors});
  return passes;
}

}  // namespace fp8jit
