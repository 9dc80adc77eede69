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

namespace fp8jit {

enum class CandidateStatus { passed, incorrect, compile_failed, launch_failed, not_supported };
std::string_view to_string(CandidateStatus s);

struct Timing {
  double median_us = 0, p20_us = 0, p80_us = 0;
};

struct CandidateResult {
  KernelSpec spec;
  CandidateStatus status = CandidateStatus::not_supported;
  Timing timing;
  std::string error;  // why it failed (compile log head, driver error, error vs reference)
};

struct TuneProgress {
  std::size_t compiled = 0, timed = 0, total = 0;
  std::optional<CandidateResult> best;
};

struct Bench {
  // Compiles a candidate (thread-safe; called from the compile pool). Throws on failure.
  std::function<void(const KernelSpec&)> compile;
  // Times a compiled candidate on the GPU (one thread). Throws on a launch failure.
  std::function<Timing(const KernelSpec&)> time;
  // Checks the candidate's output against the reference: "" if right, else the reason.
  std::function<std::string(const KernelSpec&)> verify;
};

struct TuneOptions {
  int jobs = 0;  // compile threads; 0 = the FP8JIT_JOBS setting
  std::function<void(const TuneProgress&)> progress;
};

struct TuneResult {
  std::vector<CandidateResult> candidates;  // in the order given
  std::optional<std::size_t> best;          // index of the fastest passing candidate
};

TuneResult run_sweep(const std::vector<KernelSpec>& candidates, const Bench& bench, const TuneOptions& options);

// Median, 20th and 80th percentile of samples in microseconds (samples are not modified).
Timing summarize(std::vector<double> samples_us);

// gemm candidates for a problem and shape, best predicted first: every valid config ranked by a
// wave-quantisation and tile-efficiency model; the heuristic default is always included.
// top_k = 0 keeps all.
std::vector<KernelSpec> gemm_candidates(const GemmProblem& problem, std::int64_t m, std::int64_t n, std::int64_t k,
                                        int sm_count, int smem_bytes, std::size_t top_k);

}  // namespace fp8jit
