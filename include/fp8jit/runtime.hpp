// The host API: quantize and dequantize through JIT-compiled, cached kernels.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "fp8jit/args.hpp"
#include "fp8jit/export.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/tuning.hpp"
#include "fp8jit/types.hpp"

namespace fp8jit {

struct CacheStats {
  std::uint64_t memory_hits = 0, memory_misses = 0;  // loaded-kernel lookups
  std::uint64_t disk_hits = 0, disk_misses = 0, disk_corrupt = 0, disk_writes = 0;
  std::uint64_t compiles = 0;  // NVRTC runs
  double compile_seconds = 0;
};

// The GPU a machine without one selects kernels for (precompiling on a build machine): the
// heuristics' inputs, its multiprocessors and opt-in shared memory per block.
struct GpuTarget {
  std::string name = "h100-sxm";
  int sm_count = 132;
  int smem_bytes = 232448;
};
// "h100-sxm", "h100-pcie", "h100-nvl", "h200", "h20", "h800", "h800-pcie", or a multiprocessor
// count ("78"); throws Error(invalid_argument) naming the known targets.
FP8JIT_API GpuTarget gpu_target(std::string_view name);

// Everything a Runtime is configured by. A Runtime reads no environment variable: these values,
// and only these, decide; from_settings() fills them from the FP8JIT_* variables.
struct FP8JIT_API RuntimeOptions {
  std::string cache_dir;  // binary cache directory; empty disables the disk cache
  std::string db_path;    // tuning database; empty: no database (heuristics only)
  TunePolicy tune = TunePolicy::cached;
  int jobs = 0;  // compile threads of precompile and tune (when TuneOptions::jobs is 0); 0: the cores, at most 8
  SplitSum split_sum = SplitSum::cluster;
  bool keep_source = false;  // write each generated .cu beside its cubin (needs the disk cache)
  bool ffma_reuse = true;    // the FFMA reuse post-pass on compiled cubins
  // false: a launch whose kernel is in neither the memory nor the disk cache fails (Error
  // unsupported, naming the kernel and how to precompile it) instead of compiling on the request
  // path. compile(), precompile() and tune() still compile: they are how the caches get filled.
  bool jit = true;
  // The most SMs a GEMM's persistent grid may occupy, for every call that sets no budget of its
  // own (GemmArgs::max_sms); 0: all of them. Tuning rows are stored and looked up per budget.
  int max_sms = 0;
  // Programmatic dependent launch: each kernel may start while the previous kernel in its stream
  // is still running and waits for that kernel's completion on the GPU before touching memory,
  // hiding launch latency and set-up between back-to-back kernels (a quantize feeding a GEMM, a
  // layer's GEMMs). Results are the same either way; Runtime::set_pdl changes it later.
  bool pdl = false;
  // Where no GPU is present, the heuristics choose for this GPU (a present GPU is always used).
  GpuTarget target;
  // What quantize and dequantize kernels are built as (GEMMs are always sm_90a cubins): empty,
  // for the GPU present (sm_90a on Hopper, sm_<cc> on Ada, Blackwell and others this NVRTC knows,
  // compute_89 PTX on newer ones); or "compute_<number>" (89 or later), PTX that the driver
  // compiles for whichever GPU loads it, so one cache serves a mixed fleet.
  std::string elementwise_arch;
  // Diagnostics on stderr: 0 quiet, 1 warnings, 2 info, 3 debug. The level is process-wide: a
  // Runtime sets it when built (the last one built decides).
  int log_level = 1;
  // Tuned rows shipped with fp8jit (`fp8jit db export` documents), consulted after db_path and
  // before the heuristic (not with tune = off); empty: none.
  std::string shipped_tuning_dir = default_shipped_tuning_dir();
  // FP8JIT_CACHE_DIR, FP8JIT_DISK_CACHE, FP8JIT_DB, FP8JIT_TUNE, FP8JIT_JOBS, FP8JIT_SPLIT_SUM,
  // FP8JIT_KEEP_SOURCE, FP8JIT_FFMA_REUSE, FP8JIT_LOG, FP8JIT_JIT, FP8JIT_MAX_SMS, FP8JIT_PDL,
  // FP8JIT_ELEMENTWISE_ARCH, FP8JIT_SHIPPED_TUNING
  static RuntimeOptions from_settings();
};

class KernelCache;

class FP8JIT_API Runtime {
 public:
  Runtime();  // RuntimeOptions::from_settings()
  explicit Runtime(const RuntimeOptions& options);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Pick the kernel (heuristic default), compile or load it once, launch on `stream`.
  // Bad arguments throw fp8jit::Error naming the argument; nothing is launched then.
  void quantize(const QuantizeArgs& args, CUstream stream);
  void dequantize(const DequantizeArgs& args, CUstream stream);
  // The same with an explicit kernel variant (tuning, benchmarks, `fp8jit` CLI).
  void quantize(const QuantizeArgs& args, const KernelSpec& spec, CUstream stream);
  void dequantize(const DequantizeArgs& args, const KernelSpec& spec, CUstream stream);

