// Exceptions thrown by fp8jit. Every message says what failed and how to fix it.
#pragma once

#include <stdexcept>
#include <string>

#include "fp8jit/export.hpp"

namespace fp8jit {

// What kind of failure: lets callers (and the C ABI) map an exception to a status code.
enum class ErrorKind {
  invalid_argument,  // bad input from the caller: nothing was written
  unsupported,       // valid request this build/GPU cannot serve (e.g. compute capability < 9.0)
  compile,           // NVRTC rejected generated source (carries the log)
  driver,            // the CUDA driver returned an error or is missing
  io,                // disk cache / database / file trouble
  internal,          // a bug in fp8jit
};

class FP8JIT_API Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what) : std::runtime_error(what), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// Shorthands for the common case: the caller passed `name` = `value`, which breaks `rule`.
[[noreturn]] FP8JIT_API void throw_invalid(const std::string& name, const std::string& value,
                                           const std::string& rule);
[[noreturn]] FP8JIT_API void throw_unsupported(const std::string& what);

}  // namespace fp8jit
