// The kernel cache for serving, without a GPU: no live compile when it is forbidden, and one
// compile per key across processes sharing a disk cache (a holder killed mid-compile blocks no
// one).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <thread>

#include "common/file_io.hpp"
#include "common/hash.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/log.hpp"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "tests/common/expect_error.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;

const KernelSpec& spec() {
  static const KernelSpec s =
      make_quantize_spec({DType::fp16, Fp8Format::e5m2, Granularity::row, false}, {8, 128, 2});
  return s;
}

TEST(KernelCacheServing, NoLiveCompileWhenForbidden) {
  test::TempDir dir("fp8jit_serving");
  KernelCache off({.cache_dir = dir.path(), .live_compile = false});
  const std::string msg = test::error_message(
      ErrorKind::unsupported, [&] { off.launch_cubin(spec(), "gemm M=1 N=2 K=3"); });
  EXPECT_NE(msg.find("gemm M=1 N=2 K=3: kernel " + spec_name(spec()) + " is in neither"),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find("precompile"), std::string::npos) << msg;
  EXPECT_EQ(off.stats().compiles, 0u);
  // Filling the cache is allowed (precompile, tune), and then the launch path finds the cubin.
  const std::string cubin = off.cubin(spec());
  EXPECT_EQ(off.launch_cubin(spec()), cubin);
  KernelCache later({.cache_dir = dir.path(), .live_compile = false});  // another process
  EXPECT_EQ(later.launch_cubin(spec()), cubin);
  EXPECT_EQ(later.stats().compiles, 0u);
  // Without a disk cache, what this cache compiled is what it may launch.
  KernelCache memory_only({.cache_dir = "", .live_compile = false});
  test::error_message(ErrorKind::unsupported, [&] { memory_only.launch_cubin(spec()); });
  EXPECT_EQ(memory_only.cubin(spec()), cubin);
  EXPECT_EQ(memory_only.launch_cubin(spec()), cubin);
  EXPECT_EQ(memory_only.stats().compiles, 1u);
  // With live compiles on (the default), the launch path compiles.
  KernelCache on({.cache_dir = ""});
  EXPECT_EQ(on.launch_cubin(spec()), cubin);
}

TEST(KernelCacheServing, JitOffRefusesOnMissTuning) {
  RuntimeOptions o;
  o.jit = false;
  o.tune = TunePolicy::on_miss;
  EXPECT_NE(test::invalid_message([&] { Runtime rt(o); }).find("FP8JIT_JIT=off"),
            std::string::npos);
  o.tune = TunePolicy::cached;
  Runtime rt(o);
  EXPECT_FALSE(rt.options().jit);
}

// The host app's log sink gets fp8jit's messages (here: a compile at the info level) instead of
// stderr, and only up to the level set.
TEST(KernelCacheServing, LogMessagesGoToTheHostAppsCallback) {
  struct Sink {
    std::vector<std::pair<int, std::string>> got;
    static void take(int level, const char* message, void* user) {
      static_cast<Sink*>(user)->got.emplace_back(level, message);
    }
  } sink;
  set_log_callback(&Sink::take, &sink);
  set_log_level(2);
  KernelCache c({.cache_dir = ""});
  (void)c.cubin(spec());
  set_log_level(1);
  (void)c.cubin(spec());  // compiled again (no disk cache), not reported at level 1
  set_log_callback(nullptr);
  ASSERT_EQ(sink.got.size(), 1u);
  EXPECT_EQ(sink.got[0].first, 2);
  EXPECT_NE(sink.got[0].second.find(spec_name(spec()) + ": compiled in"), std::string::npos) << sink.got[0].second;
  EXPECT_NE(test::invalid_message([] { set_log_level(4); }).find("log level = 4"), std::string::npos);
  EXPECT_NE(test::invalid_message([] { set_log_level(-1); }).find("log level = -1"), std::string::npos);
}

// Waits for `pid` up to `seconds`; its exit status, or -1 (killed on the timeout, or no normal
// exit).
int wait_for(pid_t pid, double seconds) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > until) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// In a child: waits for `go` to close, takes the cubin, writes its hash to `out` and exits with
// the number of compiles it ran.
[[noreturn]] void child_compile(const std::string& dir, int go, int out) {
  char c;
  while (::read(go, &c, 1) > 0) {
  }
  KernelCache cache({.cache_dir = dir});
  const std::string cubin = cache.cubin(spec());
  const std::string line = std::to_string(stable_hash64(cubin)) + "\n";
  if (::write(out, line.data(), line.size()) != static_cast<ssize_t>(line.size())) ::_exit(100);
  ::_exit(static_cast<int>(cache.stats().compiles));
}

TEST(KernelCacheServing, EightProcessesMissingOneKeyCompileItOnce) {
  test::TempDir dir("fp8jit_serving");
  int go[2], out[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(out), 0);
  std::vector<pid_t> kids;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(go[1]), ::close(out[0]);
      child_compile(dir.path(), go[0], out[1]);
    }
    kids.push_back(pid);
  }
  ::close(go[0]), ::close(out[1]);
  ::close(go[1]);  // all at once
  int compiles = 0;
  for (pid_t pid : kids) {
    const int status = wait_for(pid, 120);
    ASSERT_GE(status, 0) << "a child hung or crashed";
    ASSERT_LE(status, 1) << "a child ran " << status << " compiles (100: could not report)";
    compiles += status;
  }
  std::string hashes;
  char buf[512];
  for (ssize_t n; (n = ::read(out[0], buf, sizeof buf)) > 0;)
    hashes.append(buf, static_cast<std::size_t>(n));
  ::close(out[0]);
  std::set<std::string> distinct;
  std::size_t lines = 0;
  for (std::size_t at = 0, nl; (nl = hashes.find('\n', at)) != std::string::npos;
       at = nl + 1, ++lines)
    distinct.insert(hashes.substr(at, nl - at));
  EXPECT_EQ(compiles, 1);
  EXPECT_EQ(lines, 8u);
  EXPECT_EQ(distinct.size(), 1u);  // every process got the one compile's cubin
}

TEST(KernelCacheServing, AHolderKilledMidCompileBlocksNoOne) {
  test::TempDir dir("fp8jit_serving");
  KernelCache probe({.cache_dir = dir.path()});
  const std::string lock = probe.disk().path_for(probe.cubin_key(spec())) + ".lock";
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {  // takes the key's lock as a compiling process would, then hangs
    io::FileLock held(lock);
    if (::write(ready[1], held.locked() ? "y" : "n", 1) != 1) ::_exit(2);
    ::pause();
    ::_exit(0);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  int go[2], out[2];
  ASSERT_EQ(::pipe(go), 0);
  ASSERT_EQ(::pipe(out), 0);
  const pid_t waiter = ::fork();
  ASSERT_GE(waiter, 0);
  if (waiter == 0) {
    ::close(go[1]), ::close(out[0]);
    child_compile(dir.path(), go[0], out[1]);
  }
  ::close(go[0]), ::close(out[1]), ::close(go[1]);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  int status = 0;
  EXPECT_EQ(::waitpid(waiter, &status, WNOHANG), 0) << "the waiter did not wait for the lock";
  ::kill(holder, SIGKILL);  // the system releases its flock
  ::waitpid(holder, &status, 0);
  EXPECT_EQ(wait_for(waiter, 120), 1);  // it took the lock and compiled
  ::close(out[0]);
  ::close(ready[0]);
}

}  // namespace
}  // namespace fp8jit
