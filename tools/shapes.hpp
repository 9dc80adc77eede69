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
// A grouped (mixture-of-experts) GEMM shape: `groups` groups of N x K weights. m as `fp8jit gemm
// --m` takes it: contiguous, the rows of A (all groups' rows together); masked, M_max (the rows
// each group has room for). expected_m: the rows per group the kernel is chosen and tuned for
// (the tuning database's M); 0 for the default, m / groups (contiguous) or m (masked).
struct GroupedShape {
  GemmLayout layout = GemmLayout::contiguous;
  std::int64_t groups = 0, m = 0, n = 0, k = 0, expected_m = 0;
};
inline constexpr std::int64_t kMaxGroups = std::int64_t{1} << 16;
inline constexpr const char* kGroupedHeader = "layout,groups,m,n,k,expected_m";

// expected_m, or its default where it is 0.
std::int64_t expected_rows(const GroupedShape& s);
// What is wrong with a grouped shape whose m, n and k passed check_gemm_dims: the field ("groups",
// "expected_m", "groups*m", "groups*n", "layout") and why; an empty field when nothing is.
struct ShapeProblem {
  std::string field, why;
};
ShapeProblem grouped_shape_problem(const GroupedShape& s);

// Whether a shapes CSV holds grouped shapes: its first line that is neither blank nor a comment
// is kGroupedHeader. Such a file is read by read_grouped_shapes, never by read_gemm_shapes.
bool is_grouped_shapes(const std::string& path);
// Every row of a grouped shapes CSV: the kGroupedHeader line, then rows such as
// contiguous,8,4096,4096,7168,512 (layout contiguous or masked, integers that check_gemm_dims and
// grouped_shape_problem accept); blank lines and '#' comments skipped. Errors name the file, the
// line number and the line, as read_gemm_shapes's do.
std::vector<GroupedShape> read_grouped_shapes(const std::string& path);

// Every m,n,k row of a shapes CSV. Blank lines, '#' comments and an "m,n,k" header are skipped;
// any other line must be three integers that check_gemm_dims accepts, else Error naming the file,
// the line number and the line. A file without rows, a directory or a FIFO is an error too.
std::vector<GemmShape> read_gemm_shapes(const std::string& path);

}  // namespace fp8jit::cli
