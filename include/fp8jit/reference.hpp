// Host reference implementations of quantize and dequantize.
//
// They take the same argument structs as the GPU operations, with HOST pointers, and produce the
// bytes the GPU kernels must produce bit for bit (same IEEE operations, same rounding). Slow and
// simple on purpose: tests and `fp8jit` demos check the kernels against them.
#pragma once

#include <cuda.h>

#include "fp8jit/args.hpp"
#include "fp8jit/export.hpp"

namespace fp8jit::reference {

// Scale and reciprocal for a group's amax, as the kernels compute them.
struct ScalePair {
  float scale;
  float inv;
};
FP8JIT_API ScalePair scale_from_amax(float amax, Fp8Format format, bool pow2);
FP8JIT_API ScalePair scale_from_static(float scale);

// Host pointers. Column sums (QuantizeArgs::column_sums) in the kernels' summation order: the
// GPU's bits, whatever its config.
FP8JIT_API void quantize(const QuantizeArgs& host_args);
FP8JIT_API void dequantize(const DequantizeArgs& host_args);

// float64 D_ref [m, n] (dense, device memory, m * n doubles) of the dequantized operands of a
// GEMM whose arguments point to DEVICE memory (+ bias). Runs on the GPU (a naive kernel),
// synchronously on `stream`.
FP8JIT_API void gemm_on_device(const GemmArgs& device_args, double* d_ref, CUstream stream);

// ||d - ref|| / ||ref|| (Frobenius) of a host copy of D [m, n] (row stride ldd, element type
// dtype) against a host copy of the float64 reference. NaN or inf anywhere in d gives +inf.
FP8JIT_API double relative_error(const void* d, std::int64_t ldd, DType dtype, const double* ref,
                                 std::int64_t m, std::int64_t n);

}  // namespace fp8jit::reference
