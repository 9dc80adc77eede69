// Results of autotuning: every candidate's status and timing, and the winner.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8jit/export.hpp"
#include "fp8jit/kernel_spec.hpp"

namespace fp8jit {

// Where the tuned rows shipped with fp8jit are: <directory of this library or program>/../share/
// fp8jit/tuning (the install layout, and a build tree inside the source tree), or two levels up
// for a multiarch lib/<triplet>/; empty when the library's own path cannot be found.
FP8JIT_API std::string default_shipped_tuning_dir();

enum class CandidateStatus { passed, incorrect, compile_failed, launch_failed, not_supported };
FP8JIT_API std::string_view to_string(CandidateStatus s);

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

struct TuneOptions {
  int jobs = 0;            // compile threads; 0: the runtime's (RuntimeOptions::jobs)
  std::size_t top_k = 32;  // candidates kept after the analytic ranking (0: the whole space)
  int warmup = 3, iters = 20;
  // Winner's curse: the fastest of many noisy medians is biased low. The `finalists` fastest
  // passing candidates and the first one (the heuristic's choice) are timed a second time, and
  // the second round decides; a challenger must beat the first candidate by `min_gain` there.
  int finalists = 3;
  double min_gain = 0.02;
  std::function<void(const TuneProgress&)> progress;
  // Grouped gemms: more group tables of the same shape (device pointers, as
  // GroupedGemmArgs::group_rows; the kernels clamp what is out of range) on which each candidate
  // is timed too. Its time is then the geometric mean of its medians over every table, the
  // arguments' own first, so that the winner must hold on each routing, not on one: a masked
  // winner on one draw of rows per group ran 9-10 % behind another tile on two other draws (H200,
  // 32 experts x 64 rows). Only the arguments' own table is checked against the reference. Not
  // for dense gemms (an error there); at most kMaxMoreGroupTables.
  std::vector<const int*> more_group_rows;
};

// More tables than this would time each candidate so often that a sweep takes minutes a shape.
inline constexpr std::size_t kMaxMoreGroupTables = 64;

struct TuneResult {
  std::vector<CandidateResult> candidates;  // in the order given
  std::optional<std::size_t> best;          // index of the winner (see TuneOptions::finalists)
};

}  // namespace fp8jit
