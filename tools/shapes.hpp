// Shape suites and CSV files of GEMM shapes (m,n,k per line), shared by `bench`, `tune` and
// `precompile`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fp8jit/runtime.hpp"

namespace fp8jit::cli {

std::filesystem::path exe_dir();
bool is_executable(const std::filesystem::path& p);
// fp8jit_bench next to this executable, in its bench/ subdirectory, or in the install prefix.
std::filesystem::path find_bench_executable();
// A suite name (deepseek-v3, square) to its CSV: bench/shapes near the executable or
// <prefix>/share/fp8jit/shapes. Throws naming the suites that exist.
std::filesystem::path find_suite(const std::string& suite);
// Every m,n,k row of a shapes CSV. Blank lines, '#' comments and an "m,n,k" header are skipped;
// any other line must be three integers that check_gemm_dims accepts, else Error naming the file,
// the line number and the line. A file without rows, a directory or a FIFO is an error too.
std::vector<GemmShape> read_gemm_shapes(const std::string& path);

}  // namespace fp8jit::cli
