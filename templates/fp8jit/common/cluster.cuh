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

// The address of `local`'s counterpart in the shared memory of cluster CTA `rank`.
FP8JIT_DEVICE u32 map_shared(const void* local, u32 rank) {
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(static_cast<u32>(__cvta_generic_to_shared(local))), "r"(rank));
  return remote;
}

// 16 bytes of a peer's shared memory (an address from map_shared).
FP8JIT_DEVICE float4 load_shared_v4(u32 remote) {
  float4 v;
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(remote)
               : "memory");
  return v;
}

}  // namespace cluster
}  // namespace dev
}  // namespace fp8jit
