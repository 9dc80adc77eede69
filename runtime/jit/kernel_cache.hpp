// Compiled kernels: cubins (disk cache or NVRTC) and modules loaded per CUDA context.
#pragma once

#include <cuda.h>

#include <array>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/binary_cache.hpp"
#include "runtime/jit/build_target.hpp"
#include "runtime/jit/module.hpp"
#include "runtime/jit/nvrtc.hpp"

namespace fp8jit {

struct LoadedKernel {
  KernelSpec spec;
  std::string name;
  std::shared_ptr<Module> module;
  std::vector<CUfunction> functions;  // parallel to spec_entry_points(spec)
  int threads = 0;
  int smem_bytes = 0;
  int cluster = 1;              // CTAs per cluster of functions[0]
  int max_active_clusters = 0;  // of `cluster` CTAs, resident at once (cluster > 1 only)
  // Whether it may be launched with programmatic dependent launch: built for sm_90 or later,
  // where its kernels wait for the previous kernel (griddepcontrol.wait) before reading memory.
  bool pdl = true;
  // Filled by the gemm family's load hook (ops::gemm_load_hook), zero for other families: the
  // spec's config parsed once for the launch path, and for a gemm without a config cluster
  // split_clusters[s] clusters of s CTAs (2 <= s <= 8) that can be resident at once, for split-K
  // summed inside a cluster (ops::splits_in_cluster).
  GemmConfig gemm_config;
  std::array<int, 9> split_clusters{};
  // The gemm family's copy of row-major A scales into TMA's column-major layout
  // (fp8jit_gemm_scale_columns, ops::scale_columns_first); null where the module has none.
  CUfunction scale_columns = nullptr;
};

// Clusters of `size` CTAs of k.functions[0] that can be resident at once on `sms`
// multiprocessors, probed with a grid of one cluster per `size` SMs, as a persistent launch
// would be; 0 where none fits.
int resident_clusters(const LoadedKernel& k, int size, int sms);

// A step that runs when a family's kernel is loaded, after the generic fields are set: what the
// family's launch path needs to know about the loaded kernel, probed once (gemm:
// ops::gemm_load_hook). The cache itself knows no family.
struct KernelLoadHook {
  std::string family;
  std::function<void(LoadedKernel& k)> run;
};

// A rewrite of the cubins NVRTC compiles for one kernel family, applied before they are cached
// or loaded. The cache knows no family's passes: the operation that owns a family hands them in
// (gemm: gemm_post_passes, runtime/sass/gemm_post_passes.hpp) through KernelCacheOptions.
struct CubinPostPass {
  std::string family;  // the family whose cubins it rewrites ("gemm")
  std::string key;     // one line added to those cubins' cache key: the pass and its setting
  // Rewrites the cubin in place; returns one line on what it did (logged, printed by `fp8jit
  // compile`), empty where it found nothing to work on.
  std::function<std::string(std::string& cubin)> run;
};

struct KernelCacheOptions {
  std::string cache_dir;     // the disk cache's directory; empty: no disk cache
  bool keep_source = false;  // write each compiled kernel's source beside its cubin (`.cu`)
  std::vector<CubinPostPass> post_passes;  // in the order they run
  std::vector<KernelLoadHook> load_hooks;   // in the order they run
  // false: get() of a kernel whose cubin is in neither the disk cache nor this cache's memory
  // (what cubin() compiled) throws instead of compiling (RuntimeOptions::jit).
  bool live_compile = true;
  // The elementwise families' build on every GPU (RuntimeOptions::elementwise_arch); nullopt:
  // each GPU's own (build_target_for).
  std::optional<BuildTarget> elementwise;
};

// Everything that decides the bytes of a binary: library version, NVRTC version, options
// (target and architecture), the embedded headers' hash, the key lines of the post-passes the
// cubin goes through and the rendered source. No paths.
std::string binary_cache_key(const std::string& source, CompileTarget target,
                             const std::vector<std::string>& post_pass_keys = {},
                             const GpuArch& arch = kSm90a);

// The key lines of the passes of `passes` that apply to `family`, in order.
std::vector<std::string> post_pass_keys(const std::vector<CubinPostPass>& passes,
                                        const std::string& family);
// Runs the passes of `passes` that apply to `family` on `cubin`, in order; returns their reports
// (the non-empty ones). `fp8jit compile` calls it with the runtime's passes: the same bytes.
std::vector<std::string> run_post_passes(const std::vector<CubinPostPass>& passes,
                                         const std::string& family, std::string& cubin);

class KernelCache {
 public:
  explicit KernelCache(KernelCacheOptions options);

  // The disk-cache key of `spec`'s binary for `target` (binary_cache_key with its family's
  // post-passes, which rewrite sm_90a cubins only).
  std::string cubin_key(const KernelSpec& spec, const BuildTarget& target = kHopperCubin) const;
  // The sm_90a cubin of `spec` (or its binary for `target`), from the disk cache or compiled
  // (needs no GPU). Processes sharing the disk cache compile a missing key once: the first takes
  // a lock file beside the entry (flock, released by the system if its holder dies), the others
  // wait and read its binary.
  std::string cubin(const KernelSpec& spec, const BuildTarget& target = kHopperCubin);
  // What get() builds `spec` as for the calling thread's GPU (build_target_for); throws
  // Error(unsupported) where the family cannot run there.
  BuildTarget target_for_device(const KernelSpec& spec) const;
  // `spec` loaded into the calling thread's context; compiles and loads on the first request.
  // Concurrent first requests for one spec compile it once. `what` (e.g. the GEMM's shape) leads
  // the error when live compiles are off and the kernel is in no cache.
  const LoadedKernel& get(const KernelSpec& spec, std::string_view what = {});
  // The binary get() loads: cubin(), except that with live compiles off a kernel in no cache is
  // an error (Error unsupported, led by `what`) instead of a compile.
  std::string launch_cubin(const KernelSpec& spec, std::string_view what = {},
                           const BuildTarget& target = kHopperCubin) {
    return cubin_of(spec, what, target);
  }

  CacheStats stats() const;
  void reset_stats();
  BinaryCache& disk() { return disk_; }

 private:
  using Key = std::pair<CUcontext, std::string>;
  std::string key_of(const std::string& family, const std::string& source,
                     const BuildTarget& target) const;
  std::string cubin_of(const KernelSpec& spec, std::optional<std::string_view> live_for,
                       const BuildTarget& target);
  std::string compile_and_store(const std::string& name, const std::string& family,
                                const std::string& source, const std::string& key,
                                const BuildTarget& target);

  KernelCacheOptions options_;
  BinaryCache disk_;
  mutable std::mutex mutex_;
  std::map<Key, std::shared_future<std::shared_ptr<LoadedKernel>>> loaded_;
  // Without a disk cache and with live compiles off, what cubin() compiled: the launch path may
  // take it (with live compiles on, a cache without a disk compiles on every cubin()).
  std::map<std::string, std::string> compiled_;
  std::atomic<std::uint64_t> memory_hits_{0}, memory_misses_{0}, compiles_{0};
  std::atomic<std::uint64_t> compile_micros_{0};
};

}  // namespace fp8jit
