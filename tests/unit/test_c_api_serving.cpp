// The C ABI for serving: runtime options (jit off), precompiling a model, the log callback.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#include "fp8jit/fp8jit.h"
#include "runtime/c_api_support.hpp"  // the handle's Runtime, to read the PDL setting

namespace {

std::string last_error() {
  return fp8jit_last_error();
}

TEST(CApiServing, CreateWithOptionsChecksTheStructAndTakesJitOff) {
  fp8jit_runtime_options o;
  std::memset(&o, 0xAB, sizeof o);
  fp8jit_runtime_options_init(&o);
  EXPECT_EQ(o.struct_size, sizeof o);
  EXPECT_EQ(o.cache_dir, nullptr);
  EXPECT_EQ(o.db_path, nullptr);
  EXPECT_EQ(o.jit, 1);
  EXPECT_EQ(o.max_sms, 0);  // every SM
  EXPECT_EQ(o.pdl, 0);      // no programmatic dependent launch
  EXPECT_EQ(o.elementwise_arch, nullptr);  // each GPU's own build
  fp8jit_runtime_options_init(nullptr);  // a no-op
  fp8jit_runtime* rt = nullptr;
  o.jit = 0;
  o.cache_dir = "";
  ASSERT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_SUCCESS) << last_error();
  ASSERT_NE(rt, nullptr);
  EXPECT_STREQ(fp8jit_runtime_cache_dir(rt), "");
  fp8jit_runtime_destroy(rt);
  const std::pair<void (*)(fp8jit_runtime_options&), const char*> bad[] = {
      {[](fp8jit_runtime_options& x) { x.struct_size = 8; }, "invalid options->struct_size = 8"},
      {[](fp8jit_runtime_options& x) { x.struct_size += 8; }, "options->struct_size"},
      {[](fp8jit_runtime_options& x) { x.jit = 2; }, "invalid options->jit = 2: 0 or 1"},
      {[](fp8jit_runtime_options& x) { x.max_sms = -1; }, "invalid options->max_sms = -1"},
      {[](fp8jit_runtime_options& x) { x.pdl = 2; }, "invalid options->pdl = 2: 0 or 1"},
      {[](fp8jit_runtime_options& x) { x.pdl = -1; }, "invalid options->pdl = -1: 0 or 1"},
      {[](fp8jit_runtime_options& x) { x.struct_size -= 1; }, "options->struct_size"},
      {[](fp8jit_runtime_options& x) { x.elementwise_arch = "compute_80"; }, "compute_80"},
      {[](fp8jit_runtime_options& x) { x.elementwise_arch = "sm_89"; }, "FP8JIT_ELEMENTWISE_ARCH"},
  };
  for (const auto& [edit, needle] : bad) {
    fp8jit_runtime_options_init(&o);
    edit(o);
    rt = reinterpret_cast<fp8jit_runtime*>(0x1);
    EXPECT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_ERROR_INVALID_ARGUMENT);
    EXPECT_EQ(rt, nullptr);
    EXPECT_NE(last_error().find(needle), std::string::npos) << last_error();
  }
  EXPECT_EQ(fp8jit_runtime_create_with_options(nullptr, &rt), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("options"), std::string::npos) << last_error();
}

// elementwise_arch: PTX for compute_89 taken; a caller built against fp8jit 0.1's header (no such
// field, a smaller struct_size) is served, the bytes past its struct never read.
TEST(CApiServing, ElementwiseArchAndTheEarlierLayout) {
  fp8jit_runtime_options o;
  fp8jit_runtime_options_init(&o);
  o.elementwise_arch = "compute_89";
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_SUCCESS) << last_error();
  EXPECT_EQ(rt->runtime.options().elementwise_arch, "compute_89");
  fp8jit_runtime_destroy(rt);
  o.elementwise_arch = "";  // the default, as NULL
  ASSERT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_SUCCESS) << last_error();
  EXPECT_EQ(rt->runtime.options().elementwise_arch, "");
  fp8jit_runtime_destroy(rt);
  o.struct_size = offsetof(fp8jit_runtime_options, elementwise_arch);
  o.elementwise_arch = reinterpret_cast<const char*>(0x1);  // past the 0.1 struct: never read
  o.pdl = 1;
  ASSERT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_SUCCESS) << last_error();
  EXPECT_EQ(rt->runtime.options().elementwise_arch, "");
  EXPECT_TRUE(rt->runtime.pdl());
  fp8jit_runtime_destroy(rt);
}

