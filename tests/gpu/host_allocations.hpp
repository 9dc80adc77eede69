// Counts the calling thread's C++ heap allocations (operator new), for tests that hold a launch
// path to "allocates nothing". The GPU test binary replaces the global operator new for this.
#pragma once

#include <cstdint>

namespace fp8jit::test {

std::uint64_t host_allocations();

}  // namespace fp8jit::test
