// Value types shared by the public API, the generator and the runtime.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "fp8jit/export.hpp"

namespace fp8jit {

// Element types of high-precision tensors (inputs of quantize, outputs of dequantize and gemm).
enum class DType { bf16, fp16, fp32 };

// The two OCP FP8 formats. E4M3 is "e4m3fn": max 448, NaN = 0x7F/0xFF, no inf.
// E5M2 follows IEEE conventions: max 57344, inf = 0x7C/0xFC, NaNs above.
enum class Fp8Format { e4m3, e5m2 };

// Which elements share one scale.
enum class Granularity {
  tensor,    // one scale for the whole tensor
  row,       // one scale per row (per token)
  group128,  // 1x128: one scale per 128 consecutive elements of a row
  block128,  // 128x128: one scale per 128x128 tile
};

// How a 2-D scale tensor is laid out in memory. For `row_major`, scale (r, g) of a tensor with
// G scale columns sits at r * G + g. `col_major_tma` is what Hopper GEMMs read with TMA
// (DeepGEMM, cuBLASLt VEC128): scale (r, g) sits at g * align4(R) + r, i.e. the row count padded
// to 16 bytes of fp32.
enum class ScaleLayout { row_major, col_major_tma };

// How the GEMM operands are scaled (D = sum_k (A * sA)(m, k) (B * sB)(n, k)).
enum class ScaleMode {
  tensor,   // one fp32 scale per operand
  rowwise,  // a scale per row of A (M) and per row of B (N)
  block,    // A per 1x128 group along K, B per 128x128 block (DeepSeek-V3)
  group,    // A and B per 1x128 group along K (weight gradients)
};

// How a GEMM's rows are cut into groups, each multiplied by its own B (mixture-of-experts).
enum class GemmLayout {
  dense,       // one GEMM
  contiguous,  // A [M, K]: the groups' rows one after another, given by G+1 row offsets
  masked,      // A [G, M_max, K]: group g's first masked_m[g] rows (CUDA-graph friendly decode)
  indexed,     // A [M, K]: row r belongs to group m_indices[r] (-1: padding), each group's rows
               // starting at a multiple of 128 rows (DeepGEMM's m_indices)
};

// Which launches a gemm kernel serves (GemmConfig::epilogue).
enum class GemmEpilogue {
  any,  // split-K partials or in-cluster sums, TMA or direct stores of D
  tma,  // K in one range, D by TMA stores only (dense GEMMs)
};

// Where kernels come from (FP8JIT_TUNE): heuristics only; the tuning database, else heuristics;
// or the database, tuning a shape the first time it is seen (and storing the winner).
enum class TunePolicy { off, cached, on_miss };

// How split-K ranges are summed (FP8JIT_SPLIT_SUM): inside a thread-block cluster where the
// kernel and GPU allow it (no workspace, no second kernel), or always through the FP32 workspace
// and a reduction kernel.
enum class SplitSum { cluster, workspace };

FP8JIT_API std::string_view to_string(DType v);
FP8JIT_API std::string_view to_string(Fp8Format v);
FP8JIT_API std::string_view to_string(Granularity v);
FP8JIT_API std::string_view to_string(ScaleLayout v);

FP8JIT_API std::string_view to_string(ScaleMode v);
FP8JIT_API std::optional<ScaleMode> parse_scale_mode(std::string_view s);
FP8JIT_API std::string_view to_string(GemmLayout v);
FP8JIT_API std::optional<GemmLayout> parse_gemm_layout(std::string_view s);
FP8JIT_API std::string_view to_string(GemmEpilogue v);
FP8JIT_API std::optional<GemmEpilogue> parse_gemm_epilogue(std::string_view s);
FP8JIT_API std::optional<DType> parse_dtype(std::string_view s);
FP8JIT_API std::optional<Fp8Format> parse_fp8_format(std::string_view s);
FP8JIT_API std::optional<Granularity> parse_granularity(std::string_view s);
FP8JIT_API std::optional<ScaleLayout> parse_scale_layout(std::string_view s);

FP8JIT_API std::size_t dtype_size(DType v);
FP8JIT_API float fp8_max(Fp8Format f);  // largest finite magnitude: 448 or 57344

}  // namespace fp8jit
