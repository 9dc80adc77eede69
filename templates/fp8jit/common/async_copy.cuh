// Ampere-style asynchronous copies (cp.async) that complete on an mbarrier. Used for the small,
// strided loads TMA cannot express well (a column of per-row scales with any layout): the
// issuing thread never waits for them, the barrier's consumers do.
#pragma once

#include "fp8jit/common/barrier.cuh"

namespace fp8jit {
namespace dev {
namespace async_copy {

// Copies one 4-byte word from global to shared memory; `valid == false` writes zero instead
// of reading (out-of-bounds rows and columns).
FP8JIT_DEVICE void word(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(barrier::smem_addr(dst)), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
}

// One arrival on `bar` once every cp.async this thread issued so far has landed. `noinc`: the
// arrival counts against the barrier's expected count, so its init count includes the thread.
FP8JIT_DEVICE void arrive_on(u64* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(barrier::smem_addr(bar)) : "memory");
}

}  // namespace async_copy
}  // namespace dev
}  // namespace fp8jit
