// What `fp8jit gemm` and `fp8jit select-gemm` share between their dense part (cmd_gemm.cpp) and
// their grouped part (cmd_grouped_gemm.cpp): the options and the checks of their combinations.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "fp8jit/runtime.hpp"
#include "tools/shapes.hpp"

namespace fp8jit::cli {

struct GemmOptions {
  std::int64_t m = 4096, n = 7168, k = 7168;
  std::string scale = "block", out = "bf16", a_format = "e4m3", b_format = "e4m3", config;
  bool fast_accum = false;
  // D = A.B^T + bias [n] (random values in the output dtype): the forward GEMM of a Linear with
  // a bias, whose kernels (epilogue and tile choice) differ from the GEMM's without. Dense only.
  bool bias = false;
  // gemm: the layout of A's scales, col_major_tma (DeepGEMM's, which TMA reads) or row_major
  // (DeepSeek-V3 kernel.py's act_quant and the Python package's quantize default, which the
  // kernel's producer warp copies): the two paths a caller's scales take.
  std::string scale_layout_a = "col_major_tma";
  int iters = 20;
  // Grouped GEMMs: --layout contiguous|masked with --groups, optionally --expected-m.
  std::string layout = "dense";
  std::int64_t groups = 0;       // 0: not given
  std::int64_t expected_m = -1;  // -1: not given
  std::string db;                // select-gemm: look the spec up in this tuning database
};

// The problem the options describe; throws Error(invalid_argument) for formats or accumulation
// that no kernel has.
GemmProblem problem_from(const GemmOptions& o);

// The grouped shape the options describe, or nullopt for a dense GEMM. A combination that makes
// no sense (--groups without a grouped layout, a grouped layout without --groups, --expected-m
// above --m, ...) throws CLI::ValidationError naming the option: a usage error (exit status 2),
// raised before anything needs a GPU.
std::optional<GroupedShape> grouped_shape_from(const GemmOptions& o);

// `--config`: a JSON object of gemm config parameters (e.g. {"block_n":160,"stages":5}) whose
// fields replace the runtime's choice; checked at once.
std::map<std::string, std::int64_t> config_overrides(const std::string& config);
// `spec` with the overrides applied, validated (the error names the rule a combination breaks).
KernelSpec with_overrides(KernelSpec spec, const std::map<std::string, std::int64_t>& overrides);

// Where a GPU can be asked: its SM count and shared memory per block; else an H100 SXM's.
struct GpuLimits {
  int sm_count = 132, smem_bytes = 232448;
};
GpuLimits gpu_limits();

// `fp8jit gemm` of a grouped shape (cmd_grouped_gemm.cpp).
int run_grouped_gemm(const GemmOptions& o, const GroupedShape& s);

}  // namespace fp8jit::cli
