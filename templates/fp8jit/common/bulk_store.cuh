// Shared memory -> global TMA stores (bulk async group) and the fences around them.
#pragma once

#include "fp8jit/common/barrier.cuh"
#include "fp8jit/common/tensor_map.cuh"

namespace fp8jit {
namespace dev {
namespace tma {

// Stores the smem box at `src` to the tile at (x = inner coordinate, y = outer coordinate);
// the TMA clips what lies outside the tensor.
FP8JIT_DEVICE void store_2d(const TensorMap* map, const void* src, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(map),
      "r"(barrier::smem_addr(src)), "r"(x), "r"(y)
      : "memory");
}
// Stores `bytes` (a multiple of 16) of shared memory at `src` to global `dst`, both 16-byte
// aligned: a plain bulk copy, for rows a tensor map's box cannot stop at (its source would also
// need 128-byte alignment).
FP8JIT_DEVICE void store_bytes(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst),
               "r"(barrier::smem_addr(src)), "r"(bytes)
               : "memory");
}
FP8JIT_DEVICE void store_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Waits until the committed stores no longer read their shared memory.
FP8JIT_DEVICE void store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
// Waits until the committed stores are complete.
FP8JIT_DEVICE void store_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// Orders this thread's generic-proxy shared-memory writes before async-proxy (TMA) reads.
FP8JIT_DEVICE void fence_smem_for_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

}  // namespace tma

// Synchronises the `threads` threads that use hardware barrier `id` (1..15; 0 is __syncthreads).
FP8JIT_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Arrives on hardware barrier `id` without waiting: the other `threads` - 128 wait on it.
FP8JIT_DEVICE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace dev
}  // namespace fp8jit
