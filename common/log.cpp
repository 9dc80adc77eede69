#include "common/log.hpp"

#include <cstdio>

#include "common/settings.hpp"

namespace fp8jit::log {

bool enabled(Level level) { return Settings::get().log_level >= level; }

void write(Level level, std::string_view message) {
  static const char* const kNames[] = {"", "warning", "info", "debug"};
  std::fprintf(stderr, "fp8jit %s: %.*s\n", kNames[level], static_cast<int>(message.size()), message.data());
}

}  // namespace fp8jit::log
