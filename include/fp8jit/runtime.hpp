// The host API: quantize and dequantize through JIT-compiled, cached kernels.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/tuning.hpp"
#include "fp8jit/types.hpp"

namespace fp8jit {

// x [m, k] (row stride ldx elements) -> q [m, k] FP8 (row stride ldq bytes) and fp32 scales.
// All pointers are device pointers. ld* = 0 means "dense" (k, or m for the transposed output).
struct QuantizeArgs {
  const void* x = nullptr;
  DType input = DType::bf16;
  std::int64_t m = 0, k = 0, ldx = 0;
  void* q = nullptr;
  Fp8Format format = Fp8Format::e4m3;
  std::int64_t ldq = 0;
  float* scales = nullptr;  // scale_count(granularity, scale_layout, m, k) floats
  Granularity granularity = Granularity::group128;
  ScaleLayout scale_layout = ScaleLayout::row_major;
  bool pow2_scale = false;              // round scales up to powers of two
  const float* static_scale = nullptr;  // per-tensor only: use this scale instead of the amax
  // Optional transposed output qt [k, m] (row stride ldqt). For 1x128 it is scaled by 1x128
  // groups of the transpose (128x1 of x) into scales_t; otherwise it shares `scales`.
  void* qt = nullptr;
  std::int64_t ldqt = 0;
  float* scales_t = nullptr;  // 1x128 only: scale_count(group128, scale_layout, k, m) floats
  float* amax = nullptr;      // optional: max |x| over the tensor (NaNs ignored)
};

// q [m, k] FP8 and scales -> y [m, k] (row stride ldy elements).
struct DequantizeArgs {
  const void* q = nullptr;
  Fp8Format format = Fp8Format::e4m3;
  std::int64_t m = 0, k = 0, ldq = 0;
  const float* scales = nullptr;
  Granularity granularity = Granularity::block128;
  ScaleLayout scale_layout = ScaleLayout::row_major;
  void* y = nullptr;
  DType output = DType::bf16;
  std::int64_t ldy = 0;
};

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

// D [m, n] = (A [m, k] scaled) . (B [n, k] scaled)^T (+ bias [n]). A and B are FP8 and K-major
// (rows of K bytes, leading dimensions in elements); D is row-major. Device pointers.
struct GemmArgs {
  const void* a = nullptr;
  Fp8Format a_format = Fp8Format::e4m3;
  std::int64_t lda = 0;  // 0 = k
  const void* b = nullptr;
  Fp8Format b_format = Fp8Format::e4m3;
  std::int64_t ldb = 0;
  void* d = nullptr;
  DType d_dtype = DType::bf16;
  std::int64_t ldd = 0;  // 0 = n
  std::int64_t m = 0, n = 0, k = 0;
  ScaleMode scale_mode = ScaleMode::block;
  // tensor: 1 float each; rowwise: m and n floats; block: A 1x128 (scale_count(group128,
  // scale_a_layout, m, k)) and B 128x128 (scale_count(block128, scale_b_layout, n, k)); group: A and
  // B 1x128. The sizes (in floats) are checked against the shape.
  const float* scale_a = nullptr;
  std::int64_t scale_a_size = 0;
  ScaleLayout scale_a_layout = ScaleLayout::col_major_tma;
  const float* scale_b = nullptr;
  std::int64_t scale_b_size = 0;
  ScaleLayout scale_b_layout = ScaleLayout::row_major;
  const void* bias = nullptr;  // [n] in d_dtype, or null
  bool fast_accum = false;     // tensor/rowwise only: see GemmProblem::fast_accum
};

// Floats a scale tensor holds for an [m, k] tensor (col_major_tma pads its row count to 4).
std::int64_t scale_count(Granularity g, ScaleLayout layout, std::int64_t m, std::int64_t k);

struct CacheStats {
  std::uint64_t memory_hits = 0, memory_misses = 0;  // loaded-kernel lookups
  std::uint64_t disk_hits = 0, disk_misses = 0, disk_corrupt = 0, disk_writes = 0;
  std::uint64_t compiles = 0;  // NVRTC runs
  double compile_seconds = 0;
};

struct RuntimeOptions {
  std::string cache_dir;  // binary cache directory; empty disables the disk cache
  std::string db_path;    // tuning database; empty: no database (heuristics only)
  TunePolicy tune = TunePolicy::cached;
  // FP8JIT_CACHE_DIR, FP8JIT_DISK_CACHE, FP8JIT_DB, FP8JIT_TUNE
  static RuntimeOptions from_settings();
};

class KernelCache;

class Runtime {
 public:
  Runtime();  // options from the FP8JIT_* settings
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
  // nearest tuned M for the same (N, K, problem), else the heuristic (policy: FP8JIT_TUNE).
  KernelSpec select(const GemmArgs& args) const;

  // Sweeps the candidates for this shape on the GPU (D is overwritten), stores the winner in the
  // tuning database, and uses it from now on. Needs a GPU.
  TuneResult tune(const GemmArgs& args, const TuneOptions& options = {});

  // Compiles (in parallel) the variants select() picks for these shapes, ahead of serving.
  // Returns how many compiled; failures throw after every shape was tried.
  // `progress`, when set, is called (from the compiling threads, one call at a time) after each
  // kernel with the count done, the count in all and the kernel's spec.
  using CompileProgress = std::function<void(std::size_t done, std::size_t total, const KernelSpec& spec)>;
  std::size_t precompile(const GemmProblem& problem, const std::vector<GemmShape>& shapes, int jobs = 0,
                         const CompileProgress& progress = {});

  // The variant the runtime would use for these arguments.
  KernelSpec select(const QuantizeArgs& args) const;
  KernelSpec select(const DequantizeArgs& args) const;

  // Cubin of a spec (disk cache or NVRTC); needs no GPU.
  std::string compile(const KernelSpec& spec);
  CacheStats cache_stats() const;
  void reset_cache_stats();
  const std::string& cache_dir() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A process-wide runtime built from the settings, for the free functions below.
Runtime& default_runtime();
inline void quantize(const QuantizeArgs& a, CUstream s) { default_runtime().quantize(a, s); }
inline void dequantize(const DequantizeArgs& a, CUstream s) { default_runtime().dequantize(a, s); }
inline void gemm(const GemmArgs& a, CUstream s) { default_runtime().gemm(a, s); }

}  // namespace fp8jit
