// A Runtime is configured by its RuntimeOptions alone: with every FP8JIT_* variable set to
// something else, a runtime built from explicit options logs, compiles in parallel, caches and
// sums split-K as the options say; RuntimeOptions::from_settings() is the one bridge from the
// environment. Settings are read once per process, so the checks run in a child process started
// with that environment. No GPU needed.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/log.hpp"
#include "common/settings.hpp"
#include "fp8jit/fp8jit.h"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "runtime/ops/gemm.hpp"
#include "tests/common/child_process.hpp"

namespace fp8jit::test {
namespace {

constexpr const char* kChildDir = "FP8JIT_OPTIONS_CHILD_DIR";

// What the child's environment says; every value differs from the explicit options below.
const std::vector<std::string> kEnvironment = {
    "FP8JIT_LOG=0",        "FP8JIT_JOBS=4",        "FP8JIT_SPLIT_SUM=workspace", "FP8JIT_TUNE=off",
    "FP8JIT_DISK_CACHE=0", "FP8JIT_KEEP_SOURCE=1", "FP8JIT_FFMA_REUSE=0",
};

RuntimeOptions explicit_options(const std::string& dir) {
  RuntimeOptions o;
  o.cache_dir = dir + "/cache";
  o.db_path = dir + "/tuning.sqlite";
  o.tune = TunePolicy::cached;
  o.jobs = 1;
  o.split_sum = SplitSum::cluster;
  o.keep_source = false;
  o.ffma_reuse = true;
  o.log_level = 2;
  return o;
}

TEST(RuntimeOptions, ExplicitOptionsWinOverTheEnvironment) {
  char tmpl[] = "/tmp/fp8jit-options-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::vector<std::string> env = kEnvironment;
  env.push_back(std::string(kChildDir) + "=" + tmpl);
  EXPECT_EQ(run_self("RuntimeOptionsChild.ExplicitOptionsWinOverTheEnvironment", env), 0)
      << "the child process failed (see its output above)";
  std::filesystem::remove_all(tmpl);
}

// Runs only as the child of the test above (FP8JIT_OPTIONS_CHILD_DIR set).
TEST(RuntimeOptionsChild, ExplicitOptionsWinOverTheEnvironment) {
  const char* dir = std::getenv(kChildDir);
  if (!dir)
    GTEST_SKIP() << "runs as the child of RuntimeOptions.ExplicitOptionsWinOverTheEnvironment";
  // The bridge: every setting the runtime uses, from the environment.
  const RuntimeOptions env = RuntimeOptions::from_settings();
  EXPECT_EQ(env.log_level, 0);
  EXPECT_EQ(env.jobs, 4);
  EXPECT_EQ(env.split_sum, SplitSum::workspace);
  EXPECT_EQ(env.tune, TunePolicy::off);
  EXPECT_EQ(env.cache_dir, "");  // FP8JIT_DISK_CACHE=0
  EXPECT_TRUE(env.keep_source);
  EXPECT_FALSE(env.ffma_reuse);

  const RuntimeOptions o = explicit_options(dir);
  Runtime rt(o);
  EXPECT_EQ(log::level(), 2);
  EXPECT_EQ(rt.options().split_sum, SplitSum::cluster);
  EXPECT_EQ(rt.options().jobs, 1);
  EXPECT_EQ(rt.cache_dir(), o.cache_dir);

  // Log level 2 and the disk cache without kept sources, where the environment says quiet, no disk
  // cache and keep sources.
  testing::internal::CaptureStderr();
  rt.compile(default_quantize_spec(QuantizeProblem{}));
  const std::string logged = testing::internal::GetCapturedStderr();
  EXPECT_NE(logged.find("compiled in"), std::string::npos) << logged;
  EXPECT_GE(rt.cache_stats().disk_writes, 1u);
  for (const auto& e : std::filesystem::recursive_directory_iterator(o.cache_dir))
    EXPECT_NE(e.path().extension(), ".cu") << e.path();

  // One compile thread (the options' jobs; precompile's 0 means the runtime's), where the
  // environment says four: every kernel compiles on the calling thread.
  const std::vector<GemmShape> shapes = {{64, 2112, 7168}, {4096, 7168, 7168}, {128, 24576, 1536}};
  std::mutex mutex;
  std::vector<std::thread::id> threads;
  const std::size_t compiled =
      rt.precompile(GemmProblem{}, shapes, 0, [&](std::size_t, std::size_t, const KernelSpec&) {
        std::lock_guard<std::mutex> lock(mutex);
        threads.push_back(std::this_thread::get_id());
      });
  EXPECT_GE(compiled, 2u);
  ASSERT_EQ(threads.size(), compiled);
  for (const std::thread::id& t : threads) EXPECT_EQ(t, std::this_thread::get_id());

  // The C ABI: a runtime with a cache directory has the options' defaults, whatever the
  // environment.
  fp8jit_runtime* c = nullptr;
  ASSERT_EQ(fp8jit_runtime_create_with_cache_dir("", &c), FP8JIT_SUCCESS);
  EXPECT_EQ(log::level(), RuntimeOptions{}.log_level);
  fp8jit_runtime_destroy(c);
  ASSERT_EQ(fp8jit_runtime_create(&c), FP8JIT_SUCCESS);
  EXPECT_EQ(log::level(), 0);  // from the settings
  fp8jit_runtime_destroy(c);
}

// The split-K decisions take the runtime's split_sum as an argument: SplitSum::workspace keeps
// the heuristic's count and sums through the workspace even where clusters would fit.
TEST(RuntimeOptions, SplitSumIsPassedToTheSplitKDecisions) {
  LoadedKernel k;
  k.gemm_config = {64, 64, 6, 8};
  for (int s = 2; s < static_cast<int>(k.split_clusters.size()); ++s) k.split_clusters[s] = 132 / s;
  GemmArgs a;
  a.m = 64;
  a.n = 2112;
  a.k = 7168;  // 33 tiles: 4 ranges on 132 SMs, and 33 clusters of 4 fit
  EXPECT_EQ(ops::split_count(k, a, 132, SplitSum::cluster), 4);
  EXPECT_TRUE(ops::splits_in_cluster(k, a, 4, SplitSum::cluster));
  EXPECT_EQ(ops::workspace_bytes(k, a, 4, SplitSum::cluster), 0u);
  k.split_clusters[4] = 32;  // one short: clusters would take 3 ranges, the workspace keeps 4
  EXPECT_EQ(ops::split_count(k, a, 132, SplitSum::cluster), 3);
  EXPECT_EQ(ops::split_count(k, a, 132, SplitSum::workspace), 4);
  EXPECT_FALSE(ops::splits_in_cluster(k, a, 3, SplitSum::workspace));
  EXPECT_EQ(ops::workspace_bytes(k, a, 3, SplitSum::workspace), 3u * 64 * 2112 * 4);
}

}  // namespace
}  // namespace fp8jit::test
