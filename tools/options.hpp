// Typed option rules shared by the subcommands. Sizes go through runtime/ops/dims.hpp, the same rules
// the C++ API and the C ABI apply, so every door accepts and refuses the same values.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

namespace fp8jit::cli {

// A decimal integer in [lo, hi]: "expected an integer" / "out of range" with the value echoed.
CLI::Validator integer_in(std::int64_t lo, std::int64_t hi);
// Any text but the empty string ("must not be empty").
CLI::Validator non_empty();
// A GEMM dimension ('m', 'n' or 'k'), checked by check_gemm_dims (k: a multiple of 16).
CLI::Validator gemm_dim(char which);
// A quantize/dequantize dimension ('m' or 'k'), checked by check_quant_dims (the product m*k is
// checked by the command, which knows both).
CLI::Validator quant_dim(char which);

// --jobs N in [1, 1024]; left at 0 when not given, which resolve_jobs() turns into FP8JIT_JOBS.
// (Read late: a bad FP8JIT_JOBS must fail the command with a message, not the parser's set-up.)
CLI::Option* add_jobs(CLI::App* sub, int& jobs);
int resolve_jobs(int jobs);
// An option whose value must be one of `names`; the names appear in --help.
CLI::Option* add_choice(CLI::App* sub, const std::string& flag, std::string& value, const std::vector<std::string>& names,
                        const std::string& doc);

// Comma-separated items, empty ones dropped.
std::vector<std::string> split_list(const std::string& s);
std::string join(const std::vector<std::string>& v, const char* sep);

}  // namespace fp8jit::cli
