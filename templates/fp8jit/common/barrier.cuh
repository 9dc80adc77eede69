// mbarrier operations on shared memory (sm_90): the handshake between the TMA producer and the
// WGMMA consumers.
#pragma once

#include "fp8jit/common/defs.cuh"

namespace fp8jit {
namespace dev {
namespace barrier {

FP8JIT_DEVICE u32 smem_addr(const void* p) { return static_cast<u32>(__cvta_generic_to_shared(p)); }

FP8JIT_DEVICE void init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}

// Makes barrier initialisation visible to the async proxy (TMA) and to the cluster.
FP8JIT_DEVICE void fence_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

FP8JIT_DEVICE void arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Arrive on the same barrier of CTA `cta` of the cluster (used to release a peer's stage). The
// default (CTA-scope) release is enough: the arriving warps only read the stage, and their
// wgmmas have completed. A .release.cluster arrival made 2-CTA clusters 2.5x slower (G14).
FP8JIT_DEVICE void arrive_cluster(u64* bar, u32 cta) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(smem_addr(bar)),
      "r"(cta)
      : "memory");
}

// One arrival that also announces `bytes` the TMA will deliver to this barrier.
FP8JIT_DEVICE void arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// Blocks until the phase with parity `parity` has completed.
FP8JIT_DEVICE void wait(u64* bar, u32 parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// Whether the phase with parity `parity` has completed, without blocking (mbarrier.test_wait,
// acquire like wait()): a probe issued ahead of independent work and read after it, so that its
// latency hides under that work where a blocking wait's would not.
FP8JIT_DEVICE bool test(u64* bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

}  // namespace barrier
}  // namespace dev
}  // namespace fp8jit
