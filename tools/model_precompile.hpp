// `fp8jit precompile --model config.json`: every kernel a model will run, compiled before serving.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8jit/runtime.hpp"

namespace fp8jit::cli {

// Batch sizes from "1-4096" (every M of the range), "1,2,4,8" or a mix ("1-16,32,64-128"): each
// in [1, 2^31-1], ranges ascending, at most 2^20 in all. Throws Error naming the bad part.
std::vector<std::int64_t> parse_m_list(const std::string& text);

// Selects, compiles and prints a table (what, kernel, the batch sizes that take it) and a summary.
int precompile_model(Runtime& rt, const std::string& config_path,
                     const std::vector<std::int64_t>& ms, int tp, const GemmProblem& problem,
                     int jobs);

}  // namespace fp8jit::cli
