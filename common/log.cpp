#include "common/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "fp8jit/error.hpp"
#include "fp8jit/log.hpp"

namespace fp8jit::log {
namespace {

// Relaxed: a message racing a level change may go either way, and the check stays one load.
std::atomic<int> g_level{warning};

// The host app's sink; the mutex also makes its calls one at a time.
std::mutex g_sink_mutex;
LogCallback g_sink = nullptr;
void* g_sink_user = nullptr;

}  // namespace

void set_level(int level) {
  g_level.store(level, std::memory_order_relaxed);
}
int level() {
  return g_level.load(std::memory_order_relaxed);
}
bool enabled(Level level) {
  return g_level.load(std::memory_order_relaxed) >= level;
}

void write(Level level, std::string_view message) {
  {
    std::lock_guard<std::mutex> lock(g_sink_mutex);
    if (g_sink) {
      const std::string text(message);
      g_sink(level, text.c_str(), g_sink_user);
      return;
    }
  }
  static const char* const kNames[] = {"", "warning", "info", "debug"};
  std::fprintf(stderr, "fp8jit %s: %.*s\n", kNames[level], static_cast<int>(message.size()),
               message.data());
}

}  // namespace fp8jit::log

namespace fp8jit {

void set_log_callback(LogCallback callback, void* user) {
  std::lock_guard<std::mutex> lock(log::g_sink_mutex);
  log::g_sink = callback;
  log::g_sink_user = user;
}

void set_log_level(int level) {
  if (level < 0 || level > 3) throw_invalid("log level", std::to_string(level), "0 (quiet) to 3 (debug)");
  log::set_level(level);
}

}  // namespace fp8jit
