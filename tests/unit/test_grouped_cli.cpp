// Grouped (mixture-of-experts) GEMMs in the CLI without a GPU: `gemm` and `select-gemm` options
// (--layout, --groups, --expected-m, --db) wrong, empty, huge or missing are usage errors naming
// the option, with nothing written; grouped shape files are strict, row by row; the bundled MoE
// suite parses and stays within its bounds; bench and precompile refuse grouped suites with a
// pointer to what runs them; select-gemm prints a grouped spec that compiles.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fp8jit/args.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "runtime/jit/driver.hpp"
#include "tests/common/cli_safety.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;
using test::CliResult;

class GroupedCli : public test::CliSafety {};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST_F(GroupedCli, GroupedOptionsAreTypedAndRanged) {
  for (const std::string cmd : {"gemm", "select-gemm"}) {
    const std::vector<std::string> masked = {cmd, "--layout", "masked", "--m", "256"};
    expect_refused(with(masked, {"--groups", "abc"}), 2, {"--groups", "\"abc\" is not an integer"});
    expect_refused(with(masked, {"--groups", ""}), 2, {"--groups"});
    expect_refused(with(masked, {"--groups", "0"}), 2,
                   {"--groups", "0 is out of range [1, 65536]"});
    expect_refused(with(masked, {"--groups", "65537"}), 2,
                   {"--groups", "65537 is out of range [1, 65536]"});
    expect_refused(with(masked, {"--groups", "99999999999999999999"}), 2,
                   {"--groups", "out of range"});
    expect_refused(with(masked, {"--groups", "4", "--expected-m", "x"}), 2,
                   {"--expected-m", "\"x\" is not an integer"});
    expect_refused(with(masked, {"--groups", "4", "--expected-m", ""}), 2, {"--expected-m"});
    expect_refused(with(masked, {"--groups", "4", "--expected-m", "99999999999999999999"}), 2,
                   {"--expected-m", "out of range"});
    expect_refused(with(masked, {"--groups", "4", "--expected-m", "257"}), 2,
                   {"--expected-m", "257 is out of range [0, 256]"});
    expect_refused({cmd, "--layout", "diagonal", "--groups", "4"}, 2,
                   {"--layout", "diagonal", "contiguous"});
    expect_refused({cmd, "--layout", "", "--groups", "4"}, 2, {"--layout"});
  }
}

TEST_F(GroupedCli, CombinationsAreUsageErrorsNamingTheOption) {
  for (const std::string cmd : {"gemm", "select-gemm"}) {
    expect_refused({cmd, "--layout", "masked"}, 2, {"--groups", "required with --layout masked"});
    expect_refused({cmd, "--layout", "contiguous", "--m", "64"}, 2,
                   {"--groups", "required with --layout contiguous"});
    expect_refused({cmd, "--groups", "4"}, 2,
                   {"--groups", "needs a grouped layout", "--layout contiguous"});
    expect_refused({cmd, "--groups", "4", "--layout", "dense"}, 2,
                   {"--groups", "needs a grouped layout"});
    expect_refused({cmd, "--expected-m", "64"}, 2, {"--expected-m", "grouped"});
    expect_refused({cmd, "--layout", "masked", "--groups", "65536", "--m", "65536"}, 2,
                   {"--groups/--m", "2^31"});
    expect_refused({cmd, "--layout", "contiguous", "--groups", "65536", "--n", "65536"}, 2,
                   {"--groups/--n", "2^31"});
    expect_refused({cmd, "--layout", "contiguous", "--groups", "4", "--scale", "group"}, 2,
                   {"--scale", "tensor, rowwise or block"});
    expect_refused({cmd, "--layout", "masked", "--groups", "4", "--fast-accum"}, 1,
                   {"--fast-accum"});
  }
  expect_refused({"select-gemm", "--db", ""}, 2, {"--db", "must not be empty"});
  expect_refused({"gemm", "--db", "x.sqlite"}, 2, {"--db"});  // only select-gemm reads a database
}

