// Order statistics of timing samples: one definition of the median for the tuner, the CLI's
// timings and the benchmarks, so that their numbers compare.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace fp8jit {

// The q-quantile (0 <= q <= 1) of ascending, non-empty samples, by nearest rank: element
// round(q * (n - 1)); for q = 0.5 that is element n / 2 (the upper middle when n is even).
inline double sorted_quantile(const std::vector<double>& sorted, double q) {
  return sorted[static_cast<std::size_t>(
      std::floor(q * static_cast<double>(sorted.size() - 1) + 0.5))];
}

// The median (sorted_quantile 0.5) of samples in any order; 0 when there are none.
inline double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  return sorted_quantile(samples, 0.5);
}

// The geometric mean of positive values (so that none weighs more for being larger); 0 when
// there are none.
inline double geometric_mean(const std::vector<double>& values) {
  if (values.empty()) return 0;
  double logs = 0;
  for (double v : values) logs += std::log(v);
  return std::exp(logs / static_cast<double>(values.size()));
}

}  // namespace fp8jit
