#include "tests/gpu/gemm_operands.hpp"

#include <gtest/gtest.h>

#include "fp8jit/runtime.hpp"
#include "tests/common/gpu_env.hpp"

namespace fp8jit::test {

void quantize_into(std::int64_t rows, std::int64_t k, Fp8Format f, Granularity g, ScaleLayout layout, void* q,
                   float* s, unsigned seed) {
  const auto h = random_tensor(rows, k, k, DType::bf16, seed, false);
  DeviceMem x(h.size());
  x.upload(h.data(), h.size());
  QuantizeArgs a;
  a.x = x.get();
  a.m = rows;
  a.k = k;
  a.q = q;
  a.format = f;
  a.scales = s;
  a.granularity = g;
  a.scale_layout = layout;
  default_runtime().quantize(a, nullptr);
  ASSERT_EQ(cudaSuccess, cudaDeviceSynchronize());
}

}  // namespace fp8jit::test
