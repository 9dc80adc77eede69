#include "tests/common/child_process.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

extern char** environ;

namespace fp8jit::test {

int run_self(const std::string& gtest_filter, std::vector<std::string> env) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  env.push_back("PATH=/usr/bin:/bin");
  for (char** e = environ; *e; ++e) {
    const std::string var(*e);
    if (var.rfind("LD_LIBRARY_PATH=", 0) == 0 || var.rfind("CUDA_", 0) == 0) env.push_back(var);
  }
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string filter = "--gtest_filter=" + gtest_filter;
  char* argv[] = {const_cast<char*>(self.c_str()), filter.data(), nullptr};
  pid_t pid;
  if (posix_spawn(&pid, self.c_str(), nullptr, nullptr, argv, envp.data()) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace fp8jit::test
