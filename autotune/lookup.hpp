// Runtime lookup of tuned kernels: the tuning database's row for this GPU and shape, else the
// nearest tuned M for the same (N, K, problem); else the same two among the rows shipped with
// fp8jit (autotune/shipped_rows.hpp); else the heuristic default.
#pragma once

#include <string>

#include "autotune/gpu_key.hpp"
#include "autotune/tuning_db.hpp"  // tuning_space_hash: the space rows are looked up in
#include "fp8jit/args.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/tuning.hpp"

namespace fp8jit {

enum class LookupSource { exact, nearest_m, shipped, shipped_nearest_m, heuristic };
std::string_view to_string(LookupSource s);

struct GemmLookup {
  KernelSpec spec;
  LookupSource source = LookupSource::heuristic;
};

// Never throws for database trouble (a damaged or unwritable database logs a warning and the
// heuristic is used): serving must not stop because of the tuning cache.
// `shipped_dir`: the shipped rows' directory (default_shipped_tuning_dir()); empty: none. Policy
// off consults neither database.
GemmLookup lookup_gemm(const GemmProblem& problem, std::int64_t m, std::int64_t n, std::int64_t k,
                       const std::string& db_path, TunePolicy policy, const GpuKey& gpu,
                       int smem_bytes, const std::string& shipped_dir = {});

// Grouped gemms (problem.layout contiguous or masked): the row of this GPU, layout, group count,
// expected rows per group, N and K (grouped_problem_key), else the nearest tuned expected M for
// the same (layout, groups, N, K, problem), else default_grouped_gemm_spec. Never throws for
// database trouble, as lookup_gemm.
GemmLookup lookup_grouped_gemm(const GemmProblem& problem, std::int64_t groups,
                               std::int64_t expected_m, std::int64_t n, std::int64_t k,
                               const std::string& db_path, TunePolicy policy, const GpuKey& gpu,
                               int smem_bytes, const std::string& shipped_dir = {});

// Stores a sweep's winner (and every candidate's timing), naming the card that timed it
// (current_gpu_identity() of the tuning thread). Returns false when nothing passed.
bool store_gemm_result(const std::string& db_path, const GpuKey& gpu, const std::string& tuned_on,
                       const GemmShape& shape, const TuneResult& r);
// The same for a grouped sweep: keyed by the group count, shape.m the expected rows per group.
bool store_grouped_gemm_result(const std::string& db_path, const GpuKey& gpu, const std::string& tuned_on,
                               std::int64_t groups, const GemmShape& shape, const TuneResult& r);

}  // namespace fp8jit
