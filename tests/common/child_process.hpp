// Runs the current test binary again as a child process: for behaviour fixed once per process
// (settings read on first use, a second process reading what the first one stored).
#pragma once

#include <string>
#include <vector>

namespace fp8jit::test {

// Starts this executable with `--gtest_filter=<gtest_filter>` and the environment `env` (NAME=VALUE
// entries) plus the parent's LD_LIBRARY_PATH and CUDA_* variables and a minimal PATH; waits for
// it. Returns its exit status, or -1 if it could not start or did not exit normally. The child's
// output goes to the parent's stdout and stderr.
int run_self(const std::string& gtest_filter, std::vector<std::string> env);

}  // namespace fp8jit::test
