#include "tests/gpu/gemm_operands.hpp"

#include <gtest/gtest.h>

#include "fp8jit/runtime.hpp"
#include "tests/common/gpu_env.hpp"

namespace fp8jit::test {

Granularity granularity_a(ScaleMode m) {
  return m == ScaleMode::tensor ? Granularity::tensor : m == ScaleMode::rowwise ? Granularity::row : Granularity::group128;
}

Granularity granularity_b(ScaleMode m) {
  switch (m) {
    case ScaleMode::tensor: return Granularity::tensor;
    case ScaleMode::rowwise: return Granularity::row;
    case ScaleMode::block: return Granularity::block128;
    case ScaleMode::group: return Granularity::group128;
  }
  return Granularity::tensor;
}

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
