// fp8jit's diagnostics (compiles, cache trouble, the kernel chosen for each new shape) go to
// stderr unless the host app takes them: one process-wide callback and level, shared by the C++
// API, the C ABI (fp8jit_set_log_callback) and every Runtime.
#pragma once

#include "fp8jit/export.hpp"

namespace fp8jit {

// level: 1 warning, 2 info, 3 debug. Called from any thread fp8jit runs on (compile workers
// too), one call at a time; `message` lives for the call only.
using LogCallback = void (*)(int level, const char* message, void* user);

// Routes messages to `callback` (with `user`), or back to stderr with nullptr.
FP8JIT_API void set_log_callback(LogCallback callback, void* user = nullptr);
// Messages at `level` and below are delivered: 0 none, 1 warnings (the default), 2 info (one line
// per shape the first time a kernel is chosen for it, and each compile), 3 debug. A Runtime built
// later sets it from RuntimeOptions::log_level. Another level throws Error(invalid_argument).
FP8JIT_API void set_log_level(int level);

}  // namespace fp8jit
