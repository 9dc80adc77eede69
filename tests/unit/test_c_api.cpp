// The C ABI (fp8jit/fp8jit.h, runtime/c_api.cpp): statuses instead of exceptions, the C++ checks
// and messages unchanged, a per-thread last error, argument defaults equal to the C++ structs'.
// Runs without a GPU: device pointers are fake but aligned, and invalid arguments are refused
// before anything touches them; a valid call then fails in the driver (skipped with a GPU).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8jit.h"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/driver.hpp"

namespace {

using namespace fp8jit;

static_assert(sizeof(fp8jit_status) == sizeof(int) && sizeof(fp8jit_granularity) == sizeof(int));
static_assert(std::is_same_v<fp8jit_stream_t, CUstream>);

template <class T = void>
T* fake(std::uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string last_error() { return fp8jit_last_error(); }

// The C++ API's message for the same call (must throw).
template <class F>
std::string cpp_message(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "the C++ call did not throw fp8jit::Error";
  return {};
}

// A runtime without a disk cache, freed at scope exit.
struct Handle {
  fp8jit_runtime* rt = nullptr;
  Handle() { EXPECT_EQ(fp8jit_runtime_create_with_cache_dir(nullptr, &rt), FP8JIT_SUCCESS) << last_error(); }
  ~Handle() { fp8jit_runtime_destroy(rt); }
};

// Valid-looking arguments (aligned fake device pointers): only the driver can refuse them.
fp8jit_quantize_args valid_quantize() {
  fp8jit_quantize_args a;
  fp8jit_quantize_args_init(&a);
  a.x = fake(0x100000);
  a.q = fake(0x200000);
  a.scales = fake<float>(0x300000);
  a.m = 256;
  a.k = 1024;
  return a;
}

fp8jit_dequantize_args valid_dequantize() {
  fp8jit_dequantize_args a;
  fp8jit_dequantize_args_init(&a);
  a.q = fake(0x100000);
  a.y = fake(0x200000);
  a.scales = fake<const float>(0x300000);
  a.m = 256;
  a.k = 1024;
  return a;
}

fp8jit_gemm_args valid_gemm() {
  fp8jit_gemm_args g;
  fp8jit_gemm_args_init(&g);
  g.a = fake(0x100000);
  g.b = fake(0x200000);
  g.d = fake(0x300000);
  g.m = 256;
  g.n = 512;
  g.k = 1024;
  g.scale_a = fake<const float>(0x400000);
  g.scale_b = fake<const float>(0x500000);
  g.scale_a_size = scale_count(Granularity::group128, ScaleLayout::col_major_tma, 256, 1024);
  g.scale_b_size = scale_count(Granularity::block128, ScaleLayout::row_major, 512, 1024);
  return g;
}

// ---- statuses, version ------------------------------------------------------------------------

TEST(CApiStatus, EachStatusHasItsOwnString) {
  const fp8jit_status all[] = {FP8JIT_SUCCESS,         FP8JIT_ERROR_INVALID_ARGUMENT,
                               FP8JIT_ERROR_UNSUPPORTED, FP8JIT_ERROR_COMPILE,
                               FP8JIT_ERROR_DRIVER,    FP8JIT_ERROR_IO,
                               FP8JIT_ERROR_INTERNAL};
  std::set<std::string> seen;
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(int(all[i]), i);
    const char* s = fp8jit_status_string(all[i]);
    ASSERT_NE(s, nullptr);
    EXPECT_GT(std::strlen(s), 0u);
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 7u);
  EXPECT_STREQ(fp8jit_status_string(FP8JIT_SUCCESS), "success");
  EXPECT_STREQ(fp8jit_status_string(FP8JIT_ERROR_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(fp8jit_status_string(static_cast<fp8jit_status>(99)), "unknown fp8jit status");
}

TEST(CApiStatus, EnumValuesEqualTheCppEnums) {
  EXPECT_EQ(FP8JIT_DTYPE_BF16, int(DType::bf16));
  EXPECT_EQ(FP8JIT_DTYPE_FP16, int(DType::fp16));
  EXPECT_EQ(FP8JIT_DTYPE_FP32, int(DType::fp32));
  EXPECT_EQ(FP8JIT_FP8_E4M3, int(Fp8Format::e4m3));
  EXPECT_EQ(FP8JIT_FP8_E5M2, int(Fp8Format::e5m2));
  EXPECT_EQ(FP8JIT_GRANULARITY_TENSOR, int(Granularity::tensor));
  EXPECT_EQ(FP8JIT_GRANULARITY_ROW, int(Granularity::row));
  EXPECT_EQ(FP8JIT_GRANULARITY_GROUP128, int(Granularity::group128));
  EXPECT_EQ(FP8JIT_GRANULARITY_BLOCK128, int(Granularity::block128));
  EXPECT_EQ(FP8JIT_SCALE_LAYOUT_ROW_MAJOR, int(ScaleLayout::row_major));
  EXPECT_EQ(FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA, int(ScaleLayout::col_major_tma));
  EXPECT_EQ(FP8JIT_SCALE_MODE_TENSOR, int(ScaleMode::tensor));
  EXPECT_EQ(FP8JIT_SCALE_MODE_ROWWISE, int(ScaleMode::rowwise));
  EXPECT_EQ(FP8JIT_SCALE_MODE_BLOCK, int(ScaleMode::block));
  EXPECT_EQ(FP8JIT_SCALE_MODE_GROUP, int(ScaleMode::group));
}

TEST(CApiStatus, VersionIsMajorMinorPatch) {
  const std::string v = fp8jit_version();
  int major = -1, minor = -1, patch = -1;
  ASSERT_EQ(std::sscanf(v.c_str(), "%d.%d.%d", &major, &minor, &patch), 3) << v;
  EXPECT_GE(major, 0);
}

// ---- runtime handles ----------------------------------------------------------------------------

TEST(CApiRuntime, CreateWithACacheDirectoryAndDestroy) {
  std::string dir = ::testing::TempDir() + "fp8jit_capi_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_cache_dir(dir.c_str(), &rt), FP8JIT_SUCCESS) << last_error();
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(std::string(fp8jit_runtime_cache_dir(rt)), dir);

  fp8jit_cache_stats stats;
  std::memset(&stats, 0xAB, sizeof stats);
  ASSERT_EQ(fp8jit_runtime_cache_stats(rt, &stats), FP8JIT_SUCCESS) << last_error();
  EXPECT_EQ(stats.memory_hits + stats.memory_misses + stats.disk_hits + stats.disk_misses +
                stats.disk_corrupt + stats.disk_writes + stats.compiles,
            0u);
  EXPECT_EQ(stats.compile_seconds, 0.0);
  EXPECT_EQ(fp8jit_runtime_reset_cache_stats(rt), FP8JIT_SUCCESS);
  fp8jit_runtime_destroy(rt);
  std::filesystem::remove_all(dir);
}

TEST(CApiRuntime, NullOrEmptyCacheDirDisablesTheDiskCache) {
  for (const char* dir : {static_cast<const char*>(nullptr), ""}) {
    fp8jit_runtime* rt = nullptr;
    ASSERT_EQ(fp8jit_runtime_create_with_cache_dir(dir, &rt), FP8JIT_SUCCESS) << last_error();
    ASSERT_NE(rt, nullptr);
    EXPECT_STREQ(fp8jit_runtime_cache_dir(rt), "");
    fp8jit_runtime_destroy(rt);
  }
}

TEST(CApiRuntime, CreateReadsTheSettings) {
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create(&rt), FP8JIT_SUCCESS) << last_error();
  ASSERT_NE(rt, nullptr);
  EXPECT_EQ(std::string(fp8jit_runtime_cache_dir(rt)), RuntimeOptions::from_settings().cache_dir);
  fp8jit_runtime_destroy(rt);
}

TEST(CApiRuntime, NullHandlesAndOutputsAreRefusedByName) {
  fp8jit_runtime_destroy(nullptr);  // a no-op
  EXPECT_EQ(fp8jit_runtime_cache_dir(nullptr), nullptr);

  EXPECT_EQ(fp8jit_runtime_create(nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid out = NULL")) << last_error();
  EXPECT_TRUE(contains(last_error(), "fp8jit_runtime_create")) << last_error();
  EXPECT_EQ(fp8jit_runtime_create_with_cache_dir("", nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid out = NULL")) << last_error();

  fp8jit_cache_stats stats;
  EXPECT_EQ(fp8jit_runtime_cache_stats(nullptr, &stats), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid runtime = NULL")) << last_error();
  Handle h;
  EXPECT_EQ(fp8jit_runtime_cache_stats(h.rt, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid out = NULL")) << last_error();
  EXPECT_EQ(fp8jit_runtime_reset_cache_stats(nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid runtime = NULL")) << last_error();
}

// ---- argument checks ----------------------------------------------------------------------------

TEST(CApiArguments, NullRuntimeOrArgsNameTheArgument) {
  Handle h;
  const fp8jit_quantize_args q = valid_quantize();
  const fp8jit_dequantize_args dq = valid_dequantize();
  const fp8jit_gemm_args g = valid_gemm();
  auto check = [](fp8jit_status st, const char* function, const char* needle) {
    EXPECT_EQ(st, FP8JIT_ERROR_INVALID_ARGUMENT) << function;
    EXPECT_EQ(fp8jit_get_last_status(), FP8JIT_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(last_error(), needle)) << last_error();
    EXPECT_TRUE(contains(last_error(), function)) << last_error();
  };
  check(fp8jit_quantize(nullptr, &q, nullptr), "fp8jit_quantize", "invalid runtime = NULL");
  check(fp8jit_quantize(h.rt, nullptr, nullptr), "fp8jit_quantize", "invalid args = NULL");
  check(fp8jit_dequantize(nullptr, &dq, nullptr), "fp8jit_dequantize", "invalid runtime = NULL");
  check(fp8jit_dequantize(h.rt, nullptr, nullptr), "fp8jit_dequantize", "invalid args = NULL");
  check(fp8jit_gemm(nullptr, &g, nullptr), "fp8jit_gemm", "invalid runtime = NULL");
  check(fp8jit_gemm(h.rt, nullptr, nullptr), "fp8jit_gemm", "invalid args = NULL");
  check(fp8jit_scale_count(FP8JIT_GRANULARITY_ROW, FP8JIT_SCALE_LAYOUT_ROW_MAJOR, 4, 4, nullptr),
        "fp8jit_scale_count", "invalid out = NULL");
}

TEST(CApiArguments, InvalidArgumentsGiveTheCppMessage) {
  Handle h;
  Runtime cpp(RuntimeOptions{""});

  fp8jit_quantize_args q = valid_quantize();
  q.m = 0;
  EXPECT_EQ(fp8jit_quantize(h.rt, &q, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  QuantizeArgs cq;
  cq.x = q.x, cq.q = q.q, cq.scales = q.scales, cq.m = 0, cq.k = q.k;
  EXPECT_EQ(last_error(), cpp_message([&] { cpp.quantize(cq, nullptr); }));
  EXPECT_TRUE(contains(last_error(), "invalid m = 0: must be positive")) << last_error();

  fp8jit_dequantize_args dq = valid_dequantize();
  dq.ldy = 5;
  EXPECT_EQ(fp8jit_dequantize(h.rt, &dq, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid ldy = 5: must be at least 1024")) << last_error();

  fp8jit_gemm_args g = valid_gemm();
  g.k = 1000;
  EXPECT_EQ(fp8jit_gemm(h.rt, &g, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  GemmArgs cg;
  cg.a = g.a, cg.b = g.b, cg.d = g.d, cg.scale_a = g.scale_a, cg.scale_b = g.scale_b;
  cg.m = g.m, cg.n = g.n, cg.k = 1000;
  EXPECT_EQ(last_error(), cpp_message([&] { cpp.gemm(cg, nullptr); }));
  EXPECT_TRUE(contains(last_error(), "invalid k = 1000: must be a multiple of 16")) << last_error();

  g = valid_gemm();
  g.a_format = FP8JIT_FP8_E5M2;
  g.b_format = FP8JIT_FP8_E5M2;
  EXPECT_EQ(fp8jit_gemm(h.rt, &g, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid a_format/b_format = e5m2/e5m2: at least one operand must be E4M3"))
      << last_error();

  g = valid_gemm();
  g.scale_b_size = 31;  // 4 x 8 blocks needed
  EXPECT_EQ(fp8jit_gemm(h.rt, &g, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid scale_b_size = 31")) << last_error();
  EXPECT_TRUE(contains(last_error(), "needs 32 floats")) << last_error();
}

// Every field reaches the C++ struct under its own name: nulling one device pointer at a time
// must be reported for exactly that pointer.
TEST(CApiArguments, EachDevicePointerIsCheckedUnderItsName) {
  Handle h;
  auto expect_named = [](fp8jit_status st, const std::string& name) {
    EXPECT_EQ(st, FP8JIT_ERROR_INVALID_ARGUMENT) << name;
    EXPECT_TRUE(contains(last_error(), "invalid " + name + " = nullptr")) << name << ": " << last_error();
  };
  {
    fp8jit_quantize_args a = valid_quantize();
    a.x = nullptr;
    expect_named(fp8jit_quantize(h.rt, &a, nullptr), "x");
    a = valid_quantize(), a.q = nullptr;
    expect_named(fp8jit_quantize(h.rt, &a, nullptr), "q");
    a = valid_quantize(), a.scales = nullptr;
    expect_named(fp8jit_quantize(h.rt, &a, nullptr), "scales");
    a = valid_quantize(), a.qt = fake(0x600000);  // 1x128 with a transpose needs scales_t
    expect_named(fp8jit_quantize(h.rt, &a, nullptr), "scales_t");
  }
  {
    fp8jit_dequantize_args a = valid_dequantize();
    a.q = nullptr;
    expect_named(fp8jit_dequantize(h.rt, &a, nullptr), "q");
    a = valid_dequantize(), a.y = nullptr;
    expect_named(fp8jit_dequantize(h.rt, &a, nullptr), "y");
    a = valid_dequantize(), a.scales = nullptr;
    expect_named(fp8jit_dequantize(h.rt, &a, nullptr), "scales");
  }
  {
    const void* fp8jit_gemm_args::*ptrs[] = {&fp8jit_gemm_args::a, &fp8jit_gemm_args::b};
    const char* names[] = {"a", "b"};
    for (int i = 0; i < 2; ++i) {
      fp8jit_gemm_args g = valid_gemm();
      g.*ptrs[i] = nullptr;
      expect_named(fp8jit_gemm(h.rt, &g, nullptr), names[i]);
    }
    fp8jit_gemm_args g = valid_gemm();
    g.d = nullptr;
    expect_named(fp8jit_gemm(h.rt, &g, nullptr), "d");
    g = valid_gemm(), g.scale_a = nullptr;
    expect_named(fp8jit_gemm(h.rt, &g, nullptr), "scale_a");
    g = valid_gemm(), g.scale_b = nullptr;
    expect_named(fp8jit_gemm(h.rt, &g, nullptr), "scale_b");
    g = valid_gemm(), g.fast_accum = 7;  // any nonzero int is true; block scaling refuses it
    EXPECT_EQ(fp8jit_gemm(h.rt, &g, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(last_error(), "invalid fast_accum = true")) << last_error();
  }
}

TEST(CApiArguments, OutOfRangeEnumValuesAreRefused) {
  Handle h;
  fp8jit_quantize_args q = valid_quantize();
  q.granularity = static_cast<fp8jit_granularity>(9);
  EXPECT_EQ(fp8jit_quantize(h.rt, &q, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid granularity = 9")) << last_error();

  q = valid_quantize();
  q.input = static_cast<fp8jit_dtype>(-1);
  EXPECT_EQ(fp8jit_quantize(h.rt, &q, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid input = -1")) << last_error();

  fp8jit_dequantize_args dq = valid_dequantize();
  dq.output = static_cast<fp8jit_dtype>(3);
  EXPECT_EQ(fp8jit_dequantize(h.rt, &dq, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid output = 3")) << last_error();

  fp8jit_gemm_args g = valid_gemm();
  g.scale_mode = static_cast<fp8jit_scale_mode>(4);
  EXPECT_EQ(fp8jit_gemm(h.rt, &g, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid scale_mode = 4")) << last_error();
  g = valid_gemm();
  g.scale_b_layout = static_cast<fp8jit_scale_layout>(2);
  EXPECT_EQ(fp8jit_gemm(h.rt, &g, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid scale_b_layout = 2")) << last_error();

  int64_t n = -5;
  EXPECT_EQ(fp8jit_scale_count(static_cast<fp8jit_granularity>(4), FP8JIT_SCALE_LAYOUT_ROW_MAJOR, 4, 4, &n),
            FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(n, -5);
}

// ---- without a GPU, a valid call fails in the driver ----------------------------------------------

TEST(CApiDriver, ValidCallsWithoutAGpuReturnDriverError) {
  if (driver::available()) GTEST_SKIP() << "a CUDA device is available";
  const bool libcuda_missing = driver::try_api() == nullptr;
  Handle h;
  const fp8jit_quantize_args q = valid_quantize();
  const fp8jit_dequantize_args dq = valid_dequantize();
  const fp8jit_gemm_args g = valid_gemm();
  for (int op = 0; op < 3; ++op) {
    fp8jit_clear_last_error();
    const fp8jit_status st = op == 0   ? fp8jit_quantize(h.rt, &q, nullptr)
                             : op == 1 ? fp8jit_dequantize(h.rt, &dq, nullptr)
                                       : fp8jit_gemm(h.rt, &g, nullptr);
    EXPECT_EQ(st, FP8JIT_ERROR_DRIVER) << op << ": " << last_error();
    EXPECT_EQ(fp8jit_get_last_status(), FP8JIT_ERROR_DRIVER);
    EXPECT_FALSE(last_error().empty());
    if (libcuda_missing) EXPECT_TRUE(contains(last_error(), "libcuda")) << last_error();
  }
  // Nothing was compiled or loaded.
  fp8jit_cache_stats stats;
  ASSERT_EQ(fp8jit_runtime_cache_stats(h.rt, &stats), FP8JIT_SUCCESS);
  EXPECT_EQ(stats.compiles, 0u);
}

// ---- the last error ------------------------------------------------------------------------------

TEST(CApiLastError, SuccessKeepsTheLastFailureUntilCleared) {
  fp8jit_clear_last_error();
  EXPECT_STREQ(fp8jit_last_error(), "");
  EXPECT_EQ(fp8jit_get_last_status(), FP8JIT_SUCCESS);

  int64_t n = 0;
  EXPECT_EQ(fp8jit_scale_count(FP8JIT_GRANULARITY_ROW, FP8JIT_SCALE_LAYOUT_ROW_MAJOR, 0, 4, &n),
            FP8JIT_ERROR_INVALID_ARGUMENT);
  const std::string failure = last_error();
  EXPECT_EQ(failure, cpp_message([] { (void)scale_count(Granularity::row, ScaleLayout::row_major, 0, 4); }));
  EXPECT_TRUE(contains(failure, "invalid m = 0: must be positive")) << failure;

  EXPECT_EQ(fp8jit_scale_count(FP8JIT_GRANULARITY_ROW, FP8JIT_SCALE_LAYOUT_ROW_MAJOR, 3, 4, &n), FP8JIT_SUCCESS);
  EXPECT_EQ(n, 3);
  EXPECT_EQ(last_error(), failure);
  EXPECT_EQ(fp8jit_get_last_status(), FP8JIT_ERROR_INVALID_ARGUMENT);

  fp8jit_clear_last_error();
  EXPECT_STREQ(fp8jit_last_error(), "");
  EXPECT_EQ(fp8jit_get_last_status(), FP8JIT_SUCCESS);
}

TEST(CApiLastError, IsPerThread) {
  fp8jit_clear_last_error();
  Handle h;
  fp8jit_gemm_args g = valid_gemm();
  g.m = -3;
  ASSERT_EQ(fp8jit_gemm(h.rt, &g, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  const std::string mine = last_error();
  ASSERT_TRUE(contains(mine, "invalid m = -3")) << mine;

  std::string fresh, other;
  fp8jit_status fresh_status = FP8JIT_ERROR_INTERNAL, other_status = FP8JIT_SUCCESS;
  std::thread t([&] {
    fresh = fp8jit_last_error();  // this thread has not failed yet
    fresh_status = fp8jit_get_last_status();
    (void)fp8jit_quantize(nullptr, nullptr, nullptr);
    other = fp8jit_last_error();
    other_status = fp8jit_get_last_status();
  });
  t.join();
  EXPECT_EQ(fresh, "");
  EXPECT_EQ(fresh_status, FP8JIT_SUCCESS);
  EXPECT_TRUE(contains(other, "invalid runtime = NULL")) << other;
  EXPECT_EQ(other_status, FP8JIT_ERROR_INVALID_ARGUMENT);
  // The other thread's failure left this thread's message alone.
  EXPECT_EQ(last_error(), mine);

  std::thread quiet([&] { fresh = fp8jit_last_error(); });
  quiet.join();
  EXPECT_EQ(fresh, "");
}

// ---- argument defaults and scale counts ----------------------------------------------------------

TEST(CApiArgsInit, DefaultsEqualTheCppDefaults) {
  fp8jit_quantize_args q;
  std::memset(&q, 0xAB, sizeof q);
  fp8jit_quantize_args_init(&q);
  const QuantizeArgs cq;
  EXPECT_EQ(q.x, cq.x);
  EXPECT_EQ(int(q.input), int(cq.input));
  EXPECT_EQ(q.m, cq.m);
  EXPECT_EQ(q.k, cq.k);
  EXPECT_EQ(q.ldx, cq.ldx);
  EXPECT_EQ(q.q, cq.q);
  EXPECT_EQ(int(q.format), int(cq.format));
  EXPECT_EQ(q.ldq, cq.ldq);
  EXPECT_EQ(q.scales, cq.scales);
  EXPECT_EQ(int(q.granularity), int(cq.granularity));
  EXPECT_EQ(int(q.scale_layout), int(cq.scale_layout));
  EXPECT_EQ(q.pow2_scale != 0, cq.pow2_scale);
  EXPECT_EQ(q.static_scale, cq.static_scale);
  EXPECT_EQ(q.qt, cq.qt);
  EXPECT_EQ(q.ldqt, cq.ldqt);
  EXPECT_EQ(q.scales_t, cq.scales_t);
  EXPECT_EQ(q.amax, cq.amax);
  EXPECT_EQ(q.granularity, FP8JIT_GRANULARITY_GROUP128);  // the documented values
  EXPECT_EQ(q.scale_layout, FP8JIT_SCALE_LAYOUT_ROW_MAJOR);

  fp8jit_dequantize_args d;
  std::memset(&d, 0xAB, sizeof d);
  fp8jit_dequantize_args_init(&d);
  const DequantizeArgs cd;
  EXPECT_EQ(d.q, cd.q);
  EXPECT_EQ(int(d.format), int(cd.format));
  EXPECT_EQ(d.m, cd.m);
  EXPECT_EQ(d.k, cd.k);
  EXPECT_EQ(d.ldq, cd.ldq);
  EXPECT_EQ(d.scales, cd.scales);
  EXPECT_EQ(int(d.granularity), int(cd.granularity));
  EXPECT_EQ(int(d.scale_layout), int(cd.scale_layout));
  EXPECT_EQ(d.y, cd.y);
  EXPECT_EQ(int(d.output), int(cd.output));
  EXPECT_EQ(d.ldy, cd.ldy);
  EXPECT_EQ(d.granularity, FP8JIT_GRANULARITY_BLOCK128);

  fp8jit_gemm_args g;
  std::memset(&g, 0xAB, sizeof g);
  fp8jit_gemm_args_init(&g);
  const GemmArgs cg;
  EXPECT_EQ(g.a, cg.a);
  EXPECT_EQ(int(g.a_format), int(cg.a_format));
  EXPECT_EQ(g.lda, cg.lda);
  EXPECT_EQ(g.b, cg.b);
  EXPECT_EQ(int(g.b_format), int(cg.b_format));
  EXPECT_EQ(g.ldb, cg.ldb);
  EXPECT_EQ(g.d, cg.d);
  EXPECT_EQ(int(g.d_dtype), int(cg.d_dtype));
  EXPECT_EQ(g.ldd, cg.ldd);
  EXPECT_EQ(g.m, cg.m);
  EXPECT_EQ(g.n, cg.n);
  EXPECT_EQ(g.k, cg.k);
  EXPECT_EQ(int(g.scale_mode), int(cg.scale_mode));
  EXPECT_EQ(g.scale_a, cg.scale_a);
  EXPECT_EQ(g.scale_a_size, cg.scale_a_size);
  EXPECT_EQ(int(g.scale_a_layout), int(cg.scale_a_layout));
  EXPECT_EQ(g.scale_b, cg.scale_b);
  EXPECT_EQ(g.scale_b_size, cg.scale_b_size);
  EXPECT_EQ(int(g.scale_b_layout), int(cg.scale_b_layout));
  EXPECT_EQ(g.bias, cg.bias);
  EXPECT_EQ(g.fast_accum != 0, cg.fast_accum);
  EXPECT_EQ(g.scale_mode, FP8JIT_SCALE_MODE_BLOCK);
  EXPECT_EQ(g.scale_a_layout, FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA);

  fp8jit_quantize_args_init(nullptr);  // no-ops
  fp8jit_dequantize_args_init(nullptr);
  fp8jit_gemm_args_init(nullptr);
}

TEST(CApiScaleCount, MatchesTheCppFunction) {
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 2; ++l)
      for (std::int64_t m : {1, 3, 4, 127, 128, 129, 250, 4096})
        for (std::int64_t k : {1, 16, 127, 128, 129, 1040, 7168}) {
          int64_t got = -1;
          ASSERT_EQ(fp8jit_scale_count(static_cast<fp8jit_granularity>(g), static_cast<fp8jit_scale_layout>(l),
                                       m, k, &got),
                    FP8JIT_SUCCESS)
              << last_error();
          EXPECT_EQ(got, scale_count(static_cast<Granularity>(g), static_cast<ScaleLayout>(l), m, k))
              << g << " " << l << " " << m << "x" << k;
        }
  int64_t n = 0;
  ASSERT_EQ(fp8jit_scale_count(FP8JIT_GRANULARITY_GROUP128, FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA, 250, 1040, &n),
            FP8JIT_SUCCESS);
  EXPECT_EQ(n, 9 * 252);  // 9 groups of 128 along K, rows padded 250 -> 252
}

// ---- size ranges
// ---------------------------------------------------------------------------------

constexpr int64_t kTwo31 = int64_t{1} << 31;

// Sizes beyond int: M*K/128 once wrapped to 0 with status OK. Now every granularity and layout
// refuses them by name and value with the C++ message, and *out keeps its value.
TEST(CApiScaleCount, SizesOutOfRangeAreRefusedByNameAndValue) {
  struct Case {
    int64_t m, k;
    const char* message;
  };
  const Case cases[] = {
      {INT64_MAX, INT64_MAX, "invalid m = 9223372036854775807: must be at most 2^31-1"},
      {kTwo31, 128, "invalid m = 2147483648: must be at most 2^31-1"},
      {128, kTwo31, "invalid k = 2147483648: must be at most 2^31-1"},
      {128, INT64_MAX, "invalid k = 9223372036854775807: must be at most 2^31-1"},
      {128, -1, "invalid k = -1: must be positive"},
      {-1, 128, "invalid m = -1: must be positive"},
      {0, 128, "invalid m = 0: must be positive"},
      {128, 0, "invalid k = 0: must be positive"},
  };
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 2; ++l)
      for (const Case& c : cases) {
        fp8jit_clear_last_error();
        int64_t out = -7;
        const auto cg = static_cast<fp8jit_granularity>(g);
        const auto cl = static_cast<fp8jit_scale_layout>(l);
        EXPECT_EQ(fp8jit_scale_count(cg, cl, c.m, c.k, &out), FP8JIT_ERROR_INVALID_ARGUMENT)
            << c.message;
        EXPECT_EQ(fp8jit_get_last_status(), FP8JIT_ERROR_INVALID_ARGUMENT);
        EXPECT_EQ(last_error(), c.message) << g << " " << l;
        EXPECT_EQ(last_error(), cpp_message([&] {
                    (void)scale_count(static_cast<Granularity>(g), static_cast<ScaleLayout>(l), c.m,
                                      c.k);
                  }));
        EXPECT_EQ(out, -7) << c.message;
      }
}

// The largest size accepted gives the exact count: no wrap, no truncation to int.
TEST(CApiScaleCount, LargestSizesGiveExactCounts) {
  const int64_t max = kTwo31 - 1;
  const int64_t groups = (max + 127) / 128;  // 2^24
  const struct {
    fp8jit_granularity g;
    fp8jit_scale_layout l;
    int64_t want;
  } cases[] = {
      {FP8JIT_GRANULARITY_TENSOR, FP8JIT_SCALE_LAYOUT_ROW_MAJOR, 1},
      {FP8JIT_GRANULARITY_ROW, FP8JIT_SCALE_LAYOUT_ROW_MAJOR, max},
      {FP8JIT_GRANULARITY_GROUP128, FP8JIT_SCALE_LAYOUT_ROW_MAJOR, max * groups},
      {FP8JIT_GRANULARITY_GROUP128, FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA,
       kTwo31 * groups},  // rows to 4
      {FP8JIT_GRANULARITY_BLOCK128, FP8JIT_SCALE_LAYOUT_ROW_MAJOR, groups * groups},
  };
  for (const auto& c : cases) {
    int64_t out = -1;
    ASSERT_EQ(fp8jit_scale_count(c.g, c.l, max, max, &out), FP8JIT_SUCCESS) << last_error();
    EXPECT_EQ(out, c.want) << c.g << " " << c.l;
    EXPECT_EQ(out,
              scale_count(static_cast<Granularity>(c.g), static_cast<ScaleLayout>(c.l), max, max));
  }
}

// GEMM sizes are refused by the argument checks, before anything needs a GPU: the status is
// invalid-argument here, where a valid call gets a driver error, and nothing is compiled.
TEST(CApiArguments, GemmSizesOutOfRangeAreRefusedBeforeTheGpu) {
  Handle h;
  struct Case {
    int64_t fp8jit_gemm_args::*field;
    int64_t value;
    const char* message;
  };
  const Case cases[] = {
      {&fp8jit_gemm_args::k, 100, "invalid k = 100: must be a multiple of 16"},
      {&fp8jit_gemm_args::m, kTwo31, "invalid m = 2147483648: must be at most 2^31-1"},
      {&fp8jit_gemm_args::n, kTwo31, "invalid n = 2147483648: must be at most 2^31-1"},
      {&fp8jit_gemm_args::k, INT64_MAX, "invalid k = 9223372036854775807: must be at most 2^31-1"},
      {&fp8jit_gemm_args::n, 0, "invalid n = 0: must be positive"},
      {&fp8jit_gemm_args::m, -1, "invalid m = -1: must be positive"},
  };
  for (const Case& c : cases) {
    fp8jit_gemm_args g = valid_gemm();
    g.*c.field = c.value;
    fp8jit_clear_last_error();
    EXPECT_EQ(fp8jit_gemm(h.rt, &g, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT) << c.message;
    EXPECT_TRUE(contains(last_error(), c.message)) << last_error();
    char name[256] = "untouched";
    EXPECT_EQ(fp8jit_gemm_select(h.rt, &g, name, sizeof name), FP8JIT_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(last_error(), c.message)) << last_error();
    EXPECT_STREQ(name, "untouched");
    EXPECT_EQ(fp8jit_gemm_tune(h.rt, &g, 4), FP8JIT_ERROR_INVALID_ARGUMENT) << last_error();
    EXPECT_TRUE(contains(last_error(), c.message)) << last_error();
    const int64_t mnk[] = {g.m, g.n, g.k};
    EXPECT_EQ(fp8jit_gemm_precompile(h.rt, &g, mnk, 1), FP8JIT_ERROR_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(last_error(), c.message)) << last_error();
  }
  fp8jit_cache_stats stats;
  ASSERT_EQ(fp8jit_runtime_cache_stats(h.rt, &stats), FP8JIT_SUCCESS);
  EXPECT_EQ(stats.compiles, 0u);
  EXPECT_EQ(stats.memory_misses, 0u);
}

// Quantize and dequantize share the bound, plus m*k below 2^34 elements.
TEST(CApiArguments, QuantizeSizesOutOfRangeAreRefused) {
  Handle h;
  fp8jit_quantize_args q = valid_quantize();
  q.m = kTwo31;
  EXPECT_EQ(fp8jit_quantize(h.rt, &q, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid m = 2147483648: must be at most 2^31-1"))
      << last_error();
  q = valid_quantize();
  q.m = int64_t{1} << 20, q.k = int64_t{1} << 14;  // 2^34 elements
  EXPECT_EQ(fp8jit_quantize(h.rt, &q, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid m*k = 17179869184: must be below 2^34"))
      << last_error();
  fp8jit_dequantize_args dq = valid_dequantize();
  dq.k = -1;
  EXPECT_EQ(fp8jit_dequantize(h.rt, &dq, nullptr), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(last_error(), "invalid k = -1: must be positive")) << last_error();
}

}  // namespace

namespace fp8jit {
namespace {

// ---- select, precompile, tune --------------------------------------------------------------

TEST(CApiGemmPlanning, SelectPrecompileAndTune) {
  std::string dir = ::testing::TempDir() + "fp8jit_capi_plan_XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_cache_dir(dir.c_str(), &rt), FP8JIT_SUCCESS) << last_error();
  const fp8jit_gemm_args g = valid_gemm();
  char name[256];
  ASSERT_EQ(fp8jit_gemm_select(rt, &g, name, sizeof name), FP8JIT_SUCCESS) << last_error();
  EXPECT_EQ(std::string(name), spec_name(default_runtime().select(GemmArgs{
                                   g.a, Fp8Format::e4m3, 0, g.b, Fp8Format::e4m3, 0, g.d, DType::bf16, 0, g.m, g.n, g.k,
                                   ScaleMode::block, g.scale_a, g.scale_a_size, ScaleLayout::col_major_tma, g.scale_b,
                                   g.scale_b_size, ScaleLayout::row_major, nullptr, false})));
  char tiny[4];
  EXPECT_EQ(fp8jit_gemm_select(rt, &g, tiny, sizeof tiny), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("capacity"), std::string::npos) << last_error();

  // Two shapes that share a kernel and one that does not: compiled once each, into the cache.
  const int64_t mnk[] = {256, 512, 1024, 256, 512, 2048, 64, 2112, 7168};
  ASSERT_EQ(fp8jit_gemm_precompile(rt, &g, mnk, 3), FP8JIT_SUCCESS) << last_error();
  fp8jit_cache_stats st;
  ASSERT_EQ(fp8jit_runtime_cache_stats(rt, &st), FP8JIT_SUCCESS);
  EXPECT_GE(st.compiles, 1u);
  EXPECT_EQ(st.compiles, st.disk_writes);
  const int64_t bad[] = {256, 512, 1000};
  EXPECT_EQ(fp8jit_gemm_precompile(rt, &g, bad, 1), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fp8jit_gemm_precompile(rt, &g, nullptr, 1), FP8JIT_ERROR_INVALID_ARGUMENT);

  if (!driver::available()) {
    EXPECT_EQ(fp8jit_gemm_tune(rt, &g, 4), FP8JIT_ERROR_DRIVER);
    EXPECT_NE(last_error().find("libcuda"), std::string::npos) << last_error();
  }
  fp8jit_runtime_destroy(rt);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fp8jit
