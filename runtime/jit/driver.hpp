// The CUDA driver API, loaded from libcuda at run time.
//
// fp8jit never links libcuda: a process without the NVIDIA driver (a CI box, a login node) must
// still load the library, generate sources and compile them with NVRTC. Only a GPU operation
// touches the driver, and it then fails with an fp8jit::Error that says what is missing.
//
// Usage: call ensure_context() (or anything that calls it) before the first driver call on a
// thread, then call through api(): `driver::check(driver::api().cuMemAlloc(&p, n), "cuMemAlloc")`.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "fp8jit/error.hpp"

// With per-thread default streams cuda.h renames several of the identifiers below (e.g.
// cuLaunchKernelEx -> cuLaunchKernelEx_ptsz), so Api's member names would differ between
// translation units. fp8jit always passes explicit streams and loads the legacy entry points.
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "fp8jit/runtime/driver.hpp must not be compiled with CUDA_API_PER_THREAD_DEFAULT_STREAM"
#endif

namespace fp8jit::driver {

// Every entry point fp8jit uses: X(base name, pointer type). The types are pinned to the ABI
// that cuGetProcAddress returns for cudaVersion 12000 (not the newest one in whatever cuda.h
// we are built against: CUDA 13 gave cuCtxSynchronize/cuCtxGetDevice new signatures).
#define FP8JIT_DRIVER_FUNCTIONS(X)                                                   \
  X(cuInit, PFN_cuInit_v2000)                                                        \
  X(cuDriverGetVersion, PFN_cuDriverGetVersion_v2020)                                \
  X(cuDeviceGet, PFN_cuDeviceGet_v2000)                                              \
  X(cuDeviceGetCount, PFN_cuDeviceGetCount_v2000)                                    \
  X(cuDeviceGetName, PFN_cuDeviceGetName_v2000)                                      \
  X(cuDeviceGetAttribute, PFN_cuDeviceGetAttribute_v2000)                            \
  X(cuDeviceGetPCIBusId, PFN_cuDeviceGetPCIBusId_v4010)                              \
  X(cuDeviceGetUuid, PFN_cuDeviceGetUuid_v11040)                                     \
  X(cuDeviceTotalMem, PFN_cuDeviceTotalMem_v3020)                                    \
  X(cuDevicePrimaryCtxRetain, PFN_cuDevicePrimaryCtxRetain_v7000)                    \
  X(cuCtxGetCurrent, PFN_cuCtxGetCurrent_v4000)                                      \
  X(cuCtxSetCurrent, PFN_cuCtxSetCurrent_v4000)                                      \
  X(cuCtxGetDevice, PFN_cuCtxGetDevice_v2000)                                        \
  X(cuCtxSynchronize, PFN_cuCtxSynchronize_v2000)                                    \
  X(cuModuleLoadData, PFN_cuModuleLoadData_v2000)                                    \
  X(cuModuleUnload, PFN_cuModuleUnload_v2000)                                        \
  X(cuModuleGetFunction, PFN_cuModuleGetFunction_v2000)                              \
  X(cuFuncSetAttribute, PFN_cuFuncSetAttribute_v9000)                                \
  X(cuFuncGetAttribute, PFN_cuFuncGetAttribute_v2020)                                \
  X(cuLaunchKernelEx, PFN_cuLaunchKernelEx_v11060)                                   \
  X(cuMemAlloc, PFN_cuMemAlloc_v3020)                                                \
  X(cuMemFree, PFN_cuMemFree_v3020)                                                  \
  X(cuMemcpyHtoD, PFN_cuMemcpyHtoD_v3020)                                            \
  X(cuMemcpyDtoH, PFN_cuMemcpyDtoH_v3020)                                            \
  X(cuMemcpyDtoDAsync, PFN_cuMemcpyDtoDAsync_v3020)                                  \
  X(cuMemsetD8Async, PFN_cuMemsetD8Async_v3020)                                      \
  X(cuMemsetD32Async, PFN_cuMemsetD32Async_v3020)                                    \
  X(cuStreamSynchronize, PFN_cuStreamSynchronize_v2000)                              \
  X(cuStreamCreate, PFN_cuStreamCreate_v2000)                                        \
  X(cuStreamDestroy, PFN_cuStreamDestroy_v4000)                                      \
  X(cuEventCreate, PFN_cuEventCreate_v2000)                                          \
  X(cuEventRecord, PFN_cuEventRecord_v2000)                                          \
  X(cuEventSynchronize, PFN_cuEventSynchronize_v2000)                                \
  X(cuEventElapsedTime, PFN_cuEventElapsedTime_v2000)                                \
  X(cuEventDestroy, PFN_cuEventDestroy_v4000)                                        \
  X(cuPointerGetAttribute, PFN_cuPointerGetAttribute_v4000)                          \
  X(cuTensorMapEncodeTiled, PFN_cuTensorMapEncodeTiled_v12000)                       \
  X(cuGetErrorString, PFN_cuGetErrorString_v6000)                                    \
  X(cuGetErrorName, PFN_cuGetErrorName_v6000)                                        \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor,                                     \
    PFN_cuOccupancyMaxActiveBlocksPerMultiprocessor_v6050)                           \
  X(cuOccupancyMaxActiveClusters, PFN_cuOccupancyMaxActiveClusters_v11070)         \
  X(cuStreamIsCapturing, PFN_cuStreamIsCapturing_v10000)                             \
  X(cuThreadExchangeStreamCaptureMode, PFN_cuThreadExchangeStreamCaptureMode_v10010)

