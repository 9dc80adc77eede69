#include "runtime/jit/driver.hpp"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <map>
#include <mutex>

namespace fp8jit::driver {
namespace {

// The ABI version we ask cuGetProcAddress for. Fixed rather than CUDA_VERSION so that building
// against a newer cuda.h never silently switches us to entry points with new signatures.
constexpr int kProcAddressVersion = 12000;

constexpr const char* kFix = "install the NVIDIA driver or run on a machine with a GPU";

// The names before cuda.h's macros see them: `#name` stringifies the unexpanded argument, so
// this holds "cuMemAlloc", not "cuMemAlloc_v2", which is what cuGetProcAddress expects.
constexpr std::array kSymbolNames = {
#define FP8JIT_DRIVER_NAME(name, type) #name,
    FP8JIT_DRIVER_FUNCTIONS(FP8JIT_DRIVER_NAME)
#undef FP8JIT_DRIVER_NAME
};

using GetProcV2 = PFN_cuGetProcAddress_v12000;  // with the symbol-status out parameter
using GetProcV1 = PFN_cuGetProcAddress_v11030;  // drivers before 12.0

struct Loaded {
  Api api;
  std::string error;  // empty when every entry point resolved
};

std::string load_failure(const std::string& why) {
  return fmt::format("CUDA driver unavailable: libcuda.so.1 could not be loaded ({}): {}", why,
                     kFix);
}

// Resolves one entry point by base name; nullptr when the driver does not have it.
void* resolve(const char* name, GetProcV2 v2, GetProcV1 v1) {
  void* fn = nullptr;
  CUresult r;
  if (v2 != nullptr) {
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    r = v2(name, &fn, kProcAddressVersion, CU_GET_PROC_ADDRESS_DEFAULT, &status);
    if (status != CU_GET_PROC_ADDRESS_SUCCESS) return nullptr;
  } else {
    r = v1(name, &fn, kProcAddressVersion, CU_GET_PROC_ADDRESS_DEFAULT);
  }
  return r == CUDA_SUCCESS ? fn : nullptr;
}

Loaded load() {
  Loaded out;
  // The handle is never closed: entry points stay valid until exit, including for destructors
  // of static objects that free device memory.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::string first = dlerror();
    // Some containers ship only the unversioned development symlink.
    lib = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      out.error = load_failure(first);
      return out;
    }
  }
  auto v2 = reinterpret_cast<GetProcV2>(dlsym(lib, "cuGetProcAddress_v2"));
  auto v1 = reinterpret_cast<GetProcV1>(dlsym(lib, "cuGetProcAddress"));
  if (v2 == nullptr && v1 == nullptr) {
    out.error = load_failure(
        "it has no cuGetProcAddress: the driver predates CUDA 11.3; fp8jit needs a CUDA 12.0+ "
        "driver");
    return out;
  }