// shipped_tuning_dir: NULL keeps the rows installed with the library, "" turns them off, a folder
// replaces them; a caller built before the field (struct_size ending at elementwise_arch) gets the
// default, the bytes past its struct never read.
TEST(CApiServing, ShippedTuningDirAndTheLayoutBeforeIt) {
  fp8jit_runtime_options o;
  fp8jit_runtime_options_init(&o);
  EXPECT_EQ(o.shipped_tuning_dir, nullptr);
  const std::string installed = fp8jit::RuntimeOptions{}.shipped_tuning_dir;
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_SUCCESS) << last_error();
  EXPECT_EQ(rt->runtime.options().shipped_tuning_dir, installed);
  fp8jit_runtime_destroy(rt);
  for (const char* dir : {"", "/tmp/fp8jit-rows-elsewhere"}) {
    o.shipped_tuning_dir = dir;
    ASSERT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_SUCCESS) << last_error();
    EXPECT_EQ(rt->runtime.options().shipped_tuning_dir, dir);
    fp8jit_runtime_destroy(rt);
  }
  o.struct_size = offsetof(fp8jit_runtime_options, shipped_tuning_dir);
  o.shipped_tuning_dir = reinterpret_cast<const char*>(0x1);  // past that struct: never read
  o.elementwise_arch = "compute_89";
  ASSERT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_SUCCESS) << last_error();
  EXPECT_EQ(rt->runtime.options().shipped_tuning_dir, installed);
  EXPECT_EQ(rt->runtime.options().elementwise_arch, "compute_89");
  fp8jit_runtime_destroy(rt);
  o.struct_size = offsetof(fp8jit_runtime_options, shipped_tuning_dir) - 1;  // no layout of ours
  EXPECT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(rt, nullptr);
  EXPECT_NE(last_error().find("options->struct_size"), std::string::npos) << last_error();
}

// A block-scaled 256x512x1024 GEMM's arguments with made-up aligned addresses: selection reads
// only the pointers' alignment.
fp8jit_gemm_args select_args() {
  fp8jit_gemm_args g;
  fp8jit_gemm_args_init(&g);
  g.m = 256, g.n = 512, g.k = 1024;
  g.a = reinterpret_cast<void*>(1 << 20), g.b = reinterpret_cast<void*>(2 << 20);
  g.d = reinterpret_cast<void*>(3 << 20);
  g.scale_a = reinterpret_cast<float*>(4 << 20), g.scale_b = reinterpret_cast<float*>(5 << 20);
  EXPECT_EQ(
      fp8jit_scale_count(FP8JIT_GRANULARITY_GROUP128, g.scale_a_layout, g.m, g.k, &g.scale_a_size),
      FP8JIT_SUCCESS);
  EXPECT_EQ(
      fp8jit_scale_count(FP8JIT_GRANULARITY_BLOCK128, g.scale_b_layout, g.n, g.k, &g.scale_b_size),
      FP8JIT_SUCCESS);
  return g;
}

// A shipped_tuning_dir that holds no rows (a folder that is not there, a file, a path far longer
// than any the system takes): the runtime is made, selects what a runtime without rows selects,
// and creates nothing at that path.
TEST(CApiServing, ShippedTuningDirWithoutRowsSelectsTheHeuristic) {
  const std::string missing = ::testing::TempDir() + "fp8jit_no_rows_here";
  std::filesystem::remove_all(missing);
  const std::string huge(100000, 'd');
  const std::string file = std::string(FP8JIT_SOURCE_DIR) + "/README.md";
  fp8jit_runtime_options o;
  fp8jit_runtime_options_init(&o);
  o.shipped_tuning_dir = "";
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_SUCCESS) << last_error();
  const fp8jit_gemm_args g = select_args();
  char none[256];
  ASSERT_EQ(fp8jit_gemm_select(rt, &g, none, sizeof none), FP8JIT_SUCCESS) << last_error();
  fp8jit_runtime_destroy(rt);
  for (const std::string& dir : {missing, huge, file}) {
    o.shipped_tuning_dir = dir.c_str();
    ASSERT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_SUCCESS) << last_error();
    char name[256];
    ASSERT_EQ(fp8jit_gemm_select(rt, &g, name, sizeof name), FP8JIT_SUCCESS) << last_error();
    EXPECT_STREQ(name, none) << dir.substr(0, 80);
    fp8jit_runtime_destroy(rt);
  }
  EXPECT_FALSE(std::filesystem::exists(missing));
}

