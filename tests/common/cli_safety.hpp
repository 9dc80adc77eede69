// The fixture of the CLI's bad-input tests: each test runs `fp8jit` as a user would, in a working
// folder of its own (kept apart from the captured output) with its own database and cache, and
// checks that a refused command fails cleanly and leaves that folder exactly as it was.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/cli_run.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit::test {

class CliSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(work_);
    how_.cwd = work_;
    how_.timeout_s = 60;
    how_.env = fmt::format("FP8JIT_DB={}/work/db.sqlite FP8JIT_CACHE_DIR={}/cache", root_, root_);
  }
  CliResult run(const std::vector<std::string>& args) { return run_cli(args, root_, how_); }
  std::string write(const std::string& name, const std::string& text) {
    std::ofstream(work_ + "/" + name, std::ios::binary) << text;
    return work_ + "/" + name;
  }
  // Fails with `status`, one "fp8jit <command>: " prefix, each needle in stderr, nothing written.
  void expect_refused(const std::vector<std::string>& args, int status,
                      const std::vector<std::string>& needles) {
    const auto before = snapshot(work_);
    const CliResult r = run(args);
    const std::string what = fmt::format("fp8jit {}", fmt::join(args, " "));
    EXPECT_FALSE(r.timed_out) << what << ": hung";
    EXPECT_TRUE(r.exited) << what << ": killed by a signal";
    EXPECT_EQ(r.status, status) << what << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.rfind("fp8jit", 0), 0u) << what << "\nstderr: " << r.err;
    EXPECT_EQ(r.err.find(": fp8jit "), std::string::npos) << what << ": prefix twice in " << r.err;
    for (const auto& n : needles)
      EXPECT_NE(r.err.find(n), std::string::npos) << what << ": '" << n << "' not in " << r.err;
    EXPECT_EQ(snapshot(work_), before) << what << ": the working folder changed";
  }

  TempDir tmp_{"fp8jit_cli_safety"};
  // The commands' working folder, kept apart from the captured output.
  std::string root_ = tmp_.path(), work_ = root_ + "/work";
  CliRun how_;
};

}  // namespace fp8jit::test
