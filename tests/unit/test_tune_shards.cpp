// `fp8jit tune --shard i/n` and the launcher's rank: the shards of a shape list are disjoint and
// together the whole list, in its order; bad splits are refused. (--dry-run: no GPU needed.)
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/cli_run.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit {
namespace {

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

std::vector<std::string> dry_run(const std::string& scratch, const std::vector<std::string>& extra,
                                 const std::string& env = "",
                                 const std::string& suite = "deepseek-v3") {
  std::vector<std::string> args = {"tune",      "--suite", suite,
                                   "--dry-run", "--db",    scratch + "/db.sqlite"};
  args.insert(args.end(), extra.begin(), extra.end());
  const test::CliResult r = test::run_cli(args, scratch, {.env = env});
  EXPECT_EQ(r.status, 0) << r.err;
  return lines(r.out);
}

TEST(TuneShards, ShardsPartitionTheShapeList) {
  test::TempDir dir("fp8jit_shards");
  for (const char* suite : {"deepseek-v3", "deepseek-v3-moe"}) {
    const std::vector<std::string> all = dry_run(dir.path(), {}, "", suite);
    ASSERT_GT(all.size(), 4u) << suite;
    for (int n : {2, 3, 5}) {
      std::vector<std::string> joined(all.size());
      for (int i = 0; i < n; ++i) {
        const std::vector<std::string> part = dry_run(
            dir.path(), {"--shard", std::to_string(i) + "/" + std::to_string(n)}, "", suite);
        for (std::size_t j = 0; j < part.size(); ++j)
          joined.at(i + j * n) = part[j];  // every n-th from i
      }
      EXPECT_EQ(joined, all) << suite << " in " << n;
    }
  }
}

TEST(TuneShards, LauncherRankSplitsWithoutAnOption) {
  test::TempDir dir("fp8jit_shards");
  const std::vector<std::string> all = dry_run(dir.path(), {});
  EXPECT_EQ(dry_run(dir.path(), {}, "SLURM_PROCID=1 SLURM_NTASKS=2"),
            dry_run(dir.path(), {"--shard", "1/2"}));
  EXPECT_EQ(dry_run(dir.path(), {}, "OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=3"),
            dry_run(dir.path(), {"--shard", "0/3"}));
  // --shard wins over the launcher.
  EXPECT_EQ(dry_run(dir.path(), {"--shard", "0/1"}, "SLURM_PROCID=1 SLURM_NTASKS=2"), all);
}

TEST(TuneShards, BadSplitsAreRefused) {
  test::TempDir dir("fp8jit_shards");
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--shard", "2/2"}, "invalid --shard = 2/2"}, {{"--shard", "1"}, "invalid --shard = 1"},
      {{"--shard", "-1/2"}, "invalid --shard"},      {{"--shard", "0/0"}, "invalid --shard"},
      {{"--shard", "a/b"}, "invalid --shard"},
  };
  for (const auto& [extra, needle] : cases) {
    std::vector<std::string> args = {"tune", "--suite", "deepseek-v3", "--dry-run"};
    args.insert(args.end(), extra.begin(), extra.end());
    const test::CliResult r = test::run_cli(args, dir.path());
    EXPECT_EQ(r.status, 1) << extra[1];
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  }
  const test::CliResult r = test::run_cli({"tune", "--suite", "deepseek-v3", "--dry-run"},
                                          dir.path(), {.env = "SLURM_PROCID=4 SLURM_NTASKS=4"});
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("SLURM_PROCID = 4"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace fp8jit
