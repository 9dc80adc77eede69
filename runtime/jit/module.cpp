#include "runtime/jit/module.hpp"

#include <fmt/format.h>

#include <utility>

#include "fp8jit/error.hpp"
#include "runtime/jit/driver.hpp"

namespace fp8jit {
namespace {

// Below this much dynamic shared memory a kernel needs no opt-in attribute.
constexpr int kDefaultDynamicSmem = 48 * 1024;

const char* const kAxis[3] = {"x", "y", "z"};

[[noreturn]] void throw_bad_launch(const std::string& msg) {
  throw Error(ErrorKind::invalid_argument, "launch: " + msg);
}

}  // namespace

Module::~Module() { reset(); }

Module::Module(Module&& other) noexcept : mod_(std::exchange(other.mod_, nullptr)) {}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    reset();
    mod_ = std::exchange(other.mod_, nullptr);
  }
  return *this;
}

void Module::reset() noexcept {
  if (mod_ == nullptr) return;
  // The result is ignored on purpose: at process exit the driver may already be torn down
  // (CUDA_ERROR_DEINITIALIZED), and a destructor has nobody to report to anyway.
  if (const driver::Api* a = driver::try_api()) (void)a->cuModuleUnload(mod_);
  mod_ = nullptr;
}

Module Module::load(const std::string& cubin) {
  if (cubin.empty()) {
    throw Error(ErrorKind::invalid_argument, "Module::load: the cubin is empty");
  }
  driver::ensure_context();
  CUmodule m = nullptr;
  // c_str(): PTX images must be NUL-terminated; for a cubin the extra byte is harmless.
  CUresult r = driver::api().cuModuleLoadData(&m, cubin.c_str());
  if (r != CUDA_SUCCESS) {
    throw Error(ErrorKind::driver,
                fmt::format("cuModuleLoadData failed: {} for a {}-byte image. If it came from the "
                            "kernel cache it may be stale or corrupt: clear the cache directory "
                            "(FP8JIT_CACHE_DIR, default ~/.cache/fp8jit) and retry",
                            driver::describe(r), cubin.size()));
  }
  return Module(m);
}

CUfunction Module::function(const char* name) const {
  if (name == nullptr || *name == '\0') {
    throw Error(ErrorKind::invalid_argument, "Module::function: empty kernel name");
  }
  if (mod_ == nullptr) {
    throw Error(ErrorKind::internal,
                fmt::format("Module::function(\"{}\") on an empty (moved-from) Module", name));
  }
  CUfunction f = nullptr;
  CUresult r = driver::api().cuModuleGetFunction(&f, mod_, name);
  if (r == CUDA_ERROR_NOT_FOUND) {
    throw Error(ErrorKind::driver,
                fmt::format("kernel '{}' not found in the loaded module: the generated source and "
                            "the entry point name disagree, or the cached cubin is stale (clear "
                            "FP8JIT_CACHE_DIR and retry)",
                            name));
  }
  if (r != CUDA_SUCCESS) driver::throw_error(r, fmt::format("cuModuleGetFunction(\"{}\")", name));
  return f;
}

