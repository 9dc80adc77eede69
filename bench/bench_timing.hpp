// Timing shared by the benchmarks: CUDA events around one call, a 256 MiB memset before it so
// that no run reads the previous run's data from L2, 3 warm-ups, median.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

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
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace fp8jit::bench
