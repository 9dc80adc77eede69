// Shape suites and CSV files of GEMM shapes (m,n,k per line), shared by `bench`, `tune` and
// `precompile`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "fp8jit/runtime.hpp"

namespace fp8jit::cli {

std::vector<std::string> split_list(const std::string& s);
std::string join(const std::vector<std::string>& v, const char* sep);
std::filesystem::path exe_dir();
bool is_executable(const std::filesystem::path& p);
// fp8jit_bench next to this executable, in its bench/ subdirectory, or in the install prefix.
std::filesystem::path find_bench_executable();
// A suite name (deepseek-v3, square) to its CSV: bench/shapes near the executable or
// <prefix>/share/fp8jit/shapes. Throws naming the suites that exist.
std::filesystem::path find_suite(const std::string& suite);
// Throws unless `path` is a readable CSV with at least one m,n,k row.
void check_shapes_file(const std::string& path);
// Every m,n,k row of a checked CSV.
std::vector<GemmShape> read_gemm_shapes(const std::string& path);

}  // namespace fp8jit::cli
