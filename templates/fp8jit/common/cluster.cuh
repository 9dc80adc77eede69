// Thread-block clusters (sm_90): the CTA's rank, and the cluster-wide barrier that orders barrier
// initialisation before any peer's multicast or remote arrival, and keeps shared memory alive
// until no peer can touch it any more.
#pragma once

#include "fp8jit/common/defs.cuh"

namespace fp8jit {
namespace dev {
namespace cluster {

FP8JIT_DEVICE u32 rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of every CTA in the cluster (not .aligned: warps may arrive diverged).
FP8JIT_DEVICE void sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

}  // namespace cluster
}  // namespace dev
}  // namespace fp8jit
