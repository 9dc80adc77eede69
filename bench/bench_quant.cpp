// quantize / dequantize bandwidth against the device-to-device copy of the same run, and main()
// (JIT latencies: bench_latency.cpp; GEMM against cuBLASLt: bench_gemm.cpp).
//
// Every kernel timing: CUDA events around one launch, a 256 MiB memset before it so that no run
// reads the previous one's data from L2, warm-up first, median over the iterations.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "bench/bench_gemm.hpp"
#include "bench/bench_latency.hpp"
#include "bench/bench_timing.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"

namespace {

using namespace fp8jit;

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

using Buf = fp8jit::bench::DeviceScratch;
using fp8jit::bench::median_ms;
using fp8jit::bench::time_iterations;

// Copy bandwidth (bytes read + written per second) for a copy of `bytes`, measured once per size.
double copy_gbps(std::size_t moved) {
  static std::map<std::size_t, double> cache;
  if (auto it = cache.find(moved); it != cache.end()) return it->second;
  Buf a(moved / 2), b(moved / 2);
  cudaMemset(a.p, 1, moved / 2);
  const double ms = median_ms([&] { cudaMemcpyAsync(b.p, a.p, moved / 2, cudaMemcpyDeviceToDevice); }, 30);
  return cache[moved] = moved / ms * 1e-6;
}

// One row of quant.csv per problem (the last run of it when benchmarks repeat).
struct QuantRow {
  std::string problem;
  std::int64_t m = 0, k = 0;
  std::string status = "passed";
  double time_us = 0, gbps = 0, copy_gbps = 0, pct_of_copy = 0;
  std::string kernel;
};
std::vector<QuantRow>& quant_rows() {
  static std::vector<QuantRow> r;
  return r;
}
void record(const QuantRow& row) {
  for (QuantRow& r : quant_rows())
    if (r.problem == row.problem && r.m == row.m && r.k == row.k) {
      r = row;
      return;
    }
  quant_rows().push_back(row);
}

void record_status(const char* problem, std::int64_t m, std::int64_t k, const char* status) {
  QuantRow r;
  r.problem = problem;
  r.m = m;
  r.k = k;
  r.status = status;
  record(r);
}

QuantRow report(benchmark::State& state, const std::vector<double>& ms, std::size_t bytes) {
  std::vector<double> sorted = ms;
  std::sort(sorted.begin(), sorted.end());
  const double med = sorted[sorted.size() / 2];
  const double copy = copy_gbps(bytes);
  state.counters["median_us"] = med * 1e3;
  state.counters["GBps"] = bytes / med * 1e-6;
  state.counters["copy_GBps"] = copy;
  state.counters["pct_of_copy"] = 100.0 * (bytes / med * 1e-6) / copy;
  QuantRow r;
  r.time_us = med * 1e3;
  r.gbps = bytes / med * 1e-6;
  r.copy_gbps = copy;
  r.pct_of_copy = 100.0 * r.gbps / copy;
  return r;
}

// quant.csv: problem,m,k,status,time_us,gbps,copy_gbps,pct_of_copy,kernel (read by bench/plot.sh).
void write_quant_csv(const std::string& dir) {
  if (dir.empty() || quant_rows().empty()) return;
  std::string csv = "problem,m,k,status,time_us,gbps,copy_gbps,pct_of_copy,kernel\n";
  for (const QuantRow& r : quant_rows()) {
    if (r.status == "passed")
      csv += fmt::format("{},{},{},passed,{:.2f},{:.1f},{:.1f},{:.2f},{}\n", r.problem, r.m, r.k, r.time_us, r.gbps,
                         r.copy_gbps, r.pct_of_copy, r.kernel);
    else
      csv += fmt::format("{},{},{},{},,,,,\n", r.problem, r.m, r.k, r.status);
  }
  std::ofstream(dir + "/quant.csv") << csv;
}

std::vector<unsigned char> random_bf16(std::size_t n) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 1);
  std::vector<unsigned char> h(n * 2);
  for (std::size_t i = 0; i < n; ++i) fp8::store_from_float(h.data(), i, DType::bf16, d(rng) * (i % 613 == 0 ? 50 : 1));
  return h;
}

