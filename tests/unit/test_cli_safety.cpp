// The CLI's promises on bad input, as a user meets them: --help on every command, typed options
// with their ranges (the same rules as the C ABI), strict shape files, one error prefix with
// control bytes escaped, GPU commands that check everything else first, and failing commands
// that leave the folder they run in exactly as it was.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/jit/driver.hpp"
#include "tests/common/cli_safety.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;
using test::CliResult;

const std::string kQuantJson =
    R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128","transpose":0},)"
    R"("config":{"vec":8,"threads":256,"unroll":2}})";

using test::CliSafety;

const std::vector<std::string> kCommands = {"info",   "list",       "emit",     "compile",    "compile-all",
                                            "quantize", "dequantize", "gemm",     "select-gemm", "tune",
                                            "precompile", "demo",     "bench",    "db"};

TEST_F(CliSafety, EverySubcommandHasHelp) {
  for (const std::string& cmd : kCommands) {
    const CliResult r = run({cmd, "--help"});
    EXPECT_EQ(r.status, 0) << cmd << ": " << r.err;
    EXPECT_NE(r.out.find("Usage: fp8jit " + cmd), std::string::npos) << cmd << ":\n" << r.out;
    EXPECT_NE(r.out.find("--help"), std::string::npos) << cmd;
  }
  // Each lists its own options.
  EXPECT_NE(run({"gemm", "--help"}).out.find("--fast-accum"), std::string::npos);
  EXPECT_NE(run({"gemm", "--help"}).out.find("--scale-layout-a"), std::string::npos);
  EXPECT_NE(run({"gemm", "--help"}).out.find("--bias"), std::string::npos);
  EXPECT_NE(run({"tune", "--help"}).out.find("--top-k"), std::string::npos);
  EXPECT_NE(run({"compile", "--help"}).out.find("--cubin"), std::string::npos);
  for (const char* sub : {"list", "show", "export", "import", "prune", "rebuild"}) {
    const CliResult r = run({"db", sub, "--help"});
    EXPECT_EQ(r.status, 0) << sub;
    EXPECT_NE(r.out.find("--db"), std::string::npos) << sub << ":\n" << r.out;
  }
  EXPECT_NE(run({"db", "prune", "--help"}).out.find("--space-hash"), std::string::npos);
  const CliResult v = run({"--version"});
  EXPECT_EQ(v.status, 0);
  EXPECT_EQ(v.out.rfind("fp8jit 0.", 0), 0u) << v.out;
}

TEST_F(CliSafety, IntegersAreTypedAndRanged) {
  expect_refused({"select-gemm", "--m", "99999999999999999999"}, 2, {"--m", "99999999999999999999", "out of range"});
  expect_refused({"select-gemm", "--k", "100"}, 2, {"--k", "100", "multiple of 16"});
  expect_refused({"select-gemm", "--m", "0"}, 2, {"--m", "must be positive"});
  expect_refused({"select-gemm", "--n", "2147483648"}, 2, {"--n", "2147483648", "2^31-1"});
  expect_refused({"select-gemm", "--n", "12abc"}, 2, {"--n", "\"12abc\" is not an integer"});
  expect_refused({"select-gemm", "--n", ""}, 2, {"--n"});
  expect_refused({"precompile", "--suite", "deepseek-v3", "--jobs", "4294967297"}, 2,
                 {"--jobs", "4294967297 is out of range [1, 1024]"});
  expect_refused({"compile-all", "--jobs", "1099511627776"}, 2, {"--jobs", "1099511627776 is out of range"});
  expect_refused({"db", "show", "--m", "abc"}, 2, {"--m", "\"abc\" is not an integer"});
  expect_refused({"quantize", "--k", "-3"}, 2, {"--k", "must be positive"});
  expect_refused({"gemm", "--iters", "0"}, 2, {"--iters", "0 is out of range"});
  expect_refused({"tune", "--suite", "deepseek-v3", "--top-k", "-1"}, 2, {"--top-k"});
  // The accepted edge of each range still answers.
  const CliResult ok = run({"select-gemm", "--m", "2147483647", "--n", "16", "--k", "16"});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("\"family\":\"gemm\""), std::string::npos);
}