TEST_F(GroupedCli, ValidGroupedCallsNeedAGpuAndSayOnlyThat) {
  if (driver::available()) GTEST_SKIP() << "a GPU is present";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"gemm", "--layout", "contiguous", "--groups", "8", "--m", "4096"},
        {"gemm", "--layout", "masked", "--groups", "4", "--m", "256", "--expected-m", "64",
         "--scale", "tensor"},
        {"select-gemm", "--layout", "masked", "--groups", "4", "--m", "256", "--db",
         "db.sqlite"}}) {
    expect_refused(args, 1, {"needs a GPU"});
    const CliResult r = run(args);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST_F(GroupedCli, SelectGemmPrintsTheGroupedSpecAndItCompiles) {
  const CliResult r = run({"select-gemm", "--layout", "masked", "--groups", "32", "--m", "256",
                           "--n", "4096", "--k", "7168", "--expected-m", "64"});
  ASSERT_EQ(r.status, 0) << r.err;
  const KernelSpec spec = spec_from_json(r.out);
  GemmProblem masked;
  masked.layout = GemmLayout::masked;
  EXPECT_EQ(gemm_problem_of(spec), masked);
  EXPECT_NE(r.out.find("\"layout\":\"masked\""), std::string::npos) << r.out;
  if (!driver::available()) EXPECT_EQ(spec, default_grouped_gemm_spec(masked, 32, 64, 4096, 7168));
  // Contiguous without --expected-m: m / groups rows per group.
  const CliResult c = run({"select-gemm", "--layout", "contiguous", "--groups", "8", "--m", "4096",
                           "--n", "7168", "--k", "2048", "--scale", "tensor", "--out", "fp32"});
  ASSERT_EQ(c.status, 0) << c.err;
  GemmProblem contiguous{Fp8Format::e4m3, Fp8Format::e4m3, DType::fp32,           ScaleMode::tensor,
                         false,           false,           GemmLayout::contiguous};
  if (!driver::available())
    EXPECT_EQ(spec_from_json(c.out), default_grouped_gemm_spec(contiguous, 8, 512, 7168, 2048));
  how_.timeout_s = 300;
  const CliResult compiled = run({"compile", "--spec", r.out, "--cubin", "k.cubin"});
  ASSERT_EQ(compiled.status, 0) << compiled.err;
  EXPECT_GT(fs::file_size(work_ + "/k.cubin"), 1000u);
}

// The indexed layout (m_indices): its spec has tiles of at most 128 rows; m must leave each
// group's rows room to start on a multiple of 128.
TEST_F(GroupedCli, IndexedLayoutSelectsAndRefusesTooFewRows) {
  const CliResult r = run({"select-gemm", "--layout", "indexed", "--groups", "8", "--m", "4096", "--n", "4096",
                           "--k", "7168"});
  ASSERT_EQ(r.status, 0) << r.err;
  const KernelSpec spec = spec_from_json(r.out);
  EXPECT_EQ(gemm_problem_of(spec).layout, GemmLayout::indexed);
  EXPECT_LE(gemm_config_of(spec).block_m, kGemmIndexedAlignment);
  const CliResult few = run({"select-gemm", "--layout", "indexed", "--groups", "8", "--m", "1000"});
  EXPECT_EQ(few.status, 2) << few.err;
  EXPECT_NE(few.err.find("m >= 1024"), std::string::npos) << few.err;
}

const std::string kHeader = "layout,groups,m,n,k,expected_m\n";

TEST_F(GroupedCli, GroupedShapeFilesAreStrictRowByRow) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> bad = {
      {kHeader + "contiguous,8,4096,4096,7168\n", {":2", "has 5 fields"}},
      {kHeader + "dense,8,4096,4096,7168,0\n", {":2", "contiguous, masked or indexed"}},
      {kHeader + "diagonal,8,4096,4096,7168,0\n", {":2", "contiguous, masked or indexed"}},
      {kHeader + "contiguous,0,4096,4096,7168,0\n", {":2", "groups 0 is out of range [1, 65536]"}},
      {kHeader + "contiguous,65537,4096,4096,7168,0\n", {":2", "groups 65537 is out of range"}},
      {kHeader + "contiguous,x,4096,4096,7168,0\n", {":2", "groups \"x\" is not an integer"}},
      {kHeader + "contiguous,8,4096,4096,100,0\n", {":2", "multiple of 16"}},
      {kHeader + "contiguous,8,0,4096,7168,0\n", {":2", "must be positive"}},
      {kHeader + "masked,8,256,4096,7168,257\n", {":2", "expected_m 257 is out of range [0, 256]"}},
      {kHeader + "masked,8,256,4096,7168,-1\n", {":2", "expected_m -1 is out of range"}},
      {kHeader + "masked,8,256,4096,7168,99999999999999999999\n", {":2", "is not an integer"}},
      {kHeader + "masked,65536,65536,16,16,0\n", {":2", "groups*m"}},
      {kHeader + "contiguous,8,4096,4096,7168,512\n# c\ncontiguous,8,4096,4096,7168,\n",
       {":4", "is not an integer"}},
      {kHeader + "# only a comment\n", {"no grouped rows"}},
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    const std::string f = write(fmt::format("bad{}.csv", i), bad[i].first);
    std::vector<std::string> needles = bad[i].second;
    needles.push_back(f);
    expect_refused({"tune", "--shapes", f}, 1, needles);
    fs::remove(f);
  }
  // The header is what makes a file grouped: a dense file naming it later is a dense file's error.
  const std::string late = write("late.csv", "m,n,k\n64,64,64\n" + kHeader);
  expect_refused({"tune", "--shapes", late}, 1, {":3", "is not an m,n,k row"});
}

