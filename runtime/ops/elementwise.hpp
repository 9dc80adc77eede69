// Argument checks and launch sequences of the quantize and dequantize operations.
#pragma once

#include <cuda.h>

#include "fp8jit/runtime.hpp"
#include "runtime/jit/kernel_cache.hpp"

namespace fp8jit::ops {

// Fills defaults (ld = 0 -> dense) and throws Error(invalid_argument) naming the first bad
// argument. Nothing touches the GPU.
QuantizeArgs normalize(const QuantizeArgs& a);
DequantizeArgs normalize(const DequantizeArgs& a);

// Largest vector width (16, 8 or 4 elements) the tensors' addresses and leading dimensions allow;
// 0 when not even 4 (the kernels then take their element-wise path).
int max_vec(const QuantizeArgs& a);
int max_vec(const DequantizeArgs& a);

// Throws unless `spec` computes what the arguments ask for.
void check_matches(const KernelSpec& spec, const QuantizeArgs& a);
void check_matches(const KernelSpec& spec, const DequantizeArgs& a);

// Device memory a quantize with column sums needs for its per-tile partial sums (ceil(m/128) * k
// floats); 0 without column sums.
std::size_t column_partial_bytes(const QuantizeArgs& a);

// Launches (in-stream, no allocation, no synchronisation). Arguments must be normalized. `pdl`:
// every kernel may start under the previous one in the stream (LaunchConfig::pdl). Column sums
// take `col_partials`: column_partial_bytes(a) of device memory, used by this launch's kernels only
// (a stream's workspace).
void launch(const LoadedKernel& k, const QuantizeArgs& a, CUstream stream, bool pdl = false,
            float* col_partials = nullptr);
void launch(const LoadedKernel& k, const DequantizeArgs& a, CUstream stream, bool pdl = false);

}  // namespace fp8jit::ops