TEST_F(CliSafety, ChoicesAndCombinations) {
  expect_refused({"gemm", "--scale", "blockwise"}, 2, {"--scale", "blockwise", "block"});
  expect_refused({"gemm", "--scale-layout-a", "col_major"}, 2,
                 {"--scale-layout-a", "col_major", "col_major_tma", "row_major"});
  expect_refused({"gemm", "--scale-layout-a", ""}, 2, {"--scale-layout-a"});
  expect_refused({"gemm", "--scale-layout-a", std::string(5000, 'x')}, 2, {"--scale-layout-a"});
  expect_refused({"gemm", "--scale-layout-a"}, 2, {"--scale-layout-a"});
  expect_refused({"tune", "--suite", "deepseek-v3", "--shapes", "x.csv"}, 2, {"--suite", "--shapes", "excludes"});
  expect_refused({"tune"}, 1, {"--suite/--shapes", "<missing>"});
  expect_refused({"bench", "--suite", "deepseek-v3", "--shapes", "x.csv"}, 2, {"excludes"});
  expect_refused({"select-gemm", "--scale", "block", "--fast-accum"}, 1, {"--fast-accum", "tensor and rowwise"});
  expect_refused({"gemm", "--layout", "masked", "--groups", "4", "--bias"}, 2,
                 {"--bias", "no bias"});
  // --bias is a flag and takes no value: any value, short or huge, is refused (not read as a
  // count); an empty one is the flag alone.
  for (const std::string& value :
       {std::string("maybe"), std::string("2x"), std::string("1"), std::string(5000, 'x')}) {
    expect_refused({"select-gemm", "--bias=" + value}, 2, {"bias", "flag override"});
    expect_refused({"gemm", "--bias=" + value}, 2, {"bias", "flag override"});
    expect_refused({"tune", "--suite", "deepseek-v3", "--bias=" + value}, 2,
                   {"bias", "flag override"});
    expect_refused({"precompile", "--suite", "deepseek-v3", "--bias=" + value}, 2,
                   {"bias", "flag override"});
  }
  const CliResult empty = run({"select-gemm", "--bias="});
  EXPECT_EQ(empty.status, 0) << empty.err;
  EXPECT_NE(empty.out.find("\"bias\":1"), std::string::npos) << empty.out;
  expect_refused({"db", "prune", "--op", "gemm"}, 2, {"--op", "requires --space-hash"});
  expect_refused({"db", "prune", "--space-hash", "abc"}, 2, {"--space-hash", "requires --op"});
  expect_refused({"db"}, 2, {"fp8jit db: ", "subcommand"});
  expect_refused({"db", "vacuum"}, 2, {"fp8jit db: unknown command \"vacuum\""});
  expect_refused({"db", "import"}, 2, {"--file is required"});
}

TEST_F(CliSafety, ShapesFilesAreStrict) {
  const std::string good = write("good.csv", "# comment\nm,n,k\n64,2112,7168\n\n128,4096,7168\r\n");
  const CliResult dry = run({"bench", "--shapes", good, "--dry-run"});
  EXPECT_EQ(dry.status, 0) << dry.err;
  const std::vector<std::pair<std::string, std::vector<std::string>>> bad = {
      {"m,n,k\n64,2112,7168\n64,2112\n", {":3", "has 2 fields"}},
      {"m,n,k\n64,2112,7168\n64,x,7168\n", {":3", "\"64,x,7168\" is not an m,n,k row"}},
      {"m,n,k\n64,2112,100\n", {":2", "multiple of 16"}},
      {"64,2112,7168,5\n", {":1", "has 4 fields"}},
      {"m,n,k\n-64,2112,7168\n", {":2", "must be positive"}},
      {"# nothing\n", {"no m,n,k rows"}},
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    const std::string f = write(fmt::format("bad{}.csv", i), bad[i].first);
    for (const char* cmd : {"bench", "tune", "precompile"}) {
      std::vector<std::string> needles = bad[i].second;
      needles.push_back(f);
      expect_refused({cmd, "--shapes", f}, 1, needles);
    }
    fs::remove(f);
  }
  expect_refused({"precompile", "--shapes", work_}, 1, {"is a directory"});
}

