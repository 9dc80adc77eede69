// Device pointers that are never dereferenced: argument checks run on the host and refuse before
// any launch, so tests without a GPU hand them distinct, recognisable addresses.
#pragma once

#include <cstdint>

namespace fp8jit::test {

inline void* fake(std::uintptr_t a) {
  return reinterpret_cast<void*>(a);
}
inline float* fake_f(std::uintptr_t a) {
  return reinterpret_cast<float*>(a);
}

}  // namespace fp8jit::test
