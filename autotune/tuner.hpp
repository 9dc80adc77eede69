// The autotuner's sweep: candidates -> prune -> compile in parallel -> time -> verify -> winner.
//
// The sweep is independent of how a candidate is run: `Bench` says how to time one compiled
// candidate and check its output, so the same logic tunes gemm, quantize and dequantize, and is
// tested without a GPU. A candidate that fails to compile, launch or verify is recorded with its
// status and never aborts the sweep (Triton's "score infinity").
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/tuning.hpp"

namespace fp8jit {

struct Bench {
  // Compiles a candidate (thread-safe; called from the compile pool). Throws on failure.
  std::function<void(const KernelSpec&)> compile;
  // Times a compiled candidate on the GPU (one thread). Throws on a launch failure.
  std::function<Timing(const KernelSpec&)> time;
  // Checks the candidate's output against the reference: "" if right, else the reason.
  std::function<std::string(const KernelSpec&)> verify;
};

TuneResult run_sweep(const std::vector<KernelSpec>& candidates, const Bench& bench, const TuneOptions& options);

// The sweep's last step: times the finalists again (TuneOptions::finalists) and returns the
// winner; their timings in r become the second round's, a finalist that now fails is marked so.
std::optional<std::size_t> confirm_winner(TuneResult& r, const Bench& bench, const TuneOptions& options);

// Median, 20th and 80th percentile of samples in microseconds (samples are not modified).
Timing summarize(std::vector<double> samples_us);

// One candidate's timings on several inputs as one: the geometric mean of each quantile (so that
// no input's scale outweighs another's); empty: all zero.
Timing geometric_mean_timing(const std::vector<Timing>& timings);

// gemm candidates for a problem and shape, best predicted first: every valid config ranked by a
// wave-quantisation and tile-efficiency model; the heuristic default is always included.
// top_k = 0 keeps all.
std::vector<KernelSpec> gemm_candidates(const GemmProblem& problem, std::int64_t m, std::int64_t n, std::int64_t k,
                                        int sm_count, int smem_bytes, std::size_t top_k);
// The same for grouped gemms (problem.layout contiguous or masked) of `groups` groups of about
// `expected_m` rows: default_grouped_gemm_spec first, then the layout's valid configs ranked by
// the same model on the groups' stacked tile-rows, without split-K.
std::vector<KernelSpec> grouped_gemm_candidates(const GemmProblem& problem, std::int64_t groups,
                                                std::int64_t expected_m, std::int64_t n,
                                                std::int64_t k, int sm_count, int smem_bytes,
                                                std::size_t top_k);

}  // namespace fp8jit