TEST_F(CliSafety, GpuCommandsCheckEverythingElseFirst) {
  if (driver::available()) GTEST_SKIP() << "a GPU is present";
  const std::string bad = write("bad.csv", "m,n,k\n64,2112\n");
  expect_refused({"tune", "--shapes", bad}, 1, {"has 2 fields"});  // the typo, not the missing GPU
  expect_refused({"bench", "--shapes", bad}, 1, {"has 2 fields"});
  expect_refused({"gemm", "--config", "{\"tile\":1}"}, 1, {"--config key = tile"});
  // With valid input: one line saying a GPU is needed, nothing written (bench's results folder too).
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"tune", "--suite", "deepseek-v3"}, {"bench", "--suite", "deepseek-v3"},
        {"bench", "--suite", "deepseek-v3", "--out", "results"}, {"gemm"}, {"quantize"}, {"dequantize"}}) {
    expect_refused(args, 1, {"needs a GPU"});
    const CliResult r = run(args);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST_F(CliSafety, FailingCommandsWriteNothing) {
  // --ptx cannot be written: the cubin must not be left behind either.
  fs::create_directories(work_ + "/taken.ptx");
  expect_refused({"compile", "--spec", kQuantJson, "--cubin", "out.cubin", "--ptx", "taken.ptx"}, 1,
                 {"taken.ptx", "directory"});
  expect_refused({"compile", "--spec", kQuantJson, "--cubin", "out.cubin", "--ptx", "missing/dir/k.ptx"}, 1,
                 {"missing/dir"});
  fs::remove(work_ + "/taken.ptx");
  // Read-only db commands never create the database.
  for (const char* sub : {"list", "show", "prune", "rebuild"}) {
    const CliResult r = run({"db", sub});
    EXPECT_EQ(r.status, 0) << sub << ": " << r.err;
    EXPECT_NE(r.out.find("no tuning database at"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(work_ + "/db.sqlite")) << sub;
  }
  expect_refused({"db", "export", "--file", "x.json"}, 1, {"nothing to export"});
  expect_refused({"db", "import", "--file", "absent.json"}, 1, {"--file", "absent.json", "no such file"});
  EXPECT_FALSE(fs::exists(work_ + "/db.sqlite"));
}

TEST_F(CliSafety, SpecialFilesAreNamedNotRead) {
  ASSERT_EQ(::mkfifo((work_ + "/fifo").c_str(), 0644), 0);
  expect_refused({"emit", "--spec", "fifo"}, 1, {"--spec", "FIFO"});
  expect_refused({"precompile", "--shapes", "fifo"}, 1, {"--shapes", "FIFO"});
  expect_refused({"db", "import", "--file", "fifo"}, 1, {"--file", "FIFO"});
  expect_refused({"emit", "--spec", work_}, 1, {"--spec", "is a directory"});
  expect_refused({"db", "import", "--file", work_}, 1, {"--file", "is a directory"});
  expect_refused({"emit", "--spec", "[1,2]"}, 1, {"object"});
  expect_refused({"compile", "--spec", kQuantJson, "--cubin", "fifo"}, 1, {"fifo", "FIFO"});
}

TEST_F(CliSafety, EchoedArgumentsAreEscaped) {
  const CliResult r = run({"list", "--family", "x\x1b[31mred\x07"});
  EXPECT_EQ(r.status, 2);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\x07'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\\x1b[31mred\\x07"), std::string::npos) << r.err;
  const CliResult s = run({"emit", "--spec", "no\x1b]0;title\x07such"});
  EXPECT_EQ(s.err.find('\x1b'), std::string::npos) << s.err;
}

// A newcomer's first command finishes in seconds and says what it showed; the second run comes
// from the disk cache.
TEST_F(CliSafety, DemoWithoutGpuIsQuickAndCached) {
  if (driver::available()) GTEST_SKIP() << "a GPU is present";
  how_.timeout_s = 600;
  const CliResult first = run({"demo"});
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.out.find("No GPU here"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("#include"), std::string::npos) << "the generated source is shown";
  EXPECT_NE(first.err.find("compiling: "), std::string::npos) << "progress on stderr: " << first.err;
  EXPECT_EQ(first.err.find('\r'), std::string::npos) << "no \\r when stderr is not a terminal";
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult second = run({"demo"});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(second.status, 0) << second.err;
  EXPECT_NE(second.out.find(" 0 compiled by NVRTC"), std::string::npos) << second.out;
  EXPECT_LT(s, 10.0);
}

}  // namespace
}  // namespace fp8jit
