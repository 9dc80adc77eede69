// Checks that a call fails with an fp8jit::Error of the expected kind and hands back its message,
// so tests can assert on what the message names.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "fp8jit/error.hpp"

namespace fp8jit::test {

// Runs fn, which must throw fp8jit::Error(kind); returns the message ("" after a test failure).
template <class F>
std::string error_message(ErrorKind kind, F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-fp8jit exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

// The same for fp8jit::Error(invalid_argument), the kind every bad input gets.
template <class F>
std::string invalid_message(F&& fn) {
  return error_message(ErrorKind::invalid_argument, std::forward<F>(fn));
}

}  // namespace fp8jit::test
