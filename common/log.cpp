#include "common/log.hpp"

#include <atomic>
#include <cstdio>

namespace fp8jit::log {
namespace {

// Relaxed: a message racing a level change may go either way, and the check stays one load.
std::atomic<int> g_level{warning};

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
  static const char* const kNames[] = {"", "warning", "info", "debug"};
  std::fprintf(stderr, "fp8jit %s: %.*s\n", kNames[level], static_cast<int>(message.size()),
               message.data());
}

}  // namespace fp8jit::log
