// The one place that reads FP8JIT_* environment variables. Only the facade
// (RuntimeOptions::from_settings) and the CLI ask Settings: code below the facade is handed the
// values, so that a Runtime built from explicit options is configured by them alone.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fp8jit/types.hpp"

namespace fp8jit {

struct Settings {
  std::string cache_dir;        // FP8JIT_CACHE_DIR; default $XDG_CACHE_HOME/fp8jit or ~/.cache/fp8jit
  bool disk_cache = true;       // FP8JIT_DISK_CACHE=0 disables the on-disk binary cache
  std::string db_path;          // FP8JIT_DB; default <cache_dir>/tuning.sqlite
  TunePolicy tune = TunePolicy::cached;  // FP8JIT_TUNE=off|cached|on-miss
  int log_level = 1;            // FP8JIT_LOG=0 (quiet) .. 3 (debug)
  int jobs = 0;                 // FP8JIT_JOBS: compile threads; 0 = the cores, at most 8
  bool keep_source = false;     // FP8JIT_KEEP_SOURCE=1 writes generated .cu next to cubins
  SplitSum split_sum = SplitSum::cluster;  // FP8JIT_SPLIT_SUM=cluster|workspace
  bool jit = true;              // FP8JIT_JIT=on|off: off, a kernel missing from the caches is an error at launch
  int max_sms = 0;              // FP8JIT_MAX_SMS: most SMs a GEMM may occupy; 0 = all
  bool pdl = false;             // FP8JIT_PDL=0|1: programmatic dependent launch (RuntimeOptions::pdl)
  bool ffma_reuse = true;       // FP8JIT_FFMA_REUSE=0|1: FFMA runs keep their factor cached (runtime/sass/ffma_reuse.hpp)
  // FP8JIT_SHIPPED_TUNING: the shipped tuning rows' directory, or "off" (empty) for none;
  // unset: the library's own (RuntimeOptions::shipped_tuning_dir).
  std::optional<std::string> shipped_tuning;
  std::string elementwise_arch;  // FP8JIT_ELEMENTWISE_ARCH: "" or compute_<number>
                                 // (RuntimeOptions::elementwise_arch)

  // Reads the environment. Throws fp8jit::Error naming the variable for a malformed value.
  static Settings from_env();
  // Process-wide settings, read once on first use.
  static const Settings& get();

  // The rank of this process and the process count when a launcher started it (Slurm's
  // SLURM_PROCID / SLURM_NTASKS, Open MPI's OMPI_COMM_WORLD_RANK / _SIZE), for work split across
  // processes (`fp8jit tune`); nullopt otherwise. `from` names the launcher. Throws Error naming
  // the variable for values that are not a rank below a count.
  struct LauncherRank {
    int rank = 0, size = 1;
    std::string from;
  };
  static std::optional<LauncherRank> launcher_rank();

  // Every variable this module reads, with its doc line (for `fp8jit info`).
  static std::vector<std::pair<std::string, std::string>> documented();
};

}  // namespace fp8jit
