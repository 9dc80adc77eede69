// KernelSpec: one kernel variant = family + problem + config.
//
// A spec is plain data (family name and named integer/string parameters). Every parameter is
// checked against its family's config space before a spec is named, hashed or rendered, so a spec
// read from a file or a database can never inject text into generated source.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "fp8jit/export.hpp"
#include "fp8jit/types.hpp"

namespace fp8jit {

using ParamValue = std::variant<std::int64_t, std::string>;

struct FP8JIT_API KernelSpec {
  std::string family;                        // "quantize", "dequantize", "gemm"
  std::map<std::string, ParamValue> params;  // problem and config parameters by name

  std::int64_t i(const std::string& key) const;         // throws if absent or not an integer
  const std::string& s(const std::string& key) const;   // throws if absent or not a string
  bool operator==(const KernelSpec&) const = default;
};

// Throws fp8jit::Error (invalid_argument) naming the parameter, its value and the allowed set.
FP8JIT_API void validate_spec(const KernelSpec& spec);

// Canonical procedural name, e.g. "quant_sm90_bf16_e4m3_1x128_v8_t256_u2". Validates.
FP8JIT_API std::string spec_name(const KernelSpec& spec);
// Stable across runs, platforms and builds: a 64-bit hash of the canonical JSON. Validates.
FP8JIT_API std::uint64_t spec_hash(const KernelSpec& spec);

// {"family": ..., "problem": {...}, "config": {...}} with keys in the family's order.
FP8JIT_API std::string spec_to_json(const KernelSpec& spec, int indent = -1);
// Parses and validates; accepts the form above. Throws fp8jit::Error with the reason.
FP8JIT_API KernelSpec spec_from_json(std::string_view json);

// The generated CUDA source of one variant: includes the family's header and instantiates one
// template. Validates first.
FP8JIT_API std::string render_source(const KernelSpec& spec);

// Names of the __global__ functions the source defines, in launch order.
FP8JIT_API std::vector<std::string> spec_entry_points(const KernelSpec& spec);
// Dynamic shared memory the variant's main kernel needs, in bytes.
FP8JIT_API int spec_dynamic_smem(const KernelSpec& spec);
// Threads per block of the variant's kernels.
FP8JIT_API int spec_block_threads(const KernelSpec& spec);
// CTAs per thread-block cluster of the variant's main kernel (1: launched without a cluster).
FP8JIT_API int spec_cluster_size(const KernelSpec& spec);

// ---- typed front doors for the quantize and dequantize families ----------------------------

// What is baked into a quantize kernel. Everything else (scale layout, static scale, power-of-two
// scales, amax output, sizes) is a run-time argument of the same kernel.
struct QuantizeProblem {
  DType input = DType::bf16;
  Fp8Format format = Fp8Format::e4m3;
  Granularity granularity = Granularity::group128;
  bool transpose = false;  // also write the transposed FP8 tensor
  // DeepSeek-V3's act_quant arithmetic (inference/kernel.py, Triton) instead of IEEE
  // round-to-nearest: amax floored at 1e-4, scale = amax / 448 and codes x / scale by
  // div.full.f32, power-of-two scales (ue8m0) as exp2(ceil(log2(scale))) by ex2/lg2.approx; so
  // that a drop-in for kernel.py writes its bytes. 1x128, E4M3, no transpose; the host reference
  // does not model these approximate instructions (kernel.py itself is the reference).
  bool deepseek_arithmetic = false;
  // Also the fp32 sum over the rows of every column of x (a Linear layer's bias gradient when x is
  // dY), from the same read: transposed output (the tile strategy) and IEEE arithmetic only. Each
  // 128-row tile's column sums are a fixed tree over its rows, and the tiles' sums are added in
  // order, whatever the config: the same bits on every run and from every tuned kernel.
  bool column_sums = false;
};

struct DequantizeProblem {
  Fp8Format format = Fp8Format::e4m3;
  DType output = DType::bf16;
  Granularity granularity = Granularity::block128;
};

// Elements per vector access, threads per block, segments in flight per thread.
struct ElementwiseConfig {
  int vec = 8;
  int threads = 256;
  int unroll = 2;
};

FP8JIT_API KernelSpec make_quantize_spec(const QuantizeProblem& problem,
                                         const ElementwiseConfig& config);
FP8JIT_API KernelSpec make_dequantize_spec(const DequantizeProblem& problem,
                                           const ElementwiseConfig& config);
FP8JIT_API QuantizeProblem quantize_problem_of(const KernelSpec& spec);
FP8JIT_API DequantizeProblem dequantize_problem_of(const KernelSpec& spec);
FP8JIT_API ElementwiseConfig elementwise_config_of(const KernelSpec& spec);

// Heuristic defaults, used before any tuning. `max_vec` caps the vector width (alignment).
FP8JIT_API KernelSpec default_quantize_spec(const QuantizeProblem& problem, int max_vec = 16);
FP8JIT_API KernelSpec default_dequantize_spec(const DequantizeProblem& problem, int max_vec = 16);

// ---- the gemm family ------------------------------------------------------------------------

// What is baked into a gemm kernel. Sizes, pointers and scale layouts are run-time arguments.
struct GemmProblem {
  Fp8Format a_format = Fp8Format::e4m3;
  Fp8Format b_format = Fp8Format::e4m3;
  DType out = DType::bf16;
  ScaleMode scale = ScaleMode::block;
  bool bias = false;
  // Tensor and rowwise scaling only: accumulate all of K in the tensor cores (cuBLASLt's
  // FAST_ACCUM): faster, ~2e-3 relative error at K = 7168. Default: promote every 128 of K.
  bool fast_accum = false;
  // Grouped (mixture-of-experts) layouts: tensor, rowwise and block scaling, no bias; clusters
  // along M only in the contiguous and masked layouts (two tile-rows of one group).
  GemmLayout layout = GemmLayout::dense;
  bool operator==(const GemmProblem&) const = default;
};

struct GemmConfig {
  int block_m = 128;
  int block_n = 128;
  int stages = 4;
  int group_m = 8;  // tile-rows per raster group
  // 2-CTA clusters computing neighbouring tiles along M (cluster_m = 2: B's tile multicast) or
  // N (cluster_n = 2: A's tile multicast); at most one of them is 2.
  int cluster_m = 1;
  int cluster_n = 1;
  // Which launches the kernel serves (a build choice, not a tuning one: the host derives it from
  // the shape). any: every launch (split-K, direct stores). tma: dense GEMMs whose K is one range
  // and whose D takes TMA stores; the kernel holds only that epilogue: about half the code and
  // 1.5-2.6x less compile time. The runtime picks tma where the shape does not split K and the
  // tile is not computed in column halves (gemm_epilogue_for), and runs the config's any kernel
  // for a call whose D cannot take TMA stores.
  GemmEpilogue epilogue = GemmEpilogue::any;
  // 1: the kernel computes D^T = B A^T, so that the problem's N fills the tile's block_m rows and
  // its M the block_n columns: at decode-sized M (a few rows) a stage then carries block_n rows
  // of A instead of 64 or more. Dense GEMMs, no cluster, block_m 64 or 128, block_n at most 128;
  // D is written by direct stores. The heuristic takes it for M up to 16.
  int swap_ab = 0;
  bool operator==(const GemmConfig&) const = default;
};

// How a launch cuts K (run-time: a kernel of epilogue any serves any split count).
FP8JIT_API int gemm_split_k(std::int64_t m, std::int64_t n, std::int64_t k,
                            const GemmConfig& config, int sm_count);

// The epilogue build for a launch of `config` at this shape: tma for dense GEMMs whose K is one
// range (gemm_split_k 1), except tiles in column halves (their tma build ran slower); any
// otherwise. `config.epilogue` is ignored.
FP8JIT_API GemmEpilogue gemm_epilogue_for(const GemmProblem& problem, std::int64_t m,
                                          std::int64_t n, std::int64_t k, const GemmConfig& config,
                                          int sm_count);
// `spec` (a gemm spec) with the epilogue a launch at this shape needs.
FP8JIT_API KernelSpec with_gemm_epilogue(const KernelSpec& spec, std::int64_t m, std::int64_t n,
                                         std::int64_t k, int sm_count);

FP8JIT_API KernelSpec make_gemm_spec(const GemmProblem& problem, const GemmConfig& config);
FP8JIT_API GemmProblem gemm_problem_of(const KernelSpec& spec);
FP8JIT_API GemmConfig gemm_config_of(const KernelSpec& spec);

// Heuristic default for grouped GEMMs (problem.layout contiguous or masked): `groups` groups of
// about `expected_m` rows each, against their own N x K.
FP8JIT_API KernelSpec default_grouped_gemm_spec(const GemmProblem& problem, std::int64_t groups,
                                                std::int64_t expected_m, std::int64_t n, std::int64_t k,
                                                int sm_count = 132, int smem_bytes = 232448);

// Heuristic default for an M x N x K problem on a GPU with `sm_count` multiprocessors and
// `smem_bytes` of opt-in shared memory per block; dense problems of up to 16 rows of A swap the
// operands (GemmConfig::swap_ab).
FP8JIT_API KernelSpec default_gemm_spec(const GemmProblem& problem, std::int64_t m, std::int64_t n,
                                        std::int64_t k, int sm_count = 132,
                                        int smem_bytes = 232448);

}  // namespace fp8jit
