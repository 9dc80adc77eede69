// Split-K reduction: D = sum over splits of the FP32 partial tiles (+ bias), in D's type.
#pragma once

#include "fp8jit/common/convert.cuh"
#include "fp8jit/common/grid_dependency.cuh"
#include "fp8jit/common/memory.cuh"
#include "fp8jit/gemm/params.cuh"

namespace fp8jit {
namespace dev {

template <int OUT, bool kBias> struct Sm90GemmReduce {
  static FP8JIT_DEVICE void run(const GemmParams& p) {
    enter_dependent_grid();  // the partial sums are the previous kernel's
    constexpr int S = ElemSize<OUT>::value;
    const i64 total = static_cast<i64>(p.M) * p.N;
    const i64 stride = static_cast<i64>(gridDim.x) * blockDim.x;
    for (i64 i = static_cast<i64>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
      float sum = 0.0f;
      for (int s = 0; s < p.splits; ++s) sum += p.workspace[s * total + i];  // fixed order: deterministic
      const int row = static_cast<int>(i / p.N), col = static_cast<int>(i % p.N);
      if constexpr (kBias) sum += elem_to_f32<OUT>(load_bits<S>(p.bias, col));
      store_bits<S>(p.d, static_cast<i64>(row) * p.ldd + col, f32_to_elem<OUT>(sum));
    }
  }
};

}  // namespace dev
}  // namespace fp8jit
