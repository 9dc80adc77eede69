// fp8jit_bench's main(): its own options, the GPU check, Google Benchmark, the report files.
//
// Whatever can be refused is refused before anything is written: first the options, then the
// GPU, and only then is --out created and Google Benchmark run (it opens --benchmark_out as it
// starts). Exit status: 0 when every benchmark ran, 1 for bad options, no usable GPU, a benchmark
// that reported an error (what did run is still written) or output that could not be written.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_gemm.hpp"
#include "bench/bench_latency.hpp"
#include "bench/bench_quant.hpp"
#include "fp8jit/error.hpp"
#include "runtime/ops/dims.hpp"
#include "runtime/jit/driver.hpp"
#include "common/file_io.hpp"

namespace fp8jit::bench {
namespace {

namespace fs = std::filesystem;

// fp8jit's options, taken out of argv before Google Benchmark reads the rest.
struct Options {
  std::string shapes_path;                    // --shapes=FILE.csv (m,n,k per line)
  std::string scales = "block,tensor";        // --scales=block,tensor,...
  std::string providers = "fp8jit,cublaslt";  // --providers=fp8jit,cublaslt[,cublaslt_bf16]
  std::string out_dir;  // --out=DIR (created; gemm.md, gemm.csv, gemm_rows.json, quant.csv)
};

Options take_options(int& argc, char** argv) {
  Options o;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--shapes=", 0) == 0)
      o.shapes_path = a.substr(9);
    else if (a.rfind("--scales=", 0) == 0)
      o.scales = a.substr(9);
    else if (a.rfind("--providers=", 0) == 0)
      o.providers = a.substr(12);
    else if (a.rfind("--out=", 0) == 0)
      o.out_dir = a.substr(6);
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  return o;
}

[[noreturn]] void refuse(const std::string& message) {
  throw Error(ErrorKind::invalid_argument, message);
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  for (std::size_t s = 0; s <= list.size();) {
    const std::size_t c = std::min(list.find(',', s), list.size());
    if (c > s) items.push_back(list.substr(s, c - s));
    s = c + 1;
  }
  return items;
}

GemmProviders parse_providers(const std::string& list) {
  GemmProviders which{false, false, false};
  for (const std::string& p : split(list)) {
    if (p == "fp8jit")
      which.fp8jit = true;
    else if (p == "cublaslt")
      which.cublaslt = true;
    else if (p == "cublaslt_bf16")
      which.cublaslt_bf16 = true;
    else
      refuse(
          fmt::format("unknown provider '{}' in --providers (fp8jit, cublaslt, cublaslt_bf16)", p));
  }
  if (!which.fp8jit && !which.cublaslt && !which.cublaslt_bf16)
    refuse("--providers names no provider (fp8jit, cublaslt, cublaslt_bf16)");
  return which;
}

// A shape fp8jit's GEMM would refuse would fail mid-run; it is refused here instead.
std::vector<GemmShape> read_valid_shapes(const std::string& path) {
  const std::vector<GemmShape> shapes = read_shapes(path);
  if (shapes.empty()) refuse(fmt::format("--shapes {}: no m,n,k rows", path));
  for (const GemmShape& s : shapes) {
    try {
      check_gemm_dims(s.m, s.n, s.k);
    } catch (const Error& e) {
      refuse(fmt::format("--shapes {}: shape {},{},{}: {}", path, s.m, s.n, s.k, e.what()));
    }
  }
  return shapes;
}

// --out is created only once the GPU check passed: what creating it would refuse is refused now.
void check_out_dir(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::path probe = fs::absolute(dir, ec);
  if (ec) refuse(fmt::format("--out {}: {}", dir, ec.message()));
  while (!fs::exists(fs::symlink_status(probe, ec)) && probe.has_relative_path())
    probe = probe.parent_path();
  if (!fs::is_directory(probe, ec)) {
    if (probe == fs::absolute(dir, ec))
      refuse(fmt::format("--out {}: exists and is not a directory; give a directory", dir));
    refuse(fmt::format("--out {}: {} is not a directory", dir, probe.string()));
  }
  if (::access(probe.c_str(), W_OK | X_OK) != 0)
    refuse(fmt::format("--out {}: cannot write in {}: {}; give a directory you can write to", dir,
                       probe.string(), io::errno_text(errno)));
}

// Empty when device 0 can run the benchmarks (fp8jit's kernels and the CUDA runtime the bench
// calls directly), else why not.
std::string gpu_problem() {
  if (!driver::available()) return driver::unavailable_reason();
  try {
    driver::require_sm90(driver::device_info(0));
  } catch (const Error& e) {
    return e.what();
  }
  // The runtime can refuse a device the driver offers (a driver older than this CUDA runtime).
  int count = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&count); e != cudaSuccess)
    return fmt::format("the CUDA runtime cannot use the GPU: {} ({})", cudaGetErrorName(e),
                       cudaGetErrorString(e));
  return "";
}

