// Diagnostics on stderr, filtered by a process-wide level (0 quiet, 1 warnings, 2 info, 3 debug):
// the runtime sets it from its options (RuntimeOptions::log_level), the CLI from FP8JIT_LOG.
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace fp8jit::log {

enum Level { warning = 1, info = 2, debug = 3 };

// Messages at `level` and below are written from now on (0: none; 1, warnings, until set).
void set_level(int level);
int level();
bool enabled(Level level);
void write(Level level, std::string_view message);

template <class... T>
void at(Level level, fmt::format_string<T...> f, T&&... args) {
  if (enabled(level)) write(level, fmt::format(f, std::forward<T>(args)...));
}

}  // namespace fp8jit::log