TEST_F(GroupedCli, GoodGroupedFilesAndDenseFilesStillParse) {
  const std::string good =
      write("moe.csv", "# routed experts\n" + kHeader +
                           "contiguous,8,4096,4096,7168,512\n\nmasked, 16 ,256,7168,2048,0\r\n");
  const std::string dense = write("dense.csv", "m,n,k\n64,2112,7168\n");
  if (!driver::available()) {
    expect_refused({"tune", "--shapes", good}, 1, {"needs a GPU"});
    expect_refused({"tune", "--shapes", dense}, 1, {"needs a GPU"});
    expect_refused({"tune", "--suite", "deepseek-v3-moe"}, 1, {"needs a GPU"});
  }
  expect_refused({"tune", "--shapes", good, "--scale", "group"}, 1, {"--scale", "group"});
  expect_refused({"tune", "--shapes", good, "--bias"}, 1, {"--bias", "have no bias"});
  const CliResult dry = run({"bench", "--shapes", dense, "--dry-run"});
  EXPECT_EQ(dry.status, 0) << dry.err;
}

TEST_F(GroupedCli, BenchAndPrecompileSendGroupedSuitesElsewhere) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"bench", "--suite", "deepseek-v3-moe"},
        {"bench", "--suite", "deepseek-v3-moe", "--dry-run"},
        {"bench", "--shapes", write("moe.csv", kHeader + "masked,8,128,4096,7168,16\n")}})
    expect_refused(args, 1, {"grouped", "fp8jit tune", "bench/peers/grouped_peers.py"});
  expect_refused({"precompile", "--suite", "deepseek-v3-moe"}, 1,
                 {"--suite", "grouped", "fp8jit tune"});
}

// The suite of issue 19: DeepSeek-V3's expert projections, a spread of contiguous (prefill) and
// masked (decode) rows, small enough to tune in one sitting.
TEST(GroupedSuite, DeepSeekV3MoeStaysWithinItsBounds) {
  std::ifstream in(std::string(FP8JIT_SOURCE_DIR) + "/bench/shapes/deepseek_v3_moe.csv");
  ASSERT_TRUE(in) << "bench/shapes/deepseek_v3_moe.csv";
  int contiguous = 0, masked = 0;
  bool header = false;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (!header) {
      EXPECT_EQ(line + "\n", kHeader);
      header = true;
      continue;
    }
    std::istringstream fields(line);
    std::string layout;
    std::getline(fields, layout, ',');
    std::int64_t v[5];
    for (std::int64_t& x : v) {
      std::string f;
      std::getline(fields, f, ',');
      x = std::stoll(f);
    }
    const auto [groups, m, n, k, expected] = v;
    EXPECT_TRUE((n == 4096 && k == 7168) || (n == 7168 && k == 2048)) << line;
    if (layout == "contiguous") {
      ++contiguous;
      EXPECT_TRUE(groups == 4 || groups == 8 || groups == 16 || groups == 32) << line;
      EXPECT_EQ(m, groups * expected) << line;
      EXPECT_TRUE(expected >= 128 && expected <= 8192) << line;
    } else {
      ++masked;
      EXPECT_EQ(layout, "masked");
      EXPECT_TRUE(m == 128 || m == 256 || m == 1024) << line;
      EXPECT_TRUE(expected >= 16 && expected <= 256 && expected <= m) << line;
    }
  }
  EXPECT_GT(contiguous, 0);
  EXPECT_LE(contiguous, 16);
  EXPECT_GT(masked, 0);
  EXPECT_LE(masked, 12);
}

}  // namespace
}  // namespace fp8jit
