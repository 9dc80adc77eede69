#include "common/settings.hpp"

#include <climits>
#include <cstdlib>
#include <string_view>

#include "common/parallel.hpp"
#include "fp8jit/error.hpp"

namespace fp8jit {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

bool parse_bool(const char* name, const char* v) {
  std::string_view s(v);
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  throw_invalid(name, v, "expected 0/1, true/false, on/off or yes/no");
}

int parse_int(const char* name, const char* v, int lo, int hi) {
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < lo || x > hi)
    throw_invalid(name, v, "expected an integer in [" + std::to_string(lo) + ", " +
                               std::to_string(hi) + "]");
  return static_cast<int>(x);
}

std::string default_cache_dir() {
  if (const char* x = env("XDG_CACHE_HOME")) return std::string(x) + "/fp8jit";
  if (const char* h = env("HOME")) return std::string(h) + "/.cache/fp8jit";
  return "/tmp/fp8jit-cache";
}

}  // namespace

Settings Settings::from_env() {
  Settings s;
  s.cache_dir = env("FP8JIT_CACHE_DIR") ? env("FP8JIT_CACHE_DIR") : default_cache_dir();
  if (const char* v = env("FP8JIT_DISK_CACHE")) s.disk_cache = parse_bool("FP8JIT_DISK_CACHE", v);
  s.db_path = env("FP8JIT_DB") ? env("FP8JIT_DB") : s.cache_dir + "/tuning.sqlite";
  if (const char* v = env("FP8JIT_TUNE")) {
    std::string_view t(v);
    if (t == "off") s.tune = TunePolicy::off;
    else if (t == "cached") s.tune = TunePolicy::cached;
    else if (t == "on-miss") s.tune = TunePolicy::on_miss;
    else throw_invalid("FP8JIT_TUNE", v, "expected off, cached or on-miss");
  }
  if (const char* v = env("FP8JIT_LOG")) s.log_level = parse_int("FP8JIT_LOG", v, 0, 3);
  if (const char* v = env("FP8JIT_JOBS")) s.jobs = parse_int("FP8JIT_JOBS", v, 0, 1024);
  s.jobs = jobs_or_default(s.jobs);
  if (const char* v = env("FP8JIT_KEEP_SOURCE"))
    s.keep_source = parse_bool("FP8JIT_KEEP_SOURCE", v);
  if (const char* v = env("FP8JIT_SPLIT_SUM")) {
    std::string_view t(v);
    if (t == "cluster") s.split_sum = SplitSum::cluster;
    else if (t == "workspace") s.split_sum = SplitSum::workspace;
    else throw_invalid("FP8JIT_SPLIT_SUM", v, "expected cluster or workspace");
  }
  if (const char* v = env("FP8JIT_FFMA_REUSE")) s.ffma_reuse = parse_bool("FP8JIT_FFMA_REUSE", v);
  if (const char* v = env("FP8JIT_JIT")) s.jit = parse_bool("FP8JIT_JIT", v);
  if (const char* v = env("FP8JIT_MAX_SMS")) s.max_sms = parse_int("FP8JIT_MAX_SMS", v, 0, INT_MAX);
  if (const char* v = env("FP8JIT_PDL")) s.pdl = parse_bool("FP8JIT_PDL", v);
  // Checked where it is used (parse_elementwise_arch, when a Runtime is built): the accepted
  // architectures are NVRTC's, which this module does not know.
  if (const char* v = env("FP8JIT_ELEMENTWISE_ARCH")) s.elementwise_arch = v;
  if (const char* v = env("FP8JIT_SHIPPED_TUNING"))
    s.shipped_tuning = std::string_view(v) == "off" ? "" : v;
  return s;
}

std::optional<Settings::LauncherRank> Settings::launcher_rank() {
  static const char* const kLaunchers[][3] = {{"SLURM_PROCID", "SLURM_NTASKS", "Slurm"},
                                              {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "Open MPI"}};
  for (const auto& l : kLaunchers) {
    const char *rank = env(l[0]), *size = env(l[1]);
    if (!rank || !size) continue;
    LauncherRank r;
    r.size = parse_int(l[1], size, 1, 1 << 20);
    r.rank = parse_int(l[0], rank, 0, r.size - 1);
    r.from = l[2];
    return r;
  }
  return std::nullopt;
}

const Settings& Settings::get() {
  static const Settings s = from_env();
  return s;
}

std::vector<std::pair<std::string, std::string>> Settings::documented() {
  return {
      {"FP8JIT_CACHE_DIR", "directory of the binary cache (default $XDG_CACHE_HOME/fp8jit)"},
      {"FP8JIT_DISK_CACHE", "0 disables the on-disk binary cache (default 1)"},
      {"FP8JIT_DB", "tuning database path (default <cache dir>/tuning.sqlite)"},
      {"FP8JIT_TUNE", "off | cached | on-miss (default cached)"},
      {"FP8JIT_LOG", "0 quiet .. 3 debug (default 1)"},
      {"FP8JIT_JOBS", "compile threads (default: the cores, at most 8)"},
      {"FP8JIT_MAX_SMS",
       "most SMs a GEMM's persistent grid may occupy, leaving the rest to other kernels (default "
       "0: all)"},
      {"FP8JIT_KEEP_SOURCE", "1 writes each generated .cu beside its cubin"},
      {"FP8JIT_SPLIT_SUM",
       "cluster | workspace: how split-K ranges are summed (default cluster, where it fits)"},
      {"FP8JIT_JIT",
       "on | off: off, launching a kernel missing from the memory and disk caches is an error "
       "instead of a compile on the request path (precompile first; default on)"},
      {"FP8JIT_FFMA_REUSE",
       "1: every FFMA of a run of 16+ that shares its scale operand with the next keeps it in the "
       "operand reuse cache (default 1; 0: as ptxas left it)"},
      {"FP8JIT_PDL",
       "1: programmatic dependent launch, each kernel overlapping the previous one's tail (default "
       "0)"},
      {"FP8JIT_ELEMENTWISE_ARCH",
       "quantize and dequantize kernels as PTX for compute_<number> (89 or later), which "
       "the driver compiles for the GPU present (default: each GPU's own build)"},
      {"FP8JIT_SHIPPED_TUNING",
       "directory of the tuned rows shipped with fp8jit (`fp8jit db export` documents), consulted "
       "after FP8JIT_DB and before the heuristic, or off (default <prefix>/share/fp8jit/tuning)"},
  };
}

}  // namespace fp8jit
