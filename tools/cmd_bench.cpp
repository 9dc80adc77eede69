// fp8jit bench: the GEMM benchmarks (fp8jit next to cuBLASLt) over a shape suite, run by the
// separate fp8jit_bench executable: the CLI itself never links cuBLASLt or Google Benchmark. It
// validates the arguments, finds the executable and the suite, and runs it with its exit status.
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "fp8jit/error.hpp"
#include "fp8jit/types.hpp"
#include "tools/cli.hpp"
#include "tools/shapes.hpp"

extern char** environ;

namespace fp8jit::cli {
namespace {

namespace fs = std::filesystem;

std::string validated_scales(const std::string& list) {
  const auto items = split_list(list);
  if (items.empty()) throw_invalid("--scale", list, "expected block, rowwise, tensor or group (comma-separated)");
  std::vector<std::string> out;
  for (const std::string& s : items) {
    const bool fast = s.size() > 5 && s.compare(s.size() - 5, 5, "_fast") == 0;
    if (!parse_scale_mode(fast ? s.substr(0, s.size() - 5) : s))
      throw_invalid("--scale", s, "unknown scale mode: block, rowwise, tensor or group (optionally with _fast), comma-separated");
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  }
  return join(out, ",");
}

// The providers the bench binary knows, in a canonical order: fp8jit, cublaslt (FP8, same
// scale mode), cublaslt_bf16 (BF16 of the same values).
std::string validated_providers(const std::string& list) {
  static const std::vector<std::string> known = {"fp8jit", "cublaslt", "cublaslt_bf16"};
  std::vector<std::string> chosen;
  for (const std::string& p : split_list(list)) {
    if (std::find(known.begin(), known.end(), p) == known.end())
      throw_invalid("--providers", p, "unknown provider: fp8jit, cublaslt and/or cublaslt_bf16, comma-separated");
  }
  for (const std::string& k : known) {
    const auto items = split_list(list);
    if (std::find(items.begin(), items.end(), k) != items.end()) chosen.push_back(k);
  }
  if (chosen.empty()) throw_invalid("--providers", list, "expected fp8jit, cublaslt and/or cublaslt_bf16, comma-separated");
  return join(chosen, ",");
}

std::string today() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./,^:+") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

int cmd_bench(const Args& args) {
  const auto suite = args.get("suite"), shapes_arg = args.get("shapes");
  if (suite && shapes_arg) throw_invalid("--suite/--shapes", *suite + " / " + *shapes_arg, "give one of them, not both");
  if (!suite && !shapes_arg)
    throw_invalid("--suite/--shapes", "<missing>", "give --suite deepseek-v3|square or --shapes FILE.csv (m,n,k rows)");
  const std::string scales = validated_scales(args.get_or("scale", "block,tensor"));
  const std::string providers = validated_providers(args.get_or("providers", "fp8jit,cublaslt"));
  std::string shapes;
  if (shapes_arg) {
    check_shapes_file(*shapes_arg);
    shapes = fs::absolute(*shapes_arg).lexically_normal().string();
  } else {
    shapes = find_suite(*suite).string();
  }
  const std::string out = args.get_or("out", "fp8jit-bench-" + today());
  if (out.empty()) throw_invalid("--out", "<empty>", "expected a directory");
  const fs::path exe = find_bench_executable();

  std::vector<std::string> argv_s = {exe.string(),
                                     "--benchmark_filter=^Gemm/",
                                     "--shapes=" + shapes,
                                     "--scales=" + scales,
                                     "--providers=" + providers,
                                     "--out=" + out,
                                     "--benchmark_out=" + (fs::path(out) / "gemm.json").string(),
                                     "--benchmark_out_format=json"};
  std::vector<std::string> shown;
  for (const auto& a : argv_s) shown.push_back(shell_quote(a));
  if (args.flag("dry-run")) {
    fmt::print("{}\n", join(shown, " "));
    return 0;
  }
  fmt::print("fp8jit bench: {}\n", join(shown, " "));
  std::fflush(stdout);
  std::vector<char*> argv_c;
  for (auto& a : argv_s) argv_c.push_back(a.data());
  argv_c.push_back(nullptr);
  pid_t pid = 0;
  if (const int rc = ::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv_c.data(), environ); rc != 0)
    throw Error(ErrorKind::io, fmt::format("cannot run {}: {}", exe.string(), std::strerror(rc)));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw Error(ErrorKind::io, fmt::format("waitpid: {}", std::strerror(errno)));
  if (WIFSIGNALED(status)) {
    fmt::print(stderr, "fp8jit bench: fp8jit_bench killed by signal {}\n", WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  std::error_code ec;
  if (rc == 0 && fs::exists(fs::path(out) / "gemm.csv", ec))
    fmt::print("fp8jit bench: results in {} (gemm.md, gemm.csv, gemm_rows.json, gemm.json); charts: bash bench/plot.sh {}\n",
               out, shell_quote(out));
  else if (rc == 0)
    fmt::print(stderr, "fp8jit bench: no GEMM results in {}: every benchmark failed (see above)\n", out);
  else
    fmt::print(stderr, "fp8jit bench: fp8jit_bench exited with status {}\n", rc);
  return rc;
}

}  // namespace fp8jit::cli