void set_max_dynamic_smem(CUfunction f, int bytes) {
  if (bytes < 0) {
    throw Error(ErrorKind::invalid_argument,
                fmt::format("set_max_dynamic_smem: bytes = {} must be >= 0", bytes));
  }
  if (bytes <= kDefaultDynamicSmem) return;
  CUresult r = driver::api().cuFuncSetAttribute(
      f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
  if (r != CUDA_SUCCESS) {
    // The common cause is asking for more than the GPU has: name the limit if we can get it.
    std::string limit;
    try {
      limit = fmt::format("; this GPU allows at most {} bytes per block",
                          driver::device_info().max_smem_optin);
    } catch (const Error&) {
    }
    throw Error(ErrorKind::driver,
                fmt::format("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES = {}) failed: {}{}",
                            bytes, driver::describe(r), limit));
  }
}

namespace {

// The driver's form of cfg; its attributes (a cluster dimension, PDL) go into `attrs` (which
// must outlive the returned config). Fixed-size, no allocation: launch() is the hot path.
CUlaunchConfig driver_config(const LaunchConfig& cfg, bool clustered, CUlaunchAttribute (&attrs)[2]) {
  CUlaunchConfig config = {};
  config.gridDimX = cfg.grid[0];
  config.gridDimY = cfg.grid[1];
  config.gridDimZ = cfg.grid[2];
  config.blockDimX = cfg.block[0];
  config.blockDimY = cfg.block[1];
  config.blockDimZ = cfg.block[2];
  config.sharedMemBytes = cfg.smem_bytes;
  config.hStream = cfg.stream;
  config.attrs = attrs;
  if (clustered) {
    CUlaunchAttribute& a = attrs[config.numAttrs++] = {};
    a.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = cfg.cluster[0];
    a.value.clusterDim.y = cfg.cluster[1];
    a.value.clusterDim.z = cfg.cluster[2];
  }
  if (cfg.pdl) {
    CUlaunchAttribute& a = attrs[config.numAttrs++] = {};
    a.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    a.value.programmaticStreamSerializationAllowed = 1;
  }
  return config;
}

}  // namespace

int max_active_clusters(CUfunction f, const LaunchConfig& cfg) {
  CUlaunchAttribute attrs[2];
  LaunchConfig clustered = cfg;
  clustered.pdl = false;  // occupancy does not depend on it
  const CUlaunchConfig config = driver_config(clustered, true, attrs);
  int clusters = 0;
  const CUresult r = driver::api().cuOccupancyMaxActiveClusters(&clusters, f, &config);
  if (r != CUDA_SUCCESS)
    driver::throw_error(r, fmt::format("cuOccupancyMaxActiveClusters(cluster {}x{}x{}, block {}, {} bytes dynamic smem)",
                                       cfg.cluster[0], cfg.cluster[1], cfg.cluster[2], cfg.block[0], cfg.smem_bytes));
  return clusters;
}

void launch(CUfunction f, const LaunchConfig& cfg, void** args) {
  // Checked here because the driver reports all of these as a bare CUDA_ERROR_INVALID_VALUE.
  bool clustered = false;
  for (int i = 0; i < 3; ++i) {
    if (cfg.grid[i] == 0) throw_bad_launch(fmt::format("grid.{} must be > 0 (got 0)", kAxis[i]));
    if (cfg.block[i] == 0) throw_bad_launch(fmt::format("block.{} must be > 0 (got 0)", kAxis[i]));
    if (cfg.cluster[i] == 0) {
      throw_bad_launch(fmt::format("cluster.{} must be > 0 (got 0)", kAxis[i]));
    }
    if (cfg.grid[i] % cfg.cluster[i] != 0) {
      throw_bad_launch(fmt::format("grid.{} = {} is not a multiple of cluster.{} = {}", kAxis[i],
                                   cfg.grid[i], kAxis[i], cfg.cluster[i]));
    }
    clustered = clustered || cfg.cluster[i] != 1;
  }
  if (f == nullptr) throw_bad_launch("null CUfunction");

  CUlaunchAttribute attrs[2];
  const CUlaunchConfig config = driver_config(cfg, clustered, attrs);

  CUresult r = driver::api().cuLaunchKernelEx(&config, f, args, nullptr);
  if (r != CUDA_SUCCESS) [[unlikely]] {
    driver::throw_error(
        r, fmt::format("cuLaunchKernelEx(grid {}x{}x{}, block {}x{}x{}, cluster {}x{}x{}, "
                       "{} bytes dynamic smem{}{})",
                       cfg.grid[0], cfg.grid[1], cfg.grid[2], cfg.block[0], cfg.block[1],
                       cfg.block[2], cfg.cluster[0], cfg.cluster[1], cfg.cluster[2],
                       cfg.smem_bytes, cfg.pdl ? ", programmatic dependent launch" : "",
                       cfg.smem_bytes > unsigned(kDefaultDynamicSmem)
                           ? "; above 48 KiB it must not exceed what set_max_dynamic_smem allowed"
                           : ""));
  }
}

}  // namespace fp8jit