// PDL from the options, then switched per runtime; a value other than 0 or 1, or no runtime, is
// refused and leaves the setting as it was.
TEST(CApiServing, PdlFromOptionsAndSetter) {
  fp8jit_runtime_options o;
  fp8jit_runtime_options_init(&o);
  o.pdl = 1;
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_options(&o, &rt), FP8JIT_SUCCESS) << last_error();
  EXPECT_TRUE(rt->runtime.pdl());
  EXPECT_EQ(fp8jit_runtime_set_pdl(rt, 0), FP8JIT_SUCCESS) << last_error();
  EXPECT_FALSE(rt->runtime.pdl());
  for (const int bad : {2, -1, 1 << 30}) {
    EXPECT_EQ(fp8jit_runtime_set_pdl(rt, bad), FP8JIT_ERROR_INVALID_ARGUMENT);
    EXPECT_NE(last_error().find("invalid enabled = " + std::to_string(bad) + ": 0 or 1"), std::string::npos)
        << last_error();
    EXPECT_FALSE(rt->runtime.pdl());
  }
  EXPECT_EQ(fp8jit_runtime_set_pdl(rt, 1), FP8JIT_SUCCESS) << last_error();
  EXPECT_TRUE(rt->runtime.pdl());
  fp8jit_runtime_destroy(rt);
  EXPECT_EQ(fp8jit_runtime_set_pdl(nullptr, 1), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("runtime"), std::string::npos) << last_error();
}

TEST(CApiServing, PrecompileModelCompilesItsKernelsOnce) {
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_cache_dir(nullptr, &rt), FP8JIT_SUCCESS) << last_error();
  fp8jit_gemm_args problem;
  fp8jit_gemm_args_init(&problem);
  const char* config = R"({"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2048,
    "num_attention_heads": 8, "num_key_value_heads": 2})";
  const int64_t ms[] = {1, 64};
  size_t kernels = 0;
  ASSERT_EQ(fp8jit_precompile_model(rt, config, &problem, ms, 2, 1, &kernels), FP8JIT_SUCCESS)
      << last_error();
  fp8jit_cache_stats stats;
  ASSERT_EQ(fp8jit_runtime_cache_stats(rt, &stats), FP8JIT_SUCCESS);
  EXPECT_GE(kernels, 2u);
  EXPECT_EQ(stats.compiles, kernels);
  EXPECT_EQ(fp8jit_precompile_model(rt, R"({"model_type": "bert"})", &problem, ms, 2, 1, nullptr),
            FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("bert"), std::string::npos) << last_error();
  EXPECT_EQ(fp8jit_precompile_model(rt, nullptr, &problem, ms, 2, 1, nullptr),
            FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(fp8jit_precompile_model(rt, config, &problem, ms, 0, 1, nullptr),
            FP8JIT_ERROR_INVALID_ARGUMENT);
  fp8jit_runtime_destroy(rt);
}

TEST(CApiServing, LogCallbackAndLevel) {
  EXPECT_EQ(fp8jit_set_log_level(9), FP8JIT_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(last_error().find("log level = 9"), std::string::npos) << last_error();
  int calls = 0;
  fp8jit_set_log_callback([](int, const char*, void* user) { ++*static_cast<int*>(user); }, &calls);
  EXPECT_EQ(fp8jit_set_log_level(2), FP8JIT_SUCCESS);
  fp8jit_runtime* rt = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_cache_dir(nullptr, &rt),
            FP8JIT_SUCCESS);  // sets level 1 (its options)
  EXPECT_EQ(fp8jit_set_log_level(2), FP8JIT_SUCCESS);
  fp8jit_gemm_args problem;
  fp8jit_gemm_args_init(&problem);
  const int64_t mnk[] = {64, 256, 512};
  ASSERT_EQ(fp8jit_gemm_precompile(rt, &problem, mnk, 1), FP8JIT_SUCCESS) << last_error();
  EXPECT_GE(calls, 1);  // the compile, at info
  fp8jit_set_log_callback(nullptr, nullptr);
  EXPECT_EQ(fp8jit_set_log_level(1), FP8JIT_SUCCESS);
  fp8jit_runtime_destroy(rt);
}

}  // namespace
