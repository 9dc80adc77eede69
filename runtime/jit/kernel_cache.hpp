// Compiled kernels: cubins (disk cache or NVRTC) and modules loaded per CUDA context.
#pragma once

#include <array>
#include <cuda.h>

#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/binary_cache.hpp"
#include "runtime/sass/ffma_reuse.hpp"
#include "runtime/sass/ffma_yield.hpp"
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
  GemmConfig gemm_config;       // gemm family: the spec's config, parsed once (the launch path reads it)
  int cluster = 1;              // CTAs per cluster of functions[0]
  int max_active_clusters = 0;  // of `cluster` CTAs, resident at once (cluster > 1 only)
  // gemm without a config cluster: split_clusters[s] clusters of s CTAs (2 <= s <= 8) can be
  // resident at once, for split-K summed inside a cluster (ops::splits_in_cluster).
  std::array<int, 9> split_clusters{};
};

// Everything that decides the bytes of a binary: library version, NVRTC version, options,
// target, the embedded headers' hash and the rendered source. No paths.
std::string binary_cache_key(const std::string& source, CompileTarget target);

// The post-passes every cubin NVRTC compiles for the runtime goes through (FP8JIT_FFMA_REUSE,
// runtime/sass/ffma_reuse.hpp; FP8JIT_FFMA_YIELD, runtime/sass/ffma_yield.hpp; only long FFMA runs change,
// i.e. promotion), applied in place; `fp8jit compile --cubin` writes the same bytes.
struct PostPassStats {
  FfmaReuseStats reuse;
  FfmaYieldStats yield;
};
PostPassStats post_pass(const std::string& name, std::string& cubin);

class KernelCache {
 public:
  explicit KernelCache(std::string disk_dir);

  // The cubin of `spec`, from the disk cache or compiled (needs no GPU).
  std::string cubin(const KernelSpec& spec);
  // `spec` loaded into the calling thread's context; compiles and loads on the first request.
  // Concurrent first requests for one spec compile it once.
  const LoadedKernel& get(const KernelSpec& spec);

  CacheStats stats() const;
  void reset_stats();
  BinaryCache& disk() { return disk_; }

 private:
  using Key = std::pair<CUcontext, std::string>;
  BinaryCache disk_;
  mutable std::mutex mutex_;
  std::map<Key, std::shared_future<std::shared_ptr<LoadedKernel>>> loaded_;
  std::atomic<std::uint64_t> memory_hits_{0}, memory_misses_{0}, compiles_{0};
  std::atomic<std::uint64_t> compile_micros_{0};
};

}  // namespace fp8jit