void BM_Quantize1x128(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = state.range(1);
  if (!have_gpu()) {
    record_status("quantize 1x128", m, k, "no GPU");
    return state.SkipWithError("no GPU");
  }
  const std::size_t n = static_cast<std::size_t>(m * k);
  const std::int64_t ns = scale_count(Granularity::group128, ScaleLayout::col_major_tma, m, k);
  Buf x(n * 2), q(n), s(ns * 4);
  const auto h = random_bf16(n);
  cudaMemcpy(x.p, h.data(), h.size(), cudaMemcpyHostToDevice);
  QuantizeArgs a;
  a.x = x.p; a.m = m; a.k = k; a.q = q.p; a.scales = static_cast<float*>(s.p);
  a.scale_layout = ScaleLayout::col_major_tma;
  const std::vector<double> ms = time_iterations(state, [&] { quantize(a, nullptr); });
  QuantRow row = report(state, ms, n * 2 + n + ns * 4);
  row.problem = "quantize 1x128";
  row.m = m;
  row.k = k;
  row.kernel = spec_name(default_runtime().select(a));
  record(row);
  state.SetLabel(row.kernel);
}

void BM_Dequantize128x128(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = state.range(1);
  if (!have_gpu()) {
    record_status("dequantize 128x128", m, k, "no GPU");
    return state.SkipWithError("no GPU");
  }
  const std::size_t n = static_cast<std::size_t>(m * k);
  const std::int64_t ns = scale_count(Granularity::block128, ScaleLayout::row_major, m, k);
  Buf q(n), s(ns * 4), y(n * 2);
  std::vector<unsigned char> qh(n);
  std::mt19937 rng(4);
  for (auto& b : qh) b = static_cast<unsigned char>(rng() & 0x7E);  // finite codes
  std::vector<float> sh(ns, 0.01f);
  cudaMemcpy(q.p, qh.data(), n, cudaMemcpyHostToDevice);
  cudaMemcpy(s.p, sh.data(), ns * 4, cudaMemcpyHostToDevice);
  DequantizeArgs a;
  a.q = q.p; a.m = m; a.k = k; a.scales = static_cast<float*>(s.p); a.y = y.p;
  const std::vector<double> ms = time_iterations(state, [&] { dequantize(a, nullptr); });
  QuantRow row = report(state, ms, n + n * 2 + ns * 4);
  row.problem = "dequantize 128x128";
  row.m = m;
  row.k = k;
  row.kernel = spec_name(default_runtime().select(a));
  record(row);
  state.SetLabel(row.kernel);
}

}  // namespace

BENCHMARK(BM_Quantize1x128)->Args({4096, 7168})->Args({16384, 7168})->Args({8192, 16384})
    ->UseManualTime()->Iterations(30)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Dequantize128x128)->Args({7168, 16384})->Args({24576, 7168})
    ->UseManualTime()->Iterations(30)->Unit(benchmark::kMicrosecond);
// JIT latency (BM_ColdCompile*, BM_DiskCacheLoad*, BM_Dispatch*, BM_GemmDispatch*): bench_latency.cpp,
// registered from main so that they run after these.


