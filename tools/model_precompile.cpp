#include "tools/model_precompile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <tuple>

#include "common/file_io.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/models.hpp"
#include "runtime/jit/driver.hpp"
#include "tools/progress.hpp"

namespace fp8jit::cli {
namespace {

constexpr std::int64_t kMaxM = 2147483647;
constexpr std::size_t kMaxCount = std::size_t{1} << 20;

std::int64_t parse_m(const std::string& text, const std::string& part) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || !std::isdigit(static_cast<unsigned char>(text[0])) ||
      v < 1 || v > kMaxM)
    throw_invalid("--m", printable(part),
                  "batch sizes are integers in [1, 2^31-1], as in 1-4096 or 1,2,4,8");
  return v;
}

}  // namespace

std::vector<std::int64_t> parse_m_list(const std::string& text) {
  std::vector<std::int64_t> ms;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, comma - at);
    if (part.empty())
      throw_invalid("--m", printable(text, 60), "an empty entry (two commas, or one at an end)");
    const std::size_t dash = part.find('-');
    const std::int64_t lo = parse_m(part.substr(0, dash), part);
    const std::int64_t hi = dash == std::string::npos ? lo : parse_m(part.substr(dash + 1), part);
    if (hi < lo)
      throw_invalid("--m", printable(part), "a range runs from the smaller to the larger M");
    if (static_cast<std::size_t>(hi - lo) + 1 > kMaxCount - ms.size())
      throw_invalid("--m", printable(text, 60), "more than 2^20 batch sizes");
    for (std::int64_t m = lo; m <= hi; ++m) ms.push_back(m);
    at = comma + 1;
  }
  return ms;
}

int precompile_model(Runtime& rt, const std::string& config_path,
                     const std::vector<std::int64_t>& ms, int tp, const GemmProblem& problem,
                     int jobs) {
  const std::string config = read_regular_file(config_path, "model config");
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<Runtime::ModelKernel> kernels = rt.model_kernels(config, ms, tp, problem);
  std::vector<KernelSpec> specs;
  for (const Runtime::ModelKernel& k : kernels) specs.push_back(k.spec);
  std::unique_ptr<Progress> progress;
  const std::size_t n =
      rt.precompile(specs, jobs, [&](std::size_t, std::size_t total, const KernelSpec& s) {
        if (!progress)
          progress = std::make_unique<Progress>(fmt::format("compiling {} kernels", total), total);
        progress->advance(1, spec_name(s));
      });
  progress.reset();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const Runtime::ModelKernel& a, const Runtime::ModelKernel& b) {
                     return std::tie(a.what, a.m_min) < std::tie(b.what, b.m_min);
                   });
  // M: the smallest and largest batch size that takes the kernel (others may lie between).
  fmt::print("{:<44} {:<14} {}\n", "what", "M", "kernel");
  for (const Runtime::ModelKernel& k : kernels)
    fmt::print(
        "{:<44} {:<14} {}\n", k.what,
        k.m_min == k.m_max ? std::to_string(k.m_min) : fmt::format("{}-{}", k.m_min, k.m_max),
        spec_name(k.spec));
  const CacheStats st = rt.cache_stats();
  const GpuTarget& t = rt.options().target;
  const std::string target =
      driver::available() ? "" : fmt::format(" for {} ({} SMs, no GPU here)", t.name, t.sm_count);
  fmt::print(
      "{}: {} batch sizes ({}..{}), tp={}{} -> {} kernels ready in {:.1f} s ({} compiled, {} from "
      "the "
      "disk cache at {})\n",
      printable(config_path), ms.size(), ms.front(), ms.back(), tp, target, n, seconds, st.compiles,
      st.disk_hits, rt.cache_dir().empty() ? "<disabled>" : printable(rt.cache_dir()));
  return 0;
}

}  // namespace fp8jit::cli
