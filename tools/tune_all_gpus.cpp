#include "tools/tune_all_gpus.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

// The children of a running --all-gpus tune, for the signal handler: a tune killed by its launcher
// (timeout, a batch system's SIGTERM to the one process it started) must not leave its children
// tuning on the GPUs with nobody to report them. A signal aimed at the whole process group (Ctrl-C)
// reaches them anyway; then they get it twice, which is harmless.
constexpr int kMaxChildren = 1024;
volatile sig_atomic_t g_children = 0;
pid_t g_child_pids[kMaxChildren];

void forward_signal(int sig) {
  for (int i = 0; i < g_children; ++i) ::kill(g_child_pids[i], sig);
}

// Forwards SIGINT, SIGTERM and SIGHUP to the children while it lives; the parent itself keeps
// running to wait for them, print their logs and remove its folder.
class ForwardSignals {
 public:
  ForwardSignals() {
    struct sigaction sa {};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    for (std::size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~ForwardSignals() {
    for (std::size_t i = 0; i < std::size(kSignals); ++i)
      ::sigaction(kSignals[i], &old_[i], nullptr);
    g_children = 0;
  }
  ForwardSignals(const ForwardSignals&) = delete;
  ForwardSignals& operator=(const ForwardSignals&) = delete;

 private:
  static constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[std::size(kSignals)]{};
};

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
  if (devices > kMaxChildren)
    throw Error(ErrorKind::invalid_argument,
                fmt::format("--all-gpus: {} devices, at most {} processes", devices, kMaxChildren));
  std::vector<pid_t> pids;
  ForwardSignals forward;
  for (int d = 0; d < devices; ++d) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--device", std::to_string(d), "--shard", fmt::format("{}/{}", d, devices)});
    pids.push_back(spawn_self(a, fmt::format("{}/{}.out", tmpl, d), fmt::format("{}/{}.err", tmpl, d)));
    g_child_pids[d] = pids.back();
    g_children = d + 1;
  }
  fmt::print(stderr, "fp8jit tune: {} processes, one per GPU, each on its shard\n", devices);
  int result = 0;
  for (int d = 0; d < devices; ++d) {
    int status = 0;
    while (::waitpid(pids[d], &status, 0) < 0 && errno == EINTR) {
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    fmt::print("=== GPU {} (exit {})\n{}", d, code, slurp(fmt::format("{}/{}.out", tmpl, d)));
    // Line by line: each line's control bytes escaped, its end kept.
    const std::string err = slurp(fmt::format("{}/{}.err", tmpl, d));
    for (std::size_t at = 0; at < err.size();) {
      const std::size_t end = std::min(err.find('\n', at), err.size());
      fmt::print(stderr, "{}\n", printable(std::string_view(err).substr(at, end - at), 1 << 20));
      at = end + 1;
    }
    if (code != 0 && result == 0) result = code;
  }
  return result;
}

}  // namespace fp8jit::cli