namespace {

// Every config of one quantize and one dequantize problem at a fixed size: the data behind the
// heuristic defaults (run with --benchmark_filter=Sweep).
void register_sweeps() {
  using namespace fp8jit;
  QuantizeProblem qp;  // bf16 -> e4m3, 1x128
  KernelSpec qprob = make_quantize_spec(qp, {});
  for (const KernelSpec& spec : enumerate_configs(quantize_family(), qprob)) {
    benchmark::RegisterBenchmark(("SweepQuantize/" + spec_name(spec)).c_str(), [spec](benchmark::State& state) {
      if (!have_gpu()) return state.SkipWithError("no GPU");
      const std::int64_t m = 16384, k = 7168;
      const std::size_t n = m * k;
      const std::int64_t ns = scale_count(Granularity::group128, ScaleLayout::col_major_tma, m, k);
      static Buf x(n * 2), q(n), s(ns * 4);
      QuantizeArgs a;
      a.x = x.p; a.m = m; a.k = k; a.q = q.p; a.scales = static_cast<float*>(s.p);
      a.scale_layout = ScaleLayout::col_major_tma;
      const std::vector<double> ms = time_iterations(state, [&] { default_runtime().quantize(a, spec, nullptr); });
      report(state, ms, n * 3 + ns * 4);
    })->UseManualTime()->Iterations(20)->Unit(benchmark::kMicrosecond);
  }
  DequantizeProblem dp;  // e4m3 -> bf16, 128x128
  KernelSpec dprob = make_dequantize_spec(dp, {});
  for (const KernelSpec& spec : enumerate_configs(dequantize_family(), dprob)) {
    benchmark::RegisterBenchmark(("SweepDequantize/" + spec_name(spec)).c_str(), [spec](benchmark::State& state) {
      if (!have_gpu()) return state.SkipWithError("no GPU");
      const std::int64_t m = 24576, k = 7168;
      const std::size_t n = m * k;
      const std::int64_t ns = scale_count(Granularity::block128, ScaleLayout::row_major, m, k);
      static Buf q(n), s(ns * 4), y(n * 2);
      DequantizeArgs a;
      a.q = q.p; a.m = m; a.k = k; a.scales = static_cast<float*>(s.p); a.y = y.p;
      const std::vector<double> ms = time_iterations(state, [&] { default_runtime().dequantize(a, spec, nullptr); });
      report(state, ms, n * 3 + ns * 4);
    })->UseManualTime()->Iterations(20)->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // fp8jit options, taken out before Google Benchmark reads the rest:
  //   --shapes=FILE.csv (m,n,k per line)  --scales=block,tensor,...
  //   --providers=fp8jit,cublaslt[,cublaslt_bf16] (default fp8jit,cublaslt)
  //   --out=DIR (created; gemm.md, gemm.csv, gemm_rows.json, quant.csv)
  std::string shapes_path, scales = "block,tensor", providers = "fp8jit,cublaslt", out_dir;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--shapes=", 0) == 0) shapes_path = a.substr(9);
    else if (a.rfind("--scales=", 0) == 0) scales = a.substr(9);
    else if (a.rfind("--providers=", 0) == 0) providers = a.substr(12);
    else if (a.rfind("--out=", 0) == 0) out_dir = a.substr(6);
    else argv[kept++] = argv[i];
  }
  argc = kept;
  auto fail = [](const std::string& msg) {
    fmt::print(stderr, "fp8jit_bench: {}\n", msg);
    return 1;
  };
  auto split = [](const std::string& list) {
    std::vector<std::string> items;
    for (std::size_t s = 0; s <= list.size();) {
      const std::size_t c = std::min(list.find(',', s), list.size());
      if (c > s) items.push_back(list.substr(s, c - s));
      s = c + 1;
    }
    return items;
  };
  fp8jit::bench::GemmProviders which{false, false, false};
  for (const std::string& p : split(providers)) {
    if (p == "fp8jit") which.fp8jit = true;
    else if (p == "cublaslt") which.cublaslt = true;
    else if (p == "cublaslt_bf16") which.cublaslt_bf16 = true;
    else return fail(fmt::format("unknown provider '{}' in --providers (fp8jit, cublaslt, cublaslt_bf16)", p));
  }
  if (!which.fp8jit && !which.cublaslt && !which.cublaslt_bf16)
    return fail("--providers names no provider (fp8jit, cublaslt, cublaslt_bf16)");
  if (!out_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(out_dir, ec);
    if (ec) return fail(fmt::format("cannot create --out={}: {}", out_dir, ec.message()));
  }
  fp8jit::bench::register_latency_benchmarks();
  register_sweeps();
  if (!shapes_path.empty()) {
    if (!std::ifstream(shapes_path)) return fail(fmt::format("cannot read --shapes={}", shapes_path));
    const auto shapes = fp8jit::bench::read_shapes(shapes_path);
    if (shapes.empty()) return fail(fmt::format("no m,n,k rows in --shapes={}", shapes_path));
    const auto unknown = fp8jit::bench::register_gemm_benchmarks(shapes, split(scales), which);
    if (!unknown.empty())
      return fail(fmt::format("unknown scale mode '{}' in --scales (tensor, rowwise, block, group, each optionally "
                              "with _fast)", unknown.front()));
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  cudaDeviceProp prop{};
  if (have_gpu()) cudaGetDeviceProperties(&prop, 0);
  fp8jit::bench::write_gemm_report(out_dir, prop.name);
  write_quant_csv(out_dir);
  return 0;
}