  // Filled by name through the X-macro, so Api's layout never matters.
  const char* missing = nullptr;
#define FP8JIT_DRIVER_LOAD(name, type)                   \
  if (missing == nullptr) {                              \
    if (void* fn = resolve(#name, v2, v1))               \
      out.api.name = reinterpret_cast<type>(fn);         \
    else                                                 \
      missing = #name;                                   \
  }
  FP8JIT_DRIVER_FUNCTIONS(FP8JIT_DRIVER_LOAD)
#undef FP8JIT_DRIVER_LOAD

  if (missing != nullptr) {
    // The usual cause is an old driver: say which CUDA version it supports.
    std::string version = "unknown";
    if (auto get_version = reinterpret_cast<PFN_cuDriverGetVersion_v2020>(
            dlsym(lib, "cuDriverGetVersion"))) {
      int v = 0;
      if (get_version(&v) == CUDA_SUCCESS) version = fmt::format("{}.{}", v / 1000, v % 1000 / 10);
    }
    out.api = Api{};
    out.error = load_failure(fmt::format(
        "it lacks {}; the driver supports CUDA {}, fp8jit needs 12.0 or newer", missing, version));
  }
  return out;
}

const Loaded& loaded() {
  static const Loaded instance = load();  // thread-safe one-time initialisation
  return instance;
}

struct InitState {
  std::string error;  // empty when cuInit succeeded and a device is visible
  int device_count = 0;
};

const InitState& init_state() {
  static const InitState state = [] {
    InitState s;
    const Loaded& l = loaded();
    if (!l.error.empty()) {
      s.error = l.error;
      return s;
    }
    CUresult r = l.api.cuInit(0);
    if (r != CUDA_SUCCESS) {
      s.error = fmt::format(
          "CUDA driver unavailable: cuInit failed: {}: run on a machine with an NVIDIA GPU and "
          "a working driver (check nvidia-smi and CUDA_VISIBLE_DEVICES)",
          describe(r));
      return s;
    }
    r = l.api.cuDeviceGetCount(&s.device_count);
    if (r != CUDA_SUCCESS || s.device_count <= 0) {
      s.error = fmt::format(
          "CUDA driver unavailable: no CUDA device is visible{}: run on a machine with an NVIDIA "
          "GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES)",
          r != CUDA_SUCCESS ? " (cuDeviceGetCount: " + describe(r) + ")" : std::string());
      s.device_count = 0;
    }
    return s;
  }();
  return state;
}

// Function-local statics rather than globals: another translation unit's static initialiser
// may reach ensure_context() before this file's globals would have been constructed.
struct ContextCache {
  std::mutex mutex;
  std::map<int, CUcontext> primary;  // retained, never released (see ensure_context)
};
ContextCache& context_cache() {
  static ContextCache cache;
  return cache;
}

struct InfoCache {
  std::mutex mutex;
  std::map<int, DeviceInfo> by_device;
};
InfoCache& info_cache() {
  static InfoCache cache;
  return cache;
}

// nvidia-smi's spelling of a GPU's UUID: "GPU-" then 8-4-4-4-12 hex digits.
std::string uuid_text(const CUuuid& id) {
  std::string out = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += fmt::format("{:02x}", static_cast<unsigned char>(id.bytes[i]));
  }
  return out;
}

}  // namespace

const Api& api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) [[unlikely]] throw Error(ErrorKind::driver, l.error);
  return l.api;
}

const Api* try_api() noexcept {
  try {
    const Loaded& l = loaded();
    return l.error.empty() ? &l.api : nullptr;
  } catch (...) {  // only bad_alloc while building the message
    return nullptr;
  }
}

std::vector<std::string_view> symbol_names() {
  return {kSymbolNames.begin(), kSymbolNames.end()};
}

void init() {
  const InitState& s = init_state();
  if (!s.error.empty()) [[unlikely]] throw Error(ErrorKind::driver, s.error);
}

bool available() noexcept {
  try {
    return init_state().error.empty();
  } catch (...) {
    return false;
  }
}

std::string unavailable_reason() { return init_state().error; }