  void gemm(const GemmArgs& args, CUstream stream);
  void gemm(const GemmArgs& args, const KernelSpec& spec, CUstream stream);
  // The variant gemm(args) uses: the tuning database's row for this GPU and shape, else the
  // nearest tuned M for the same (N, K, problem), else the heuristic (RuntimeOptions::tune).
  KernelSpec select(const GemmArgs& args) const;

  // Grouped (mixture-of-experts) GEMMs: every group's rows of A times its own B, in one launch
  // that reads the group table on the device (GroupedGemmArgs). The kernel: the tuning
  // database's row for this GPU, layout, group count, expected rows per group, N and K, else the
  // nearest tuned expected M for the same (layout, groups, N, K, problem), else the heuristic
  // (default_grouped_gemm_spec); RuntimeOptions::tune as for gemm().
  void grouped_gemm(const GroupedGemmArgs& args, CUstream stream);
  void grouped_gemm(const GroupedGemmArgs& args, const KernelSpec& spec, CUstream stream);
  KernelSpec select(const GroupedGemmArgs& args) const;

  // Sweeps the candidates for this shape on the GPU (D is overwritten), stores the winner in the
  // tuning database, and uses it from now on. Needs a GPU.
  TuneResult tune(const GemmArgs& args, const TuneOptions& options = {});
  // The same for a grouped GEMM, keyed by its layout, group count and expected rows per group
  // (args.expected_m, or its default). Every candidate is checked group by group, so the group
  // table must be valid (not one the kernel would clamp).
  TuneResult tune(const GroupedGemmArgs& args, const TuneOptions& options = {});

  // Compiles (in parallel: `jobs` threads, 0 for RuntimeOptions::jobs) the variants select()
  // picks for these shapes, ahead of serving. Returns how many compiled; failures throw after
  // every shape was tried. `progress`, when set, is called (from the compiling threads, one call
  // at a time) after each kernel with the count done, the count in all and the kernel's spec.
  using CompileProgress = std::function<void(std::size_t done, std::size_t total, const KernelSpec& spec)>;
  std::size_t precompile(const GemmProblem& problem, const std::vector<GemmShape>& shapes, int jobs = 0,
                         const CompileProgress& progress = {});
  // The same for these kernels (each once), e.g. model_kernels()'s. Where a Hopper GPU is present,
  // both also load the kernels into the calling thread's context.
  std::size_t precompile(const std::vector<KernelSpec>& specs, int jobs = 0, const CompileProgress& progress = {});

  // What a model will run on one of `tp` tensor-parallel ranks for batches of each m in `ms`
  // (model_gemms of its config.json text): the kernel each dense GEMM takes, each expert GEMM in
  // the contiguous (prefill) and masked (decode) layouts at the rows per expert an even routing
  // gives, and the 1x128 activation quantize; `problem` gives formats, scaling and output (its
  // layout is ignored). Each entry: what it is for ("mlp.down_proj", "mlp.experts.gate_up_proj
  // (masked)", "quantize") and the kernel, one entry per distinct pair, in first-use order.
  struct ModelKernel {
    std::string what;
    KernelSpec spec;
    std::int64_t m_min = 0, m_max = 0;  // the batch sizes that take it for `what`
  };
  std::vector<ModelKernel> model_kernels(std::string_view config_json, const std::vector<std::int64_t>& ms,
                                         int tp = 1, const GemmProblem& problem = {}) const;

  // The variants gemm() and grouped_gemm() would take for a problem and shape, without operands
  // (the same lookup: database row, nearest tuned M, heuristic; the heuristic without a GPU).
  // `problem.layout` is dense for the first, a grouped layout for the second; `expected_m` as
  // GroupedGemmArgs::expected_m (0: not allowed here, there are no operands to derive it from).
  KernelSpec select(const GemmProblem& problem, const GemmShape& shape) const;
  KernelSpec select_grouped(const GemmProblem& problem, std::int64_t groups, std::int64_t expected_m,
                            std::int64_t n, std::int64_t k) const;

  // The variant the runtime would use for these arguments.
  KernelSpec select(const QuantizeArgs& args) const;
  KernelSpec select(const DequantizeArgs& args) const;

  // Cubin of a spec (disk cache or NVRTC); needs no GPU.
  std::string compile(const KernelSpec& spec);
  CacheStats cache_stats() const;
  void reset_cache_stats();
  const std::string& cache_dir() const;
  const RuntimeOptions& options() const;  // as given to the constructor
  // Programmatic dependent launch for the launches that follow (RuntimeOptions::pdl); safe to
  // call while other threads launch through this runtime.
  void set_pdl(bool enabled);
  bool pdl() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A process-wide runtime built from the settings, for the free functions below.
FP8JIT_API Runtime& default_runtime();
inline void quantize(const QuantizeArgs& a, CUstream s) {
  default_runtime().quantize(a, s);
}
inline void dequantize(const DequantizeArgs& a, CUstream s) {
  default_runtime().dequantize(a, s);
}
inline void gemm(const GemmArgs& a, CUstream s) { default_runtime().gemm(a, s); }
inline void grouped_gemm(const GroupedGemmArgs& a, CUstream s) { default_runtime().grouped_gemm(a, s); }

}  // namespace fp8jit