// Members are named after the driver functions so call sites read like plain driver code.
// cuda.h #defines some of these names to versioned ones (cuMemAlloc -> cuMemAlloc_v2); the
// rename applies identically here and at every call site, so it is harmless.
struct Api {
#define FP8JIT_DRIVER_MEMBER(name, type) type name = nullptr;
  FP8JIT_DRIVER_FUNCTIONS(FP8JIT_DRIVER_MEMBER)
#undef FP8JIT_DRIVER_MEMBER
};

// The loaded entry points. Loads libcuda on first use (thread-safe); when it cannot be loaded
// throws Error(ErrorKind::driver) naming libcuda and the reason, on every call.
const Api& api();

// The loaded entry points, or nullptr where libcuda is missing. Never throws: for destructors
// and error paths.
const Api* try_api() noexcept;

// The base names resolved through cuGetProcAddress, in Api's order (diagnostics and tests).
std::vector<std::string_view> symbol_names();

// Runs cuInit once and checks that a device is visible; throws Error(driver) otherwise.
void init();

// True when libcuda loaded, cuInit succeeded and at least one device is visible.
bool available() noexcept;
// Why available() is false ("" when it is true).
std::string unavailable_reason();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; falls back to the number without libcuda.
std::string describe(CUresult r);

// Throws Error(ErrorKind::driver, "<what> failed: <NAME> (<string>)").
[[noreturn]] void throw_error(CUresult r, std::string_view what);

// Throws when r is not CUDA_SUCCESS. Inline so the success path costs one compare.
inline void check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) [[unlikely]] throw_error(r, what);
}

// Whether `stream` is being captured into a CUDA graph (false where the driver cannot say, e.g.
// for the legacy stream while another stream captures: the launch then reports the error).
bool stream_capturing(CUstream stream) noexcept;

// Lets the calling thread make the driver calls a capture would otherwise refuse — module loads
// and allocations on a first call — for its lifetime: the thread's capture mode is relaxed, then
// restored. Those calls are not stream work, so nothing of theirs enters a graph being captured,
// and a capture in global mode on another thread is not invalidated by them.
class RelaxedCapture {
 public:
  RelaxedCapture() noexcept;
  ~RelaxedCapture();
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  CUstreamCaptureMode previous_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool exchanged_ = false;
};

// The calling thread's current context. Where it has none, makes device 0's primary context
// current (retained once per device and kept for the life of the process, which is what the
// CUDA runtime does too, so fp8jit and cudart code share one context).
CUcontext ensure_context();

// Makes `device`'s primary context current on the calling thread (what cudaSetDevice does), so
// that what this thread runs afterwards runs there. Throws Error(invalid_argument) naming the
// visible device count for a device that does not exist.
void use_device(int device);
// Devices visible to this process (0 without a driver).
int device_count();

// The device of the calling thread's (ensured) context.
CUdevice current_device();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int max_smem_optin = 0;  // dynamic shared memory per block after opt-in, bytes
  int l2_bytes = 0;
  std::size_t total_mem = 0;
  int driver_version = 0;  // e.g. 12080 for a CUDA 12.8 driver
  // Which physical GPU this is, whatever CUDA_VISIBLE_DEVICES makes its ordinal: tuning rows name
  // it, so that a sweep over several GPUs or hosts says which card measured each row.
  std::string pci_bus_id;  // "0000:19:00.0"
  std::string uuid;        // "GPU-6f1e2a3b-...", as nvidia-smi -L prints it
};

// Properties of device d, queried once per device and cached.
DeviceInfo device_info(CUdevice d);
// Properties of current_device().
DeviceInfo device_info();

// Throws Error(ErrorKind::unsupported) unless the device is compute capability 9.0: the kernels
// are compiled for sm_90a, which neither older nor newer architectures can run.
void require_sm90(const DeviceInfo& info);

}  // namespace fp8jit::driver
