// Tuning one gemm shape on the GPU.
#pragma once

#include <functional>

#include "fp8jit/args.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/tuning.hpp"

namespace fp8jit {

// What a sweep needs from whoever compiles and launches kernels (Runtime::tune builds these), so
// that the tuner depends on no runtime.
struct GemmTuneHooks {
  // Compiles a candidate (thread-safe: called from the compile pool). Throws on failure.
  std::function<void(const KernelSpec&)> compile;
  // Launches the tuned arguments with a compiled candidate on the null stream, asynchronously.
  // Throws on a launch failure.
  std::function<void(const KernelSpec&)> run;
  // Grouped only (TuneOptions::more_group_rows): the same launch with another group table.
  std::function<void(const KernelSpec&, const int* group_rows)> run_on_rows;
};

// Sweeps the ranked candidates for `args` (checked and normalized by the caller; device operands,
// D is overwritten many times) and verifies each against the float64 reference of the
// dequantized operands. TuneOptions::jobs = 0 compiles on one thread per core.
TuneResult tune_gemm(const GemmArgs& args, const GemmTuneHooks& hooks, const TuneOptions& options);

// The same for a grouped gemm (`args` normalized: expected_m filled in): the candidates of
// grouped_gemm_candidates, each run on poisoned D and checked group by group against the float64
// reference (GroupedReference), rows outside the groups included. The group table must be valid.
// With TuneOptions::more_group_rows, each candidate is timed on those tables too
// (hooks.run_on_rows) and its time is the geometric mean over all of them.
TuneResult tune_grouped_gemm(const GroupedGemmArgs& args, const GemmTuneHooks& hooks,
                             const TuneOptions& options);

// The accuracy bound a gemm result must meet: 1e-3 relative Frobenius error for fp32 output with
// promoted accumulation, 4e-3 otherwise (bf16/fp16 output, fast accumulation). Grouped gemms:
// the same bound for every group.
double gemm_tolerance(const GemmArgs& args);
double gemm_tolerance(const GroupedGemmArgs& args);

}  // namespace fp8jit
