// Loaded cubins and kernel launches, on top of runtime/jit/driver.hpp.
#pragma once

#include <cuda.h>

#include <string>

namespace fp8jit {

// Owns one CUmodule; unloads it when destroyed. Move-only: a CUmodule has one owner.
class Module {
 public:
  Module() = default;
  ~Module();
  Module(Module&& other) noexcept;
  Module& operator=(Module&& other) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // Loads a cubin (or NUL-terminated PTX) into the calling thread's context, creating that
  // context if needed. Throws Error(driver) with the driver's error name on failure.
  static Module load(const std::string& cubin);

  // The kernel `name` (its mangled or extern "C" name). Throws Error(driver) naming the kernel
  // when the module has none by that name.
  CUfunction function(const char* name) const;

  CUmodule get() const noexcept { return mod_; }
  explicit operator bool() const noexcept { return mod_ != nullptr; }

 private:
  explicit Module(CUmodule m) noexcept : mod_(m) {}
  void reset() noexcept;

  CUmodule mod_ = nullptr;
};

struct LaunchConfig {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned smem_bytes = 0;  // dynamic shared memory per block
  CUstream stream = nullptr;
  unsigned cluster[3] = {1, 1, 1};  // thread-block cluster; 1x1x1 launches without one
  // Programmatic dependent launch: the kernel may start while the previous kernel in the stream
  // runs (it must wait for it in device code: templates/fp8jit/common/grid_dependency.cuh).
  bool pdl = false;
};

// Lets f use more than the default 48 KiB of dynamic shared memory. A no-op at or below 48 KiB,
// where no opt-in is needed. Call once per function before the first launch that needs it.
void set_max_dynamic_smem(CUfunction f, int bytes);

// How many clusters of cfg.cluster CTAs (with cfg's block size and dynamic shared memory) can
// be resident at once: a persistent grid larger than this would run its last clusters only
// after others finish. Needs set_max_dynamic_smem first.
int max_active_clusters(CUfunction f, const LaunchConfig& cfg);

// Launches f with cuLaunchKernelEx. args: one pointer per kernel parameter, as for
// cuLaunchKernel. Allocation-free; throws Error(invalid_argument) for a zero or
// cluster-incompatible dimension and Error(driver) for a failed launch.
void launch(CUfunction f, const LaunchConfig& cfg, void** args);

}  // namespace fp8jit
