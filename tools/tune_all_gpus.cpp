#include "tools/tune_all_gpus.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "common/file_io.hpp"
#include "fp8jit/error.hpp"

extern char** environ;

namespace fp8jit::cli {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// Starts /proc/self/exe with `args`, its stdout and stderr to `out` and `err`.
pid_t spawn_self(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> argv;
  std::string self = "fp8jit";
  argv.push_back(self.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw Error(ErrorKind::io, fmt::format("cannot start a tuning process: {}", std::strerror(rc)));
  return pid;
}

}  // namespace

int tune_on_all_gpus(const std::vector<std::string>& args, int devices) {
  if (devices < 1) throw Error(ErrorKind::driver, "needs a GPU: no device is visible");
  std::string tmpl = (std::filesystem::temp_directory_path() / "fp8jit-tune-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr)
    throw Error(ErrorKind::io, fmt::format("cannot create a folder for the logs: {}", std::strerror(errno)));
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup{tmpl};
  std::vector<pid_t> pids;
  for (int d = 0; d < devices; ++d) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--device", std::to_string(d), "--shard", fmt::format("{}/{}", d, devices)});
    pids.push_back(spawn_self(a, fmt::format("{}/{}.out", tmpl, d), fmt::format("{}/{}.err", tmpl, d)));
  }
  fmt::print(stderr, "fp8jit tune: {} processes, one per GPU, each on its shard\n", devices);
  int result = 0;
  for (int d = 0; d < devices; ++d) {
    int status = 0;
    while (::waitpid(pids[d], &status, 0) < 0 && errno == EINTR) {
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    fmt::print("=== GPU {} (exit {})\n{}", d, code, slurp(fmt::format("{}/{}.out", tmpl, d)));
    fmt::print(stderr, "{}", printable(slurp(fmt::format("{}/{}.err", tmpl, d)), 1 << 20));
    if (code != 0 && result == 0) result = code;
  }
  return result;
}

}  // namespace fp8jit::cli
