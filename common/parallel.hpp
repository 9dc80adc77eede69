// A minimal parallel loop for compile-bound work (NVRTC is thread-safe per program).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace fp8jit {

// Compile threads when nobody said: the cores, at most 8. NVRTC serializes most of a compile
// within a process: on a 32-core H200 host, 88 GEMM kernels took 4.0 s on 1 thread, 3.5 s on 8
// and 3.9 s on 32, and 213 took 7.1 s on 8 threads (12 s of CPU) against 10.8 s on 32 (198 s of
// CPU, threads spinning): more threads than 8 only burn cores that a tuning run's other work or
// a second process would use.
inline constexpr int kMaxDefaultJobs = 8;

// `jobs` when positive, else the default above: what a jobs option of 0 means.
inline int jobs_or_default(int jobs) {
  if (jobs > 0) return jobs;
  return std::min(kMaxDefaultJobs, static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
}

// Calls fn(i) for i in [0, n) on `jobs` threads. fn must not throw (catch inside).
inline void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& fn) {
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i = next++; i < n; i = next++) fn(i);
  };
  std::vector<std::thread> threads;
  for (int t = 1; t < jobs && static_cast<std::size_t>(t) < n; ++t) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
}

}  // namespace fp8jit
