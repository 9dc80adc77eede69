// Warpgroup-level primitives for WGMMA (sm_90a): fences, commit/wait, register reallocation and
// shared-memory matrix descriptors.
#pragma once

#include "fp8jit/common/defs.cuh"

namespace fp8jit {
namespace dev {
namespace warpgroup {

constexpr int kThreads = 128;

// Orders prior register writes of the accumulators before the next wgmma reads them.
FP8JIT_DEVICE void arrive() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
FP8JIT_DEVICE void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> FP8JIT_DEVICE void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Register reallocation between roles: takes effect only with __launch_bounds__(threads, 1).
template <int REGS> FP8JIT_DEVICE void increase_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS> FP8JIT_DEVICE void decrease_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}

// Descriptor of a K-major tile written by TMA with 128-byte swizzle: rows of 128 bytes, groups of
// 8 rows 1024 bytes apart (stride byte offset). The leading byte offset is unused when one wgmma
// reads K = 32 bytes within a swizzle atom. Tile bases must be 1024-byte aligned.
// In two halves: the high word (stride byte offset, layout) is the same for every such tile, and
// the low word's 14-bit start address (16-byte units) never carries into the leading byte offset
// above it, shared memory lying below 256 KB. So stages and k-steps move a descriptor by 32-bit
// adds to its low word, which ptxas keeps in uniform registers; 64-bit adds to the whole
// descriptor took a carry chain and a move to uniform registers (R2UR) per wgmma, ~40 of the
// 100 instructions of a 64x32 tile's K block (G65).
constexpr u32 kDescHiK128Swizzle = (1024 >> 4) | (1u << 30);  // bits 32-45 and 62-63

FP8JIT_DEVICE u32 smem_desc_lo(const void* smem) {
  const u32 addr = static_cast<u32>(__cvta_generic_to_shared(smem));
  return ((addr & 0x3FFFF) >> 4) | (1u << 16);  // start address; leading byte offset (ignored)
}
FP8JIT_DEVICE u64 smem_desc(u32 lo) {
  return (static_cast<u64>(kDescHiK128Swizzle) << 32) | lo;
}

// One lane of the converged warp (elect.sync): ptxas knows that exactly one thread runs what it
// guards, so TMA issues there need no loop over the active lanes (`lane == 0` left them in one:
// ELECT, UTMALDG, BRA.U.ANY per load).
FP8JIT_DEVICE bool elect_one() {
  u32 elected;
  asm volatile("{\n .reg .pred p;\n elect.sync _|p, 0xffffffff;\n selp.u32 %0, 1, 0, p;\n}"
               : "=r"(elected));
  return elected != 0;
}

}  // namespace warpgroup
}  // namespace dev
}  // namespace fp8jit
