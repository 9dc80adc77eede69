// JIT latency: cold NVRTC compile per family (NVRTC alone), load from the disk cache, host time
// per call of an in-memory kernel through the runtime against a bare cuLaunchKernelEx (quantize;
// gemm with its parameters prepared once) and against cublasLtMatmul (a small block-scaled GEMM).
//
// Host time per call: std::chrono around the call only; every 256 calls a cudaDeviceSynchronize
// outside the timed region keeps the launch queue from filling. main() checks for a usable GPU
// before any of these runs.
#include "bench/bench_latency.hpp"

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/bench_timing.hpp"
#include "bench/gemm_peer.hpp"
#include "fp8jit/quant/params.cuh"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "runtime/jit/nvrtc.hpp"
#include "runtime/sass/gemm_post_passes.hpp"

namespace fp8jit::bench {
namespace {

using Buf = DeviceScratch;

// The default variant of each family, as the runtime would pick it before any tuning.
KernelSpec quantize_latency_spec() { return default_quantize_spec(QuantizeProblem{}); }
KernelSpec dequantize_latency_spec() { return default_dequantize_spec(DequantizeProblem{}); }
KernelSpec gemm_latency_spec() { return default_gemm_spec(GemmProblem{}, 4096, 7168, 7168); }

// A kernel cache in `dir` that makes the default runtime's cubins.
KernelCacheOptions cache_options(const std::string& dir) {
  return {dir, false, gemm_post_passes(default_runtime().options().ffma_reuse), {ops::gemm_load_hook()}};
}

// Render once, then time NVRTC alone (source -> sm_90a cubin) per iteration.
void cold_compile(benchmark::State& state, const KernelSpec& spec) {
  const std::string name = spec_name(spec), src = render_source(spec);
  for (auto _ : state) benchmark::DoNotOptimize(nvrtc_compile(name, src, CompileTarget::cubin));
  state.SetLabel(name);
}

// A fresh KernelCache per iteration (empty memory cache): disk read, verify, cuModuleLoadData,
// function lookup.
void disk_cache_load(benchmark::State& state, const KernelSpec& spec) {
  cudaFree(nullptr);  // create the primary context
  const std::string dir = std::filesystem::temp_directory_path() / "fp8jit-bench-cache";
  try {
    const KernelCacheOptions options = cache_options(dir);
    KernelCache(options).cubin(spec);  // populate
    for (auto _ : state) {
      KernelCache cache(options);
      benchmark::DoNotOptimize(cache.get(spec).functions[0]);
      if (cache.stats().disk_hits != 1) {
        state.SkipWithError("expected a disk-cache hit");
        break;
      }
    }
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  state.SetLabel(spec_name(spec));
}

// Host seconds of call() per iteration (manual time).
template <class Call>
void time_host_calls(benchmark::State& state, Call&& call) {
  int n = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    if (++n % 256 == 0) cudaDeviceSynchronize();  // keep the launch queue from filling (not timed)
  }
  if (cudaDeviceSynchronize() != cudaSuccess) state.SkipWithError(cudaGetErrorString(cudaGetLastError()));
}

// Host time per call of a cached quantize kernel through the runtime, against cuLaunchKernelEx alone.
void dispatch_loop(benchmark::State& state, bool raw) {
  Buf x(4096), q(4096), s(64);
  QuantizeArgs a;
  a.x = x.p; a.m = 1; a.k = 128; a.q = q.p; a.scales = static_cast<float*>(s.p);
  quantize(a, nullptr);
  cudaDeviceSynchronize();
  // The raw launch uses the very kernel the runtime dispatches, with the same parameter block.
  static KernelCache raw_cache{cache_options("")};
  const LoadedKernel& rk = raw_cache.get(default_runtime().select(a));
  dev::QuantParams p{};
  p.x = x.p;
  p.ldx = p.ldq = 128;
  p.q = q.p;
  p.scales = p.tensor_amax = static_cast<float*>(s.p);
  p.scale_rs = p.scale_cs = 1;
  p.M = 1;
  p.K = 128;
  p.vector_ok = 1;
  void* args[] = {&p};
  CUlaunchConfig cfg{};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = static_cast<unsigned>(rk.threads);
  cfg.blockDimY = cfg.blockDimZ = 1;
  if (raw) time_host_calls(state, [&] { driver::api().cuLaunchKernelEx(&cfg, rk.functions[0], args, nullptr); });
  else time_host_calls(state, [&] { quantize(a, nullptr); });
}

// A 128x128x128 block-scaled GEMM (A 1x128 col_major_tma, B 128x128 row_major, bf16 D): zeroed
// operands, unit scales. Values do not matter for host time; pointers and sizes are valid.
struct SmallGemm {
  static constexpr std::int64_t kM = 128, kN = 128, kK = 128;
  GemmArgs g;
  Buf a{kM * kK}, b{kN * kK}, d{kM * kN * 2};
  Buf sa{4 * static_cast<std::size_t>(scale_count(Granularity::group128, ScaleLayout::col_major_tma, kM, kK))};
  Buf sb{4 * static_cast<std::size_t>(scale_count(Granularity::block128, ScaleLayout::row_major, kN, kK))};
  SmallGemm() {
    g.m = kM; g.n = kN; g.k = kK;
    g.scale_mode = ScaleMode::block;
    g.scale_a_layout = ScaleLayout::col_major_tma;
    g.scale_b_layout = ScaleLayout::row_major;
    g.scale_a_size = scale_count(Granularity::group128, g.scale_a_layout, kM, kK);
    g.scale_b_size = scale_count(Granularity::block128, g.scale_b_layout, kN, kK);
    cudaMemset(a.p, 0, kM * kK);
    cudaMemset(b.p, 0, kN * kK);
    const std::vector<float> ones(std::max(g.scale_a_size, g.scale_b_size), 1.0f);
    cudaMemcpy(sa.p, ones.data(), 4 * g.scale_a_size, cudaMemcpyHostToDevice);
    cudaMemcpy(sb.p, ones.data(), 4 * g.scale_b_size, cudaMemcpyHostToDevice);
    g.a = a.p; g.b = b.p; g.d = d.p;
    g.scale_a = static_cast<const float*>(sa.p);
    g.scale_b = static_cast<const float*>(sb.p);
  }
};

// Host time per call of fp8jit::gemm (tuning lookup + argument checks + tensor maps + launch of
// the in-memory kernel) after the first call compiled or loaded it.
void BM_GemmDispatchFp8jit(benchmark::State& state) {
  SmallGemm s;
  try {
    gemm(s.g, nullptr);
    if (cudaDeviceSynchronize() != cudaSuccess) return state.SkipWithError("the first fp8jit::gemm failed");
    state.SetLabel(spec_name(default_runtime().select(s.g)));
  } catch (const std::exception& e) {
    return state.SkipWithError(e.what());
  }
  time_host_calls(state, [&] { gemm(s.g, nullptr); });
}

// The driver's share of the same call: the kernel fp8jit::gemm picks, its parameters prepared
// (tensor maps encoded) once, then only cuLaunchKernelEx per call. BM_GemmDispatchFp8jit minus
// this is what fp8jit's lookup, checks and encoding add.
void BM_GemmDispatchPrepared(benchmark::State& state) {
  SmallGemm s;
  try {
    static KernelCache cache{cache_options("")};
    const GemmArgs a = ops::normalize(s.g);
    const LoadedKernel& k = cache.get(default_runtime().select(a));
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    if (ops::split_count(k, a, sms) != 1) return state.SkipWithError("expected no split-K for the small GEMM");
    ops::GemmLaunch l = ops::prepare(k, a, sms, 1, nullptr, nullptr);
    ops::launch(k, l);
    if (cudaDeviceSynchronize() != cudaSuccess) return state.SkipWithError("the prepared launch failed");
    state.SetLabel(k.name);
    time_host_calls(state, [&] { ops::launch(k, l); });
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// The same shape and scale mode through cublasLtMatmul, planned once (best heuristic algorithm).
void BM_GemmDispatchCublasLt(benchmark::State& state) {
  SmallGemm s;
  CublasLtGemm peer;
  std::string why;
  if (!peer.plan(s.g, why)) return state.SkipWithError(("cuBLASLt: " + why).c_str());
  cudaDeviceSynchronize();
  state.SetLabel(peer.algo_name());
  time_host_calls(state, [&] { peer.run(nullptr); });
}

}  // namespace

void register_latency_benchmarks() {
  using benchmark::RegisterBenchmark;
  RegisterBenchmark("BM_ColdCompile", [](benchmark::State& s) { cold_compile(s, quantize_latency_spec()); })
      ->Iterations(5)->Unit(benchmark::kMillisecond);
  RegisterBenchmark("BM_ColdCompileDequantize", [](benchmark::State& s) { cold_compile(s, dequantize_latency_spec()); })
      ->Iterations(5)->Unit(benchmark::kMillisecond);
  RegisterBenchmark("BM_ColdCompileGemm", [](benchmark::State& s) { cold_compile(s, gemm_latency_spec()); })
      ->Iterations(5)->Unit(benchmark::kMillisecond);
  RegisterBenchmark("BM_DiskCacheLoad", [](benchmark::State& s) { disk_cache_load(s, quantize_latency_spec()); })
      ->Iterations(20)->Unit(benchmark::kMillisecond);
  RegisterBenchmark("BM_DiskCacheLoadGemm", [](benchmark::State& s) { disk_cache_load(s, gemm_latency_spec()); })
      ->Iterations(20)->Unit(benchmark::kMillisecond);
  RegisterBenchmark("BM_DispatchRuntime", [](benchmark::State& s) { dispatch_loop(s, false); })
      ->UseManualTime()->Iterations(20000)->Unit(benchmark::kMicrosecond);
  RegisterBenchmark("BM_DispatchRawLaunch", [](benchmark::State& s) { dispatch_loop(s, true); })
      ->UseManualTime()->Iterations(20000)->Unit(benchmark::kMicrosecond);
  RegisterBenchmark("BM_GemmDispatchFp8jit", BM_GemmDispatchFp8jit)
      ->UseManualTime()->Iterations(20000)->Unit(benchmark::kMicrosecond);
  RegisterBenchmark("BM_GemmDispatchPrepared", BM_GemmDispatchPrepared)
      ->UseManualTime()->Iterations(20000)->Unit(benchmark::kMicrosecond);
  RegisterBenchmark("BM_GemmDispatchCublasLt", BM_GemmDispatchCublasLt)
      ->UseManualTime()->Iterations(20000)->Unit(benchmark::kMicrosecond);
}

}  // namespace fp8jit::bench
