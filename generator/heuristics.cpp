// Default configs before any tuning, from what is known about memory-bound kernels on Hopper:
// 16-byte accesses per thread and at least two of them in flight.
#include <algorithm>

#include "fp8jit/kernel_spec.hpp"

namespace fp8jit {
namespace {

// Largest allowed vector width (4, 8 or 16 elements) not above `max_vec` whose access is at most
// 16 bytes of `elem_bytes`-sized elements.
int pick_vec(int elem_bytes, int max_vec) {
  int vec = 16 / elem_bytes;  // 8 for bf16/fp16, 4 for fp32
  vec = std::min(std::max(vec, 4), 16);
  while (vec > 4 && vec > max_vec) vec /= 2;
  return vec;
}

}  // namespace

KernelSpec default_quantize_spec(const QuantizeProblem& problem, int max_vec) {
  const int vec = pick_vec(static_cast<int>(dtype_size(problem.input)), max_vec);
  const bool tile = problem.granularity == Granularity::block128 || problem.transpose;
  const bool row = problem.granularity == Granularity::row;
  ElementwiseConfig c{vec, 256, 2};
  if (tile) c = {vec, 256, problem.granularity == Granularity::tensor ? 2 : 1};
  if (row) c = {vec, 128, 2};
  return make_quantize_spec(problem, c);
}

KernelSpec default_dequantize_spec(const DequantizeProblem& problem, int max_vec) {
  // 16 FP8 codes = one 16-byte load; the store is 16 or 32 bytes (64 for fp32, as 4 stores).
  const int vec = std::max(4, std::min(16, max_vec));
  return make_dequantize_spec(problem, {vec, 256, 2});
}

}  // namespace fp8jit
