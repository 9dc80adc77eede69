#include "tools/shapes.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "fp8jit/error.hpp"
#include "runtime/ops/dims.hpp"
#include "common/file_io.hpp"
#include "tools/options.hpp"

namespace fp8jit::cli {

namespace fs = std::filesystem;

#ifdef FP8JIT_INSTALL_PREFIX
constexpr const char* kInstallPrefix = FP8JIT_INSTALL_PREFIX;
#else
constexpr const char* kInstallPrefix = "/usr/local";  // CMake's default CMAKE_INSTALL_PREFIX
#endif

fs::path exe_dir() {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::current_path() : self.parent_path();
}

bool is_executable(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
}

// fp8jit_bench next to this executable (an install's bindir), in its bench/ subdirectory (a build
// tree), then in the install prefix's bin/.
fs::path find_bench_executable() {
  const fs::path dir = exe_dir();
  const std::vector<fs::path> candidates = {dir / "fp8jit_bench", dir / "bench" / "fp8jit_bench",
                                            fs::path(kInstallPrefix) / "bin" / "fp8jit_bench"};
  for (const fs::path& p : candidates)
    if (is_executable(p)) return p;
  std::vector<std::string> where;
  for (const fs::path& p : candidates) where.push_back(p.string());
  throw Error(ErrorKind::io, fmt::format("the fp8jit_bench executable was not found (looked for {}); build it with "
                                         "`cmake --build <build dir> --target fp8jit_bench` (needs Google Benchmark "
                                         "and cuBLASLt)",
                                         join(where, ", ")));
}

// bench/shapes of a source tree next to a build tree, or <prefix>/share/fp8jit/shapes.
std::vector<fs::path> shape_dirs() {
  const fs::path dir = exe_dir();
  return {dir / ".." / "bench" / "shapes", dir / ".." / ".." / "bench" / "shapes",
          dir / ".." / "share" / "fp8jit" / "shapes", fs::path(kInstallPrefix) / "share" / "fp8jit" / "shapes"};
}

// Suite names are the CSV names with '_' written '-' (deepseek_v3.csv: deepseek-v3).
fs::path find_suite(const std::string& suite) {
  std::string underscored = suite;
  std::replace(underscored.begin(), underscored.end(), '-', '_');
  const bool plain = !suite.empty() && std::all_of(suite.begin(), suite.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
  std::set<std::string> available;
  std::vector<std::string> searched;
  for (const fs::path& d : shape_dirs()) {
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    searched.push_back(fs::weakly_canonical(d, ec).string());
    if (plain)
      for (const std::string& name : {suite, underscored})
        if (fs::is_regular_file(d / (name + ".csv"), ec)) return fs::weakly_canonical(d / (name + ".csv"), ec);
    for (const auto& e : fs::directory_iterator(d, ec)) {
      if (e.path().extension() != ".csv") continue;
      std::string s = e.path().stem().string();
      std::replace(s.begin(), s.end(), '_', '-');
      available.insert(s);
    }
  }
  if (searched.empty())
    throw_invalid("--suite", suite, "no bench/shapes directory found near the fp8jit executable; pass --shapes FILE.csv");
  throw_invalid("--suite", suite,
                fmt::format("unknown suite (available: {}; searched {})",
                            join(std::vector<std::string>(available.begin(), available.end()), ", "), join(searched, ", ")));
}

// NOTE: strict, because a silently dropped row means a shape never tuned or benchmarked.
std::vector<GemmShape> read_gemm_shapes(const std::string& path) {
  const std::string text = read_regular_file(path, "--shapes");
  std::vector<GemmShape> out;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    if (out.empty() && line.substr(first) == "m,n,k") continue;
    const std::string where = fmt::format("{}:{}", path, number);
    std::vector<std::int64_t> v;
    std::istringstream fields(line);
    for (std::string field; std::getline(fields, field, ',');) {
      const auto b = field.find_first_not_of(" \t"), e = field.find_last_not_of(" \t");
      std::int64_t x = 0;
      const char* begin = field.data() + (b == std::string::npos ? field.size() : b);
      const char* end = field.data() + (e == std::string::npos ? field.size() : e + 1);
      const auto [ptr, ec] = std::from_chars(begin, end, x);
      if (ec != std::errc() || ptr != end || begin == end)
        throw_invalid("--shapes", where, fmt::format("\"{}\" is not an m,n,k row of integers", printable(line, 80)));
      v.push_back(x);
    }
    if (v.size() != 3)
      throw_invalid("--shapes", where, fmt::format("\"{}\" has {} fields, expected m,n,k", printable(line, 80), v.size()));
    try {
      check_gemm_dims(v[0], v[1], v[2]);
    } catch (const Error& e) {
      throw_invalid("--shapes", where, e.what());
    }
    out.push_back(GemmShape{v[0], v[1], v[2]});
  }
  if (out.empty()) throw_invalid("--shapes", path, "no m,n,k rows (a CSV with lines such as 4096,7168,2048)");
  return out;
}

}  // namespace fp8jit::cli
