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
#include <memory>
#include <set>
#include <sstream>

#include "fp8jit/error.hpp"
#include "fp8jit/types.hpp"
#include "common/file_io.hpp"
#include "tools/cli.hpp"
#include "tools/options.hpp"
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

struct BenchOptions {
  std::string suite, shapes, scale = "block,tensor", providers = "fp8jit,cublaslt", out;
  bool dry_run = false;
};

int bench(const BenchOptions& o) {
  if (o.suite.empty() && o.shapes.empty())
    throw_invalid("--suite/--shapes", "<missing>", "give --suite deepseek-v3|square or --shapes FILE.csv (m,n,k rows)");
  const std::string scales = validated_scales(o.scale);
  const std::string providers = validated_providers(o.providers);
  std::string shapes = o.shapes.empty() ? find_suite(o.suite).string() : fs::absolute(o.shapes).lexically_normal().string();
  // fp8jit_bench times dense GEMMs next to cuBLASLt, which has no grouped GEMM to compare with.
  if (is_grouped_shapes(shapes))
    throw_invalid(o.shapes.empty() ? "--suite" : "--shapes", o.shapes.empty() ? o.suite : o.shapes,
                  "holds grouped (mixture-of-experts) shapes, which fp8jit_bench does not run; "
                  "time them with `fp8jit "
                  "tune --suite deepseek-v3-moe` (each row's tuned and heuristic kernels) or "
                  "against DeepGEMM with "
                  "bench/peers/grouped_peers.py");
  read_gemm_shapes(shapes);  // every row checked here, before a GPU is asked for
  const std::string out = o.out.empty() ? "fp8jit-bench-" + today() : o.out;
  if (std::error_code ec; fs::exists(out, ec) && !fs::is_directory(out, ec)) {
    const std::string kind = special_file_kind(out);
    throw_invalid("--out", out, "is " + (kind.empty() ? std::string("a file") : kind) + "; expected a directory for the results");
  }
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
  for (const auto& a : argv_s) shown.push_back(printable(shell_quote(a), 4000));  // shown, not run
  if (o.dry_run) {
    fmt::print("{}\n", join(shown, " "));
    return 0;
  }
  require_gpu();
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
  if (WIFSIGNALED(status)) throw Error(ErrorKind::io, fmt::format("fp8jit_bench killed by signal {}", WTERMSIG(status)));
  const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  if (rc != 0) throw Error(ErrorKind::io, fmt::format("fp8jit_bench exited with status {} (see above)", rc));
  std::error_code ec;
  if (!fs::exists(fs::path(out) / "gemm.csv", ec))
    throw Error(ErrorKind::io, fmt::format("no GEMM results in {}: every benchmark failed (see above)", out));
  fmt::print("fp8jit bench: results in {} (gemm.md, gemm.csv, gemm_rows.json, gemm.json); charts: bash bench/plot.sh {}\n",
             printable(out, 4000), printable(shell_quote(out), 4000));
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* b = app.add_subcommand("bench", "GPU: the GEMM benchmarks next to cuBLASLt (runs fp8jit_bench)");
  auto o = std::make_shared<BenchOptions>();
  auto* suite = b->add_option("--suite", o->suite, "a shape suite of bench/shapes (deepseek-v3, square, ...)");
  suite->excludes(b->add_option("--shapes", o->shapes, "a CSV of m,n,k rows"));
  b->add_option("--scale", o->scale, "scale modes, comma-separated: block, rowwise, tensor, group (each optionally _fast)")
      ->capture_default_str();
  b->add_option("--providers", o->providers, "fp8jit, cublaslt and/or cublaslt_bf16, comma-separated")
      ->capture_default_str();
  b->add_option("--out", o->out, "results directory (default: fp8jit-bench-<date>); charts: bash bench/plot.sh DIR");
  b->add_flag("--dry-run", o->dry_run, "print the fp8jit_bench command line instead of running it");
  on_run(b, [=] { return bench(*o); });
}

}  // namespace fp8jit::cli
