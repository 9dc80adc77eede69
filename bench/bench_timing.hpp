// Timing shared by the benchmarks: CUDA events around one call, a 256 MiB memset before it so
// that no run reads the previous run's data from L2, 3 warm-ups, median.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

#include "common/stats.hpp"

namespace fp8jit::bench {

// cudaMalloc'd scratch, freed on scope exit.
struct DeviceScratch {
  void* p = nullptr;
  explicit DeviceScratch(std::size_t n) { cudaMalloc(&p, std::max<std::size_t>(n, 16)); }
  ~DeviceScratch() { cudaFree(p); }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;
};

// Median milliseconds of fn() over `iters` L2-flushed runs; every sample in *all if given.
inline double median_ms(const std::function<void()>& fn, int iters, std::vector<double>* all = nullptr) {
  static DeviceScratch flush(256u << 20);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    cudaMemsetAsync(flush.p, i & 0xFF, 256u << 20);
    cudaEventRecord(a);
    fn();
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (all) *all = ms;
  return median(std::move(ms));
}

// One L2-flushed, event-timed run of fn per benchmark iteration, reported as manual time;
// returns every iteration's milliseconds.
template <class State> std::vector<double> time_iterations(State& state, const std::function<void()>& fn) {
  std::vector<double> ms;
  for (auto _ : state) {
    std::vector<double> one;
    median_ms(fn, 1, &one);
    state.SetIterationTime(one[0] * 1e-3);
    ms.push_back(one[0]);
  }
  return ms;
}

}  // namespace fp8jit::bench
