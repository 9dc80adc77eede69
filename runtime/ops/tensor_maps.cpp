#include "runtime/ops/tensor_maps.hpp"

#include <memory>

namespace fp8jit {

std::size_t TensorMapCache::set_of(const TensorMapKey& k) {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t v) {
    h ^= v;
    h *= 1099511628211ull;
  };
  mix(reinterpret_cast<std::uintptr_t>(k.base));
  mix(static_cast<std::uint64_t>(k.rows));
  mix(static_cast<std::uint64_t>(k.cols));
  mix(static_cast<std::uint64_t>(k.ld));
  mix(static_cast<std::uint64_t>(k.box_cols) << 32 | static_cast<std::uint32_t>(k.box_rows));
  mix(static_cast<std::uint64_t>(k.type) << 40 | static_cast<std::uint64_t>(k.swizzle) << 20 | k.esize);
  // A multiply carries only low bits upwards, and device pointers have no low bits (256-byte
  // aligned at least): the finaliser of MurmurHash3 brings every bit down to the set index.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return static_cast<std::size_t>(h % kSets);
}

CUresult TensorMapCache::get(const TensorMapKey& key, dev::TensorMap* out, Encoder encode) {
  Set& set = sets_[set_of(key)];
  for (std::uint8_t w = 0; w < kWays; ++w) {
    Slot& s = set.ways[w];
    if (s.used && s.key == key) {
      ++stats_.hits;
      set.recent = w;
      if (s.result == CUDA_SUCCESS) *out = s.map;
      return s.result;
    }
  }
  ++stats_.misses;
  // An empty way if there is one, else the one not used last.
  std::uint8_t victim = static_cast<std::uint8_t>((set.recent + 1) % kWays);
  for (std::uint8_t w = 0; w < kWays; ++w)
    if (!set.ways[w].used) {
      victim = w;
      break;
    }
  Slot& s = set.ways[victim];
  s.used = false;  // an encoder that throws must not leave the old key naming a half-written map
  const CUresult r = encode(&s.map, key);
  s.key = key;
  s.result = r;
  s.used = true;
  set.recent = victim;
  if (r == CUDA_SUCCESS) *out = s.map;
  return r;
}

TensorMapCache& TensorMapCache::local() {
  thread_local std::unique_ptr<TensorMapCache> cache;
  if (!cache) [[unlikely]]
    cache = std::make_unique<TensorMapCache>();
  return *cache;
}

}  // namespace fp8jit
