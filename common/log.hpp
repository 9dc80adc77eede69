// Diagnostics on stderr, filtered by FP8JIT_LOG (0 quiet, 1 warnings, 2 info, 3 debug).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace fp8jit::log {

enum Level { warning = 1, info = 2, debug = 3 };

bool enabled(Level level);
void write(Level level, std::string_view message);

template <class... T> void at(Level level, fmt::format_string<T...> f, T&&... args) {
  if (enabled(level)) write(level, fmt::format(f, std::forward<T>(args)...));
}

}  // namespace fp8jit::log
