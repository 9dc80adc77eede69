// info, list, emit, compile, compile-all: everything that needs no GPU.
#include <fmt/format.h>

#include <chrono>
#include <fstream>
#include <mutex>

#include "fp8jit/error.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"
#include "runtime/driver.hpp"
#include "runtime/headers.hpp"
#include "runtime/kernel_cache.hpp"
#include "runtime/nvrtc.hpp"
#include "runtime/parallel.hpp"
#include "runtime/settings.hpp"
#include "tools/cli.hpp"

namespace fp8jit::cli {
namespace {

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!f) throw Error(ErrorKind::io, fmt::format("cannot write {}", path));
}

// --family a,b,c or every family.
std::vector<const FamilyDef*> selected_families(const Args& args) {
  auto f = args.get("family");
  if (!f) return all_families();
  std::vector<const FamilyDef*> out;
  std::size_t start = 0;
  while (start <= f->size()) {
    const std::size_t comma = std::min(f->find(',', start), f->size());
    out.push_back(&find_family(f->substr(start, comma - start)));
    start = comma + 1;
  }
  return out;
}

// Families with a huge space (gemm: thousands of variants of a few seconds each) are compiled
// by a fixed spread sample unless --sample 0 asks for everything.
constexpr std::size_t kFullCompileLimit = 3000;

}  // namespace

int cmd_info(const Args&) {
  const Settings& s = Settings::get();
  if (driver::available()) {
    const driver::DeviceInfo d = driver::device_info(driver::current_device());
    fmt::print("gpu:        {} (compute capability {}.{}, {} SMs, {} MiB, L2 {} KiB)\n", d.name,
               d.cc_major, d.cc_minor, d.sm_count, d.total_mem >> 20, d.l2_bytes >> 10);
    fmt::print("driver:     CUDA {}.{}\n", d.driver_version / 1000, d.driver_version % 1000 / 10);
  } else {
    fmt::print("gpu:        none ({})\n", driver::unavailable_reason());
  }
  fmt::print("nvrtc:      {}\n", nvrtc_version());
  fmt::print("cache dir:  {}{}\n", s.cache_dir, s.disk_cache ? "" : " (disabled)");
  fmt::print("tuning db:  {}\n", s.db_path);
  fmt::print("headers:    {} embedded, hash {:016x}\n", embedded_headers().names.size(), embedded_headers().hash);
  fmt::print("settings:\n");
  for (const auto& [name, doc] : Settings::documented()) fmt::print("  {:<20} {}\n", name, doc);
  return 0;
}

int cmd_list(const Args& args) {
  for (const FamilyDef* f : selected_families(args)) {
    const std::vector<KernelSpec> specs = enumerate_specs(*f);
    if (args.flag("json")) {
      for (const KernelSpec& s : specs) fmt::print("{}\n", spec_to_json(s));
      continue;
    }
    fmt::print("{} ({} valid variants, header {})\n", f->name, specs.size(), f->header);
    for (const ParamDef& p : f->params) {
      std::vector<std::string> vals;
      for (const auto& v : p.allowed) vals.push_back(param_to_string(v));
      fmt::print("  {:<7} {:<12} {{{}}}  {}\n", p.is_config ? "config" : "problem", p.name,
                 fmt::join(vals, ", "), p.doc);
    }
  }
  return 0;
}

int cmd_emit(const Args& args) {
  auto s = args.get("spec");
  if (!s) throw_invalid("--spec", "<missing>", "a spec as JSON or a file holding it");
  fmt::print("{}", render_source(read_spec(*s)));
  return 0;
}

int cmd_compile(const Args& args) {
  auto s = args.get("spec");
  if (!s) throw_invalid("--spec", "<missing>", "a spec as JSON or a file holding it");
  const KernelSpec spec = read_spec(*s);
  const std::string name = spec_name(spec), source = render_source(spec);
  CompileResult cubin = nvrtc_compile(name, source, CompileTarget::cubin);
  const PostPassStats post = post_pass(name, cubin.binary);  // the bytes the runtime would load
  if (auto path = args.get("cubin")) write_file(*path, cubin.binary);
  if (auto path = args.get("ptx")) write_file(*path, nvrtc_compile(name, source, CompileTarget::ptx).binary);
  fmt::print("{}: sm_90a cubin {} bytes, compiled in {:.3f} s\n", name, cubin.binary.size(), cubin.seconds);
  if (post.reuse.runs)
    fmt::print("FP8JIT_FFMA_REUSE=1: {} FFMAs keep their factor cached ({} runs, {} left alone)\n", post.reuse.held,
               post.reuse.runs, post.reuse.skipped);
  if (post.yield.runs)
    fmt::print("FP8JIT_FFMA_YIELD={}: {} FFMAs in {} runs may yield\n", Settings::get().ffma_yield,
               post.yield.released, post.yield.runs);
  if (!cubin.log.empty()) fmt::print("nvrtc log:\n{}\n", cubin.log);
  return 0;
}

int cmd_compile_all(const Args& args) {
  const int jobs = static_cast<int>(args.get_int("jobs", Settings::get().jobs));
  if (jobs < 1 || jobs > 1024) throw_invalid("--jobs", std::to_string(jobs), "must be in [1, 1024]");
  int failures = 0;
  const long long sample = args.get_int("sample", 96);
  if (sample < 0) throw_invalid("--sample", std::to_string(sample), "must be >= 0 (0: every variant)");
  for (const FamilyDef* f : selected_families(args)) {
    std::vector<KernelSpec> specs = enumerate_specs(*f);
    const std::size_t total = specs.size();
    if (sample > 0 && total > kFullCompileLimit) specs = spread_sample(*f, static_cast<std::size_t>(sample));
    std::mutex mutex;
    double total_seconds = 0, max_seconds = 0;
    std::size_t bytes = 0;
    const auto t0 = std::chrono::steady_clock::now();
    parallel_for(specs.size(), jobs, [&](std::size_t i) {
      try {
        const CompileResult r = nvrtc_compile(spec_name(specs[i]), render_source(specs[i]), CompileTarget::cubin);
        std::lock_guard<std::mutex> lock(mutex);
        total_seconds += r.seconds;
        max_seconds = std::max(max_seconds, r.seconds);
        bytes += r.binary.size();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        ++failures;
        fmt::print(stderr, "FAILED {}: {}\n", spec_name(specs[i]), e.what());
      }
    });
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("{:<11} {:>5} of {} variants compiled for sm_90a in {:.1f} s on {} threads: mean {:.3f} s, max {:.3f} s, "
               "{:.1f} MiB of cubins\n",
               f->name, specs.size(), total, wall, jobs, total_seconds / std::max<std::size_t>(1, specs.size()),
               max_seconds, bytes / 1048576.0);
  }
  fmt::print("{}\n", failures ? fmt::format("{} variants FAILED", failures) : std::string("all variants compiled"));
  return failures ? 1 : 0;
}

}  // namespace fp8jit::cli