// A run that failed, and its message: Google Benchmark 1.8 replaced Run::error_occurred and
// error_message by Run::skipped (error or user skip) and skip_message; both versions are in use
// (Debian ships 1.7, the GPU machine 1.8+).
template <class Run>
bool run_failed(const Run& r, std::string& message) {
  if constexpr (requires { r.error_occurred; }) {
    message = r.error_message;
    return r.error_occurred;
  } else {
    message = r.skip_message;
    using Skipped = decltype(r.skipped);  // dependent: only looked up with 1.8+
    return r.skipped == Skipped::SkippedWithError;
  }
}

// The display reporter Google Benchmark would have used, counting the runs that reported an
// error: Google Benchmark itself exits 0 whatever failed.
class ErrorCountingReporter : public benchmark::BenchmarkReporter {
 public:
  // Call after benchmark::Initialize: the default reporter follows --benchmark_format.
  ErrorCountingReporter() : inner_(benchmark::CreateDefaultDisplayReporter()) {}
  bool ReportContext(const Context& context) override { return inner_->ReportContext(context); }
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      std::string message;
      if (run_failed(r, message) && errors_++ == 0) first_ = r.benchmark_name() + ": " + message;
    }
    inner_->ReportRuns(runs);
  }
  void Finalize() override { inner_->Finalize(); }
  int errors() const { return errors_; }
  const std::string& first_error() const { return first_; }

 private:
  benchmark::BenchmarkReporter* inner_;  // owned by Google Benchmark
  int errors_ = 0;
  std::string first_;
};

// What the options ask for, checked.
struct Plan {
  GemmProviders providers;
  std::vector<std::string> modes;  // of the GEMM benchmarks
  std::vector<GemmShape> shapes;   // empty without --shapes: no GEMM benchmarks
};

Plan plan_of(const Options& o) {
  Plan p;
  p.providers = parse_providers(o.providers);
  p.modes = split(o.scales);
  for (const std::string& m : p.modes)
    if (!is_gemm_mode(m))
      refuse(
          fmt::format("unknown scale mode '{}' in --scales (tensor, rowwise, block, group, "
                      "each optionally with _fast)",
                      m));
  if (!o.shapes_path.empty()) {
    if (p.modes.empty()) refuse("--scales names no scale mode for the --shapes benchmarks");
    p.shapes = read_valid_shapes(o.shapes_path);
  }
  check_out_dir(o.out_dir);
  return p;
}

// Registers and runs what --benchmark_filter selects, then writes the report; returns the exit
// status.
int run_benchmarks(const Plan& p, const std::string& out_dir, const std::string& gpu) {
  register_latency_benchmarks();
  register_quant_sweeps();
  register_gemm_benchmarks(p.shapes, p.modes, p.providers);
  ErrorCountingReporter display;
  const std::size_t matched = benchmark::RunSpecifiedBenchmarks(&display);
  benchmark::Shutdown();
  OutputFiles files;
  stage_gemm_report(gemm_results(), gpu, out_dir, files);
  stage_quant_csv(out_dir, files);
  files.commit();
  if (matched == 0) return 1;  // Google Benchmark said that nothing matched the filter
  if (display.errors() > 0) {
    fmt::print(stderr, "fp8jit_bench: {} benchmark run(s) reported an error; the first: {}\n",
               display.errors(), printable(display.first_error(), 1000));
    return 1;
  }
  return 0;
}

int run(int argc, char** argv) {
  const Options o = take_options(argc, argv);
  const Plan plan = plan_of(o);
  benchmark::Initialize(&argc, argv);  // parses flags only: opens no file
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (const std::string why = gpu_problem(); !why.empty()) {
    fmt::print(stderr, "fp8jit_bench: needs a GPU: {}\n", printable(why, 1000));
    return 1;
  }
  if (!o.out_dir.empty()) {
    std::error_code ec;
    fs::create_directories(o.out_dir, ec);
    if (ec)
      throw Error(ErrorKind::io,
                  fmt::format("--out {}: cannot create it: {}", o.out_dir, ec.message()));
  }
  return run_benchmarks(plan, o.out_dir, driver::device_info(0).name);
}

}  // namespace
}  // namespace fp8jit::bench

int main(int argc, char** argv) {
  try {
    return fp8jit::bench::run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "fp8jit_bench: {}\n", e.what());
    return 1;
  }
}
