// quantize / dequantize bandwidth against the device-to-device copy of the same run (main():
// main.cpp; JIT latencies: bench_latency.cpp; GEMM against cuBLASLt: bench_gemm.cpp).
//
// Every kernel timing: CUDA events around one launch, a 256 MiB memset before it so that no run
// reads the previous one's data from L2, warm-up first, median over the iterations.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <random>

#include "bench/bench_quant.hpp"
#include "bench/bench_timing.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"
#include "common/file_io.hpp"

namespace {

using namespace fp8jit;

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

std::vector<unsigned char> random_bf16(std::size_t n) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0, 1);
  std::vector<unsigned char> h(n * 2);
  for (std::size_t i = 0; i < n; ++i) fp8::store_from_float(h.data(), i, DType::bf16, d(rng) * (i % 613 == 0 ? 50 : 1));
  return h;
}

void BM_Quantize1x128(benchmark::State& state) {
  const std::int64_t m = state.range(0), k = state.range(1);
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

namespace fp8jit::bench {

// Every config of one quantize and one dequantize problem at a fixed size: the data behind the
// heuristic defaults (run with --benchmark_filter=Sweep).
void register_quant_sweeps() {
  QuantizeProblem qp;  // bf16 -> e4m3, 1x128
  KernelSpec qprob = make_quantize_spec(qp, {});
  for (const KernelSpec& spec : enumerate_configs(quantize_family(), qprob)) {
    benchmark::RegisterBenchmark(("SweepQuantize/" + spec_name(spec)).c_str(), [spec](benchmark::State& state) {
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

// Every row passed: a benchmark that fails reports an error and records no row. The status
// column stays for bench/plot.sh.
void stage_quant_csv(const std::string& dir, OutputFiles& files) {
  if (dir.empty() || quant_rows().empty()) return;
  std::string csv = "problem,m,k,status,time_us,gbps,copy_gbps,pct_of_copy,kernel\n";
  for (const QuantRow& r : quant_rows())
    csv += fmt::format("{},{},{},passed,{:.2f},{:.1f},{:.1f},{:.2f},{}\n", r.problem, r.m, r.k,
                       r.time_us, r.gbps, r.copy_gbps, r.pct_of_copy, r.kernel);
  files.add(dir + "/quant.csv", csv);
}

}  // namespace fp8jit::bench