std::string describe(CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (const Api* a = try_api()) {
    if (a->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
    if (a->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
  }
  std::string out = name != nullptr ? std::string(name) : fmt::format("CUresult {}", int(r));
  if (text != nullptr) out += fmt::format(" ({})", text);
  return out;
}

void throw_error(CUresult r, std::string_view what) {
  throw Error(ErrorKind::driver, fmt::format("{} failed: {}", what, describe(r)));
}

bool stream_capturing(CUstream stream) noexcept {
  const Api* a = try_api();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  return a != nullptr && a->cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
         status != CU_STREAM_CAPTURE_STATUS_NONE;
}

RelaxedCapture::RelaxedCapture() noexcept {
  if (const Api* a = try_api()) {
    previous_ = CU_STREAM_CAPTURE_MODE_RELAXED;
    exchanged_ = a->cuThreadExchangeStreamCaptureMode(&previous_) == CUDA_SUCCESS;
  }
}

RelaxedCapture::~RelaxedCapture() {
  if (!exchanged_) return;
  if (const Api* a = try_api()) a->cuThreadExchangeStreamCaptureMode(&previous_);
}

namespace {

// `device`'s primary context, retained once for the life of the process.
CUcontext primary_context(int device) {
  const Api& a = api();
  ContextCache& cache = context_cache();
  std::lock_guard lock(cache.mutex);
  auto it = cache.primary.find(device);
  if (it == cache.primary.end()) {
    CUdevice dev = 0;
    check(a.cuDeviceGet(&dev, device), "cuDeviceGet");
    CUcontext primary = nullptr;
    check(a.cuDevicePrimaryCtxRetain(&primary, dev), "cuDevicePrimaryCtxRetain");
    it = cache.primary.emplace(device, primary).first;
  }
  return it->second;
}

}  // namespace

CUcontext ensure_context() {
  init();
  const Api& a = api();
  CUcontext ctx = nullptr;
  check(a.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (ctx != nullptr) return ctx;  // the caller's (or cudart's) choice wins
  ctx = primary_context(0);
  // Current-ness is per thread, so this runs once on every thread that starts without one.
  check(a.cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  return ctx;
}

int device_count() { return available() ? init_state().device_count : 0; }

void use_device(int device) {
  init();
  const int count = init_state().device_count;
  if (device < 0 || device >= count)
    throw Error(ErrorKind::invalid_argument,
                fmt::format("invalid device = {}: {} visible (CUDA_VISIBLE_DEVICES picks them)", device, count));
  check(api().cuCtxSetCurrent(primary_context(device)), "cuCtxSetCurrent");
}

CUdevice current_device() {
  ensure_context();
  CUdevice dev = 0;
  check(api().cuCtxGetDevice(&dev), "cuCtxGetDevice");
  return dev;
}

DeviceInfo device_info(CUdevice d) {
  init();
  const int count = init_state().device_count;
  if (d < 0 || d >= count) {
    throw Error(ErrorKind::invalid_argument,
                fmt::format("device_info: device {} does not exist ({} visible)", int(d), count));
  }
  InfoCache& cache = info_cache();
  std::lock_guard lock(cache.mutex);
  if (auto it = cache.by_device.find(d); it != cache.by_device.end()) return it->second;

  const Api& a = api();
  DeviceInfo info;
  info.ordinal = d;
  char name[256] = {};
  check(a.cuDeviceGetName(name, sizeof name - 1, d), "cuDeviceGetName");
  info.name = name;
  auto attr = [&](CUdevice_attribute which, const char* label) {
    int v = 0;
    check(a.cuDeviceGetAttribute(&v, which, d), label);
    return v;
  };
  info.cc_major =
      attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cuDeviceGetAttribute(cc major)");
  info.cc_minor =
      attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cuDeviceGetAttribute(cc minor)");
  info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "cuDeviceGetAttribute(SM count)");
  info.max_smem_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                             "cuDeviceGetAttribute(max shared memory opt-in)");
  info.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, "cuDeviceGetAttribute(L2 size)");
  check(a.cuDeviceTotalMem(&info.total_mem, d), "cuDeviceTotalMem");
  check(a.cuDriverGetVersion(&info.driver_version), "cuDriverGetVersion");
  char bus[32] = {};
  check(a.cuDeviceGetPCIBusId(bus, sizeof bus - 1, d), "cuDeviceGetPCIBusId");
  info.pci_bus_id = bus;
  CUuuid id{};
  check(a.cuDeviceGetUuid(&id, d), "cuDeviceGetUuid");
  info.uuid = uuid_text(id);
  cache.by_device.emplace(d, info);
  return info;
}

DeviceInfo device_info() { return device_info(current_device()); }

void require_sm90(const DeviceInfo& info) {
  if (info.cc_major == 9 && info.cc_minor == 0) return;
  std::string msg = fmt::format(
      "GPU {} ({}) has compute capability {}.{}; fp8jit kernels need 9.0 (Hopper: H100/H200)",
      info.ordinal, info.name, info.cc_major, info.cc_minor);
  if (info.cc_major > 9 || (info.cc_major == 9 && info.cc_minor > 0)) {
    // Arch-specific sm_90a code (wgmma, setmaxnreg) is not forward compatible, unlike sm_90.
    msg += ": they are compiled for sm_90a only, which newer architectures cannot run";
  }
  throw Error(ErrorKind::unsupported, msg);
}

}  // namespace fp8jit::driver
