// Encoded TMA tensor maps, remembered per host thread.
//
// A serving process calls gemm on the same weight and activation buffers again and again, and
// cuTensorMapEncodeTiled (several per GEMM: A, B, D and the scales) was most of fp8jit's own host
// time per call. A map depends only on the arguments below, never on the memory's contents, so a
// map encoded for an address stays right for whatever is allocated there later. The cache is
// per thread (no lock on the launch path) and bounded: kSets sets of kWays entries, the least
// recently used entry of a set giving way. Two ways rather than one so that the maps of a single
// call (A, B, D, scales) hashing to one set do not evict each other on every call.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "fp8jit/gemm/params.cuh"

namespace fp8jit {

struct TensorMapKey {
  const void* base = nullptr;
  std::int64_t rows = 0, cols = 0, ld = 0;  // elements; ld between rows
  int box_cols = 0, box_rows = 0;
  CUtensorMapDataType type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  std::uint32_t esize = 1;  // bytes per element
  bool operator==(const TensorMapKey&) const = default;
};

struct TensorMapCacheStats {
  std::uint64_t hits = 0, misses = 0;
};

// `encode` is called on a miss (the driver's cuTensorMapEncodeTiled); its result code is cached
// with the map, so a map the driver declines is declined again without asking it.
class TensorMapCache {
 public:
  static constexpr std::size_t kSets = 128, kWays = 2;
  static constexpr std::size_t kSlots = kSets * kWays;  // entries held at most
  using Encoder = CUresult (*)(dev::TensorMap* out, const TensorMapKey& key);

  CUresult get(const TensorMapKey& key, dev::TensorMap* out, Encoder encode);
  TensorMapCacheStats stats() const { return stats_; }

  // The calling thread's cache, allocated on the thread's first GEMM (a thread that never calls
  // gemm pays 8 bytes of thread-local storage, not the cache's ~64 KiB).
  static TensorMapCache& local();
  // Which set a key lives in (tests build colliding keys with it).
  static std::size_t set_of(const TensorMapKey& key);

 private:
  struct Slot {
    dev::TensorMap map;
    TensorMapKey key;
    CUresult result = CUDA_SUCCESS;
    bool used = false;
  };
  struct Set {
    Slot ways[kWays];
    std::uint8_t recent = 0;  // the way hit or filled last
  };
  Set sets_[kSets];
  TensorMapCacheStats stats_;
};

}  // namespace fp8jit
