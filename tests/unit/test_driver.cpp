// runtime/driver + runtime/module without a GPU: libcuda is loaded at run time, so its absence
// must surface as a clear fp8jit::Error rather than a link or load failure. Where a GPU is
// present the "unavailable" checks skip and the device checks run instead.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "fp8jit/error.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/jit/module.hpp"
#include "tests/common/expect_error.hpp"

namespace fp8jit {
namespace {

using test::error_message;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// libcuda itself missing (this is the case on the build machine), as opposed to a driver
// without a usable device.
bool libcuda_missing() { return driver::try_api() == nullptr; }

TEST(DriverSymbols, ResolvedByBaseName) {
  // cuGetProcAddress wants "cuMemAlloc", not cuda.h's macro-expanded "cuMemAlloc_v2".
  std::vector<std::string_view> names = driver::symbol_names();
  EXPECT_EQ(names.size(), sizeof(driver::Api) / sizeof(void*));
  EXPECT_EQ(names.size(), 43u);
  for (std::string_view n : names) {
    EXPECT_TRUE(n.starts_with("cu")) << n;
    EXPECT_FALSE(contains(std::string(n), "_v2")) << n;
    EXPECT_FALSE(contains(std::string(n), "_pt")) << n;
  }
  auto has = [&](std::string_view want) {
    for (std::string_view n : names)
      if (n == want) return true;
    return false;
  };
  EXPECT_TRUE(has("cuMemAlloc"));
  EXPECT_TRUE(has("cuLaunchKernelEx"));
  EXPECT_TRUE(has("cuDeviceGetPCIBusId"));  // tuning rows name the card (tuned_on)
  EXPECT_TRUE(has("cuDeviceGetUuid"));
  EXPECT_TRUE(has("cuTensorMapEncodeTiled"));
  EXPECT_TRUE(has("cuOccupancyMaxActiveBlocksPerMultiprocessor"));
  EXPECT_TRUE(has("cuOccupancyMaxActiveClusters"));  // sizes the persistent grid of 2-CTA clusters
  // A first call inside a graph capture: module loads and allocations in relaxed mode.
  EXPECT_TRUE(has("cuStreamIsCapturing"));
  EXPECT_TRUE(has("cuThreadExchangeStreamCaptureMode"));
}

TEST(DriverUnavailable, AvailableIsFalseWithAReason) {
  if (driver::available()) GTEST_SKIP() << "a CUDA device is available";
  EXPECT_FALSE(driver::available());
  std::string reason = driver::unavailable_reason();
  EXPECT_FALSE(reason.empty());
  if (libcuda_missing()) {
    EXPECT_TRUE(contains(reason, "libcuda")) << reason;
  }
}

TEST(DriverUnavailable, ApiThrowsDriverErrorNamingLibcuda) {
  if (!libcuda_missing()) GTEST_SKIP() << "libcuda is installed here";
  for (int attempt = 0; attempt < 2; ++attempt) {  // every call throws, not only the first
    std::string msg = error_message(ErrorKind::driver, [] { (void)driver::api(); });
    EXPECT_TRUE(contains(msg, "libcuda.so.1")) << msg;
    EXPECT_TRUE(contains(msg, "install the NVIDIA driver")) << msg;
  }
}

TEST(DriverUnavailable, GpuOperationsThrowDriverError) {
  if (driver::available()) GTEST_SKIP() << "a CUDA device is available";
  const bool no_lib = libcuda_missing();
  auto check_msg = [&](const std::string& msg) {
    EXPECT_FALSE(msg.empty());
    if (no_lib) {
      EXPECT_TRUE(contains(msg, "libcuda")) << msg;
    }
  };
  check_msg(error_message(ErrorKind::driver, [] { driver::init(); }));
  check_msg(error_message(ErrorKind::driver, [] { (void)driver::ensure_context(); }));
  check_msg(error_message(ErrorKind::driver, [] { (void)driver::ensure_context(); }));
  check_msg(error_message(ErrorKind::driver, [] { (void)driver::current_device(); }));
  check_msg(error_message(ErrorKind::driver, [] { (void)driver::device_info(0); }));
  check_msg(error_message(ErrorKind::driver, [] { (void)Module::load("not a cubin"); }));
}

TEST(DriverUnavailable, ConcurrentCallersSeeTheSameOutcome) {
  if (driver::available()) GTEST_SKIP() << "a CUDA device is available";
  std::atomic<int> threw{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      try {
        (void)driver::ensure_context();
      } catch (const Error& e) {
        if (e.kind() == ErrorKind::driver) ++threw;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(threw.load(), 8);
}

TEST(DriverCheck, SuccessDoesNotThrow) { EXPECT_NO_THROW(driver::check(CUDA_SUCCESS, "cuInit")); }

TEST(DriverCheck, FailureNamesTheCallAndTheError) {
  std::string msg = error_message(
      ErrorKind::driver, [] { driver::check(CUDA_ERROR_OUT_OF_MEMORY, "cuMemAlloc"); });
  EXPECT_TRUE(msg.starts_with("cuMemAlloc failed: ")) << msg;
  if (libcuda_missing()) {
    EXPECT_TRUE(contains(msg, "CUresult 2")) << msg;  // no cuGetErrorName without the driver
  } else {
    EXPECT_TRUE(contains(msg, "CUDA_ERROR_OUT_OF_MEMORY")) << msg;
  }
}

TEST(DriverRequireSm90, AcceptsHopper) {
  driver::DeviceInfo h100;
  h100.name = "NVIDIA H100 80GB HBM3";
  h100.cc_major = 9;
  h100.cc_minor = 0;
  EXPECT_NO_THROW(driver::require_sm90(h100));
}

TEST(DriverRequireSm90, RejectsOlderWithTheCapability) {
  driver::DeviceInfo ada;
  ada.ordinal = 1;
  ada.name = "NVIDIA L40S";
  ada.cc_major = 8;
  ada.cc_minor = 9;
  std::string msg = error_message(ErrorKind::unsupported, [&] { driver::require_sm90(ada); });
  EXPECT_TRUE(contains(msg, "NVIDIA L40S")) << msg;
  EXPECT_TRUE(contains(msg, "8.9")) << msg;
  EXPECT_TRUE(contains(msg, "9.0 (Hopper: H100/H200)")) << msg;
}

TEST(DriverRequireSm90, RejectsNewerBecauseSm90aIsArchSpecific) {
  driver::DeviceInfo blackwell;
  blackwell.name = "NVIDIA B200";
  blackwell.cc_major = 10;
  blackwell.cc_minor = 0;
  std::string msg = error_message(ErrorKind::unsupported, [&] { driver::require_sm90(blackwell); });
  EXPECT_TRUE(contains(msg, "10.0")) << msg;
  EXPECT_TRUE(contains(msg, "sm_90a")) << msg;
}

TEST(DriverLaunch, RejectsZeroDimensionsBeforeTouchingTheDriver) {
  LaunchConfig cfg;
  cfg.grid[1] = 0;
  std::string msg =
      error_message(ErrorKind::invalid_argument, [&] { launch(nullptr, cfg, nullptr); });
  EXPECT_TRUE(contains(msg, "grid.y")) << msg;

  cfg = LaunchConfig{};
  cfg.block[2] = 0;
  msg = error_message(ErrorKind::invalid_argument, [&] { launch(nullptr, cfg, nullptr); });
  EXPECT_TRUE(contains(msg, "block.z")) << msg;
}

TEST(DriverLaunch, RejectsGridNotDivisibleByCluster) {
  LaunchConfig cfg;
  cfg.grid[0] = 3;
  cfg.cluster[0] = 2;
  std::string msg =
      error_message(ErrorKind::invalid_argument, [&] { launch(nullptr, cfg, nullptr); });
  EXPECT_TRUE(contains(msg, "cluster.x")) << msg;
}

TEST(DriverLaunch, SmallDynamicSmemNeedsNoDriverCall) {
  EXPECT_NO_THROW(set_max_dynamic_smem(nullptr, 48 * 1024));
  error_message(ErrorKind::invalid_argument, [] { set_max_dynamic_smem(nullptr, -1); });
}

TEST(DriverModule, EmptyAndMovedFrom) {
  Module a;
  EXPECT_FALSE(a);
  Module b = std::move(a);
  EXPECT_FALSE(b);
  error_message(ErrorKind::internal, [&] { (void)b.function("k"); });
  error_message(ErrorKind::invalid_argument, [] { (void)Module::load(""); });
}

TEST(DriverDevice, InfoIsSane) {
  if (!driver::available()) GTEST_SKIP() << driver::unavailable_reason();
  CUcontext ctx = driver::ensure_context();
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(driver::ensure_context(), ctx);

  // Another thread starts without a current context and must get the same primary one.
  CUcontext other = nullptr;
  std::thread([&] { other = driver::ensure_context(); }).join();
  EXPECT_EQ(other, ctx);

  CUdevice dev = driver::current_device();
  driver::DeviceInfo info = driver::device_info(dev);
  EXPECT_EQ(info.ordinal, dev);
  EXPECT_FALSE(info.name.empty());
  EXPECT_GE(info.cc_major, 5);
  EXPECT_GE(info.cc_minor, 0);
  EXPECT_GT(info.sm_count, 0);
  EXPECT_GE(info.max_smem_optin, 48 * 1024);
  EXPECT_GT(info.l2_bytes, 0);
  EXPECT_GT(info.total_mem, std::size_t{1} << 30);
  EXPECT_GE(info.driver_version, 12000);
  EXPECT_EQ(driver::device_info(dev).name, info.name);  // cached copy agrees
  error_message(ErrorKind::invalid_argument, [] { (void)driver::device_info(1 << 20); });

  if (info.cc_major == 9 && info.cc_minor == 0) {
    EXPECT_NO_THROW(driver::require_sm90(info));
  } else {
    error_message(ErrorKind::unsupported, [&] { driver::require_sm90(info); });
  }
}

}  // namespace
}  // namespace fp8jit
