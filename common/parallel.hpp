// A minimal parallel loop for compile-bound work (NVRTC is thread-safe per program).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace fp8jit {

// `jobs` when positive, else one per core: what a jobs option of 0 means.
inline int jobs_or_cores(int jobs) {
  return jobs > 0 ? jobs : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
