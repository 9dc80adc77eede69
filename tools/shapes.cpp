#include "tools/shapes.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>

#include "fp8jit/error.hpp"

namespace fp8jit::cli {

namespace fs = std::filesystem;

#ifdef FP8JIT_INSTALL_PREFIX
constexpr const char* kInstallPrefix = FP8JIT_INSTALL_PREFIX;
#else
constexpr const char* kInstallPrefix = "/usr/local";  // CMake's default CMAKE_INSTALL_PREFIX
#endif

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

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

// A readable CSV with at least one m,n,k row (the format fp8jit_bench reads).
void check_shapes_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw_invalid("--shapes", path, "no such file");
  if (fs::is_directory(path, ec)) throw_invalid("--shapes", path, "is a directory, expected a CSV file");
  std::ifstream f(path);
  if (!f) throw_invalid("--shapes", path, "not readable");
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0]))) continue;
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream ss(line);
    long long m = 0, n = 0, k = 0;
    if (ss >> m >> n >> k && m > 0 && n > 0 && k > 0) return;
  }
  throw_invalid("--shapes", path, "no m,n,k rows (a CSV with lines such as 4096,7168,2048)");
}

std::vector<GemmShape> read_gemm_shapes(const std::string& path) {
  check_shapes_file(path);
  std::ifstream f(path);
  std::vector<GemmShape> out;
  for (std::string line; std::getline(f, line);) {
    if (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0]))) continue;
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream ss(line);
    GemmShape s;
    if (ss >> s.m >> s.n >> s.k && s.m > 0 && s.n > 0 && s.k > 0) out.push_back(s);
  }
  return out;
}

}  // namespace fp8jit::cli
