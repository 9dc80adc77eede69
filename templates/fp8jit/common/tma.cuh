// TMA (cp.async.bulk.tensor) loads and the tensor-map type passed as a kernel parameter.
#pragma once

#include "fp8jit/common/barrier.cuh"
#include "fp8jit/common/tensor_map.cuh"

namespace fp8jit {
namespace dev {

namespace tma {

FP8JIT_DEVICE void prefetch(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

// Loads the box at (x = inner coordinate, y = outer coordinate) into `dst`, completing on `bar`.
FP8JIT_DEVICE void load_2d(void* dst, const TensorMap* map, u64* bar, int x, int y) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          barrier::smem_addr(dst)),
      "l"(map), "r"(barrier::smem_addr(bar)), "r"(x), "r"(y)
      : "memory");
}

// The same box, written into the same smem offset of every CTA in `mask` of the cluster.
FP8JIT_DEVICE void load_2d_multicast(void* dst, const TensorMap* map, u64* bar, int x, int y, u16 mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%3, %4}], [%2], %5;" ::"r"(barrier::smem_addr(dst)),
      "l"(map), "r"(barrier::smem_addr(bar)), "r"(x), "r"(y), "h"(mask)
      : "memory");
}

}  // namespace tma
}  // namespace dev
}  // namespace fp8jit
