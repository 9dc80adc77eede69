// Vectorised global-memory access in 32-bit words. Wide, aligned accesses are what make the
// memory-bound kernels reach copy bandwidth; callers guarantee alignment (the host checks it).
#pragma once

#include "fp8jit/common/defs.cuh"

namespace fp8jit {
namespace dev {

// Loads N words (N = 1, 2, 4 or a multiple of 4) through the read-only path.
template <int N> FP8JIT_DEVICE void load_words(const void* p, u32 (&w)[N]) {
  if constexpr (N == 1) {
    asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(w[0]) : "l"(p));
  } else if constexpr (N == 2) {
    asm volatile("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(w[0]), "=r"(w[1]) : "l"(p));
  } else {
    static_assert(N % 4 == 0, "load_words: N must be 1, 2 or a multiple of 4");
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(w[i]), "=r"(w[i + 1]), "=r"(w[i + 2]), "=r"(w[i + 3])
                   : "l"(static_cast<const u8*>(p) + 4 * i));
    }
  }
}

template <int N> FP8JIT_DEVICE void store_words(void* p, const u32 (&w)[N]) {
  if constexpr (N == 1) {
    asm volatile("st.global.u32 [%0], %1;" ::"l"(p), "r"(w[0]) : "memory");
  } else if constexpr (N == 2) {
    asm volatile("st.global.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(w[0]), "r"(w[1]) : "memory");
  } else {
    static_assert(N % 4 == 0, "store_words: N must be 1, 2 or a multiple of 4");
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(static_cast<u8*>(p) + 4 * i),
                   "r"(w[i]), "r"(w[i + 1]), "r"(w[i + 2]), "r"(w[i + 3])
                   : "memory");
    }
  }
}

// A float from shared memory through an explicit ld.shared: a pointer carved out of the dynamic
// shared-memory block by integer arithmetic is generic, and a generic load (LD) takes the slower
// generic path where LDS would do.
FP8JIT_DEVICE float load_shared_f32(const float* p) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(static_cast<u32>(__cvta_generic_to_shared(p))) : "memory");
  return v;
}

FP8JIT_DEVICE void store_shared_f32(float* p, float v) {
  asm volatile("st.shared.f32 [%0], %1;" ::"r"(static_cast<u32>(__cvta_generic_to_shared(p))), "f"(v) : "memory");
}

FP8JIT_DEVICE void store_shared_v4(float* p, float a, float b, float c, float d) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(static_cast<u32>(__cvta_generic_to_shared(p))),
               "f"(a), "f"(b), "f"(c), "f"(d)
               : "memory");
}

// Raw bits of element `i` of a tensor of element size S (1, 2 or 4 bytes).
template <int S> FP8JIT_DEVICE u32 load_bits(const void* base, i64 i) {
  if constexpr (S == 1) return static_cast<const u8*>(base)[i];
  else if constexpr (S == 2) return static_cast<const u16*>(base)[i];
  else return static_cast<const u32*>(base)[i];
}
template <int S> FP8JIT_DEVICE void store_bits(void* base, i64 i, u32 bits) {
  if constexpr (S == 1) static_cast<u8*>(base)[i] = static_cast<u8>(bits);
  else if constexpr (S == 2) static_cast<u16*>(base)[i] = static_cast<u16>(bits);
  else static_cast<u32*>(base)[i] = bits;
}

}  // namespace dev
}  // namespace fp8jit
