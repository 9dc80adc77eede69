// The sizes every door accepts: the C++ API, the C ABI and the CLI call these same checks, so a
// size is refused with the same words whichever way it comes in. Each throws
// Error(invalid_argument) naming the first bad size, its value and the rule.
#pragma once

#include <climits>
#include <cstdint>

namespace fp8jit {

// Kernels take sizes as int.
inline constexpr std::int64_t kMaxDim = INT_MAX;

// m, n, k in [1, 2^31-1]; k a multiple of 16 (TMA needs 16-byte aligned rows of FP8 operands).
void check_gemm_dims(std::int64_t m, std::int64_t n, std::int64_t k);
// m, k in [1, 2^31-1] and m*k below 2^34 elements (segment counts are 32-bit).
void check_quant_dims(std::int64_t m, std::int64_t k);
// m, k in [1, 2^31-1]: the bound that keeps every scale count within int64.
void check_scale_dims(std::int64_t m, std::int64_t k);

}  // namespace fp8jit
