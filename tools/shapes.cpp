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

namespace {

struct Line {
  int number;
  std::string text;
};

// The lines of a CSV that hold something: trailing spaces and '\r' cut, blank lines and '#'
// comments left out.
std::vector<Line> data_lines(const std::string& text) {
  std::vector<Line> out;
  std::istringstream lines(text);
  int number = 0;
  for (std::string line; std::getline(lines, line);) {
    ++number;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    out.push_back({number, line.substr(first)});
  }
  return out;
}

std::vector<std::string> split_fields(const std::string& line) {
  std::vector<std::string> out;
  std::istringstream fields(line);
  for (std::string field; std::getline(fields, field, ',');) {
    const auto b = field.find_first_not_of(" \t"), e = field.find_last_not_of(" \t");
    out.push_back(b == std::string::npos ? std::string() : field.substr(b, e - b + 1));
  }
  if (!line.empty() && line.back() == ',')
    out.emplace_back();  // getline drops a trailing empty field
  return out;
}

bool parse_field(const std::string& field, std::int64_t& x) {
  const char* end = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(field.data(), end, x);
  return ec == std::errc() && ptr == end && !field.empty();
}

std::string where(const std::string& path, const Line& line) {
  return fmt::format("{}:{}", path, line.number);
}

void check_dims(const std::string& at, std::int64_t m, std::int64_t n, std::int64_t k) {
  try {
    check_gemm_dims(m, n, k);
  } catch (const Error& e) {
    throw_invalid("--shapes", at, e.what());
  }
}

}  // namespace

std::int64_t expected_rows(const GroupedShape& s) {
  if (s.expected_m > 0) return s.expected_m;
  return s.layout == GemmLayout::masked
             ? s.m
             : std::max<std::int64_t>(1, s.m / std::max<std::int64_t>(1, s.groups));
}

ShapeProblem grouped_shape_problem(const GroupedShape& s) {
  if (s.layout == GemmLayout::dense) return {"layout", "dense has no groups: contiguous, masked or indexed"};
  if (s.groups < 1 || s.groups > kMaxGroups)
    return {"groups", fmt::format("{} is out of range [1, {}]", s.groups, kMaxGroups)};
  if (s.expected_m < 0 || s.expected_m > s.m)
    return {"expected_m",
            fmt::format("{} is out of range [0, {}] (0: the default; at most m, {})", s.expected_m,
                        s.m, s.layout == GemmLayout::masked ? "M_max" : "all groups' rows")};
  // The kernels address B's rows, and masked A's and D's, as int (GroupedGemmArgs).
  if (s.groups * s.n > kMaxDim)
    return {"groups*n",
            fmt::format("{}x{}: B [groups * n, k] must have fewer than 2^31 rows", s.groups, s.n)};
  // Indexed: every group's rows start on a multiple of 128, so m must leave room for each.
  if (s.layout == GemmLayout::indexed && s.m < s.groups * kGemmIndexedAlignment)
    return {"groups*m", fmt::format("{} groups need m >= {} rows with the indexed layout (each group's rows "
                                    "start on a multiple of {}); m is {}",
                                    s.groups, s.groups * kGemmIndexedAlignment, kGemmIndexedAlignment, s.m)};
  if (s.layout == GemmLayout::masked && s.groups * s.m > kMaxDim)
    return {"groups*m",
            fmt::format("{}x{}: masked A [groups * m, k] must have fewer than 2^31 rows", s.groups,
                        s.m)};
  return {};
}

bool is_grouped_shapes(const std::string& path) {
  const std::vector<Line> lines = data_lines(read_regular_file(path, "--shapes"));
  return !lines.empty() && lines.front().text == kGroupedHeader;
}

std::vector<GroupedShape> read_grouped_shapes(const std::string& path) {
  const std::vector<Line> lines = data_lines(read_regular_file(path, "--shapes"));
  if (lines.empty() || lines.front().text != kGroupedHeader)
    throw_invalid("--shapes", path,
                  fmt::format("a grouped shapes file starts with the header {}", kGroupedHeader));
  std::vector<GroupedShape> out;
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string at = where(path, lines[i]), shown = printable(lines[i].text, 80);
    const std::vector<std::string> f = split_fields(lines[i].text);
    if (f.size() != 6)
      throw_invalid(
          "--shapes", at,
          fmt::format("\"{}\" has {} fields, expected {}", shown, f.size(), kGroupedHeader));
    GroupedShape s;
    const std::optional<GemmLayout> layout = parse_gemm_layout(f[0]);
    if (!layout || *layout == GemmLayout::dense)
      throw_invalid("--shapes", at,
                    fmt::format("\"{}\": the layout is contiguous, masked or indexed", shown));
    s.layout = *layout;
    std::int64_t* v[] = {&s.groups, &s.m, &s.n, &s.k, &s.expected_m};
    for (std::size_t j = 0; j < 5; ++j)
      if (!parse_field(f[j + 1], *v[j]))
        throw_invalid("--shapes", at,
                      fmt::format("\"{}\": {} \"{}\" is not an integer", shown,
                                  split_fields(kGroupedHeader)[j + 1], printable(f[j + 1], 40)));
    check_dims(at, s.m, s.n, s.k);
    if (const ShapeProblem p = grouped_shape_problem(s); !p.field.empty())
      throw_invalid("--shapes", at, fmt::format("\"{}\": {} {}", shown, p.field, p.why));
    out.push_back(s);
  }
  if (out.empty())
    throw_invalid(
        "--shapes", path,
        "no grouped rows (after the header, lines such as contiguous,8,4096,4096,7168,512)");
  return out;
}

// NOTE: strict, because a silently dropped row means a shape never tuned or benchmarked.
std::vector<GemmShape> read_gemm_shapes(const std::string& path) {
  std::vector<GemmShape> out;
  for (const Line& line : data_lines(read_regular_file(path, "--shapes"))) {
    if (out.empty() && line.text == "m,n,k") continue;
    const std::string at = where(path, line), shown = printable(line.text, 80);
    if (out.empty() && line.text == kGroupedHeader)
      throw_invalid("--shapes", at,
                    "holds grouped (mixture-of-experts) shapes; this command takes m,n,k rows");
    std::vector<std::int64_t> v;
    for (const std::string& field : split_fields(line.text)) {
      if (!parse_field(field, v.emplace_back()))
        throw_invalid("--shapes", at, fmt::format("\"{}\" is not an m,n,k row of integers", shown));
    }
    if (v.size() != 3)
      throw_invalid("--shapes", at,
                    fmt::format("\"{}\" has {} fields, expected m,n,k", shown, v.size()));
    check_dims(at, v[0], v[1], v[2]);
    out.push_back(GemmShape{v[0], v[1], v[2]});
  }
  if (out.empty()) throw_invalid("--shapes", path, "no m,n,k rows (a CSV with lines such as 4096,7168,2048)");
  return out;
}

}  // namespace fp8jit::cli
