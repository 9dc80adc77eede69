// The per-thread cache of encoded tensor maps (runtime/ops/tensor_maps.hpp), with a stand-in
// encoder: no driver needed.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/ops/tensor_maps.hpp"

namespace fp8jit::test {
namespace {

std::atomic<int> encodes{0};

// Writes a map whose bits spell out the key, so a wrong hit shows in the bytes.
CUresult fake_encode(dev::TensorMap* out, const TensorMapKey& k) {
  ++encodes;
  *out = {};
  out->opaque[0] = reinterpret_cast<std::uintptr_t>(k.base);
  out->opaque[1] = static_cast<unsigned long long>(k.rows);
  out->opaque[2] = static_cast<unsigned long long>(k.cols);
  out->opaque[3] = static_cast<unsigned long long>(k.ld);
  out->opaque[4] = static_cast<unsigned long long>(k.box_cols) << 32 | static_cast<unsigned>(k.box_rows);
  out->opaque[5] = static_cast<unsigned long long>(k.type) << 32 | static_cast<unsigned>(k.swizzle);
  out->opaque[6] = k.esize;
  return k.rows == 13 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;  // 13 rows: "declined"
}

TensorMapKey key(std::uintptr_t base) {
  TensorMapKey k;
  k.base = reinterpret_cast<const void*>(base);
  k.rows = 4096;
  k.cols = 7168;
  k.ld = 7168;
  k.box_cols = 128;
  k.box_rows = 128;
  k.type = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  k.swizzle = CU_TENSOR_MAP_SWIZZLE_128B;
  k.esize = 1;
  return k;
}

void expect_map_of(const dev::TensorMap& m, const TensorMapKey& k) {
  dev::TensorMap want;
  const int before = encodes;
  fake_encode(&want, k);
  encodes = before;
  for (int i = 0; i < 16; ++i) EXPECT_EQ(m.opaque[i], want.opaque[i]) << "word " << i;
}

TEST(TensorMapCache, RepeatedKeyIsEncodedOnce) {
  TensorMapCache cache;
  encodes = 0;
  dev::TensorMap m{};
  const TensorMapKey k = key(0x7f0000001000);
  ASSERT_EQ(cache.get(k, &m, fake_encode), CUDA_SUCCESS);
  for (int i = 0; i < 10; ++i) {
    dev::TensorMap again{};
    ASSERT_EQ(cache.get(k, &again, fake_encode), CUDA_SUCCESS);
    expect_map_of(again, k);
  }
  EXPECT_EQ(encodes, 1);
  EXPECT_EQ(cache.stats().hits, 10u);
  EXPECT_EQ(cache.stats().misses, 1u);
}

TEST(TensorMapCache, EveryFieldIsPartOfTheKey) {
  TensorMapCache cache;
  const TensorMapKey base = key(0x7f0000002000);
  std::vector<TensorMapKey> variants(10, base);
  variants[1].base = reinterpret_cast<const void*>(0x7f0000003000);
  variants[2].rows = 4095;
  variants[3].cols = 7040;
  variants[4].ld = 7296;
  variants[5].box_cols = 64;
  variants[6].box_rows = 64;
  variants[7].swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  variants[8].type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  variants[9].esize = 2;
  encodes = 0;
  for (const TensorMapKey& k : variants) {
    dev::TensorMap m{};
    ASSERT_EQ(cache.get(k, &m, fake_encode), CUDA_SUCCESS);
    expect_map_of(m, k);
  }
  // Each differs from every other: one encode each, then all of them hit (unless three share a
  // set, when one would have been re-encoded).
  EXPECT_EQ(encodes, 10);
  for (const TensorMapKey& k : variants) {
    dev::TensorMap m{};
    cache.get(k, &m, fake_encode);
    expect_map_of(m, k);
  }
  EXPECT_LE(encodes, 10 + 2);
}

TEST(TensorMapCache, DeclinedMapIsRememberedAndLeavesTheOutputAlone) {
  TensorMapCache cache;
  TensorMapKey k = key(0x7f0000004000);
  k.rows = 13;
  encodes = 0;
  dev::TensorMap m{};
  m.opaque[0] = 42;
  EXPECT_EQ(cache.get(k, &m, fake_encode), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cache.get(k, &m, fake_encode), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(encodes, 1);
  EXPECT_EQ(m.opaque[0], 42u);
}

TEST(TensorMapCache, BoundedAndAlwaysRightUnderEviction) {
  TensorMapCache cache;
  encodes = 0;
  const int n = static_cast<int>(4 * TensorMapCache::kSlots);
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < n; ++i) {
      const TensorMapKey k = key(0x7f0000000000 + 256 * static_cast<std::uintptr_t>(i));
      dev::TensorMap m{};
      ASSERT_EQ(cache.get(k, &m, fake_encode), CUDA_SUCCESS);
      expect_map_of(m, k);
    }
  // More keys than slots: the second round had to re-encode most of them.
  EXPECT_GT(encodes, n + n / 2);
  EXPECT_EQ(cache.stats().hits + cache.stats().misses, static_cast<std::uint64_t>(2 * n));
}

// Keys of one set, found by walking base addresses (the hash is not part of the contract).
std::vector<TensorMapKey> same_set(std::size_t count, std::uintptr_t from) {
  std::vector<TensorMapKey> out;
  const std::size_t set = TensorMapCache::set_of(key(from));
  for (std::uintptr_t b = from; out.size() < count; b += 256)
    if (TensorMapCache::set_of(key(b)) == set) out.push_back(key(b));
  return out;
}

TEST(TensorMapCache, AlignedDevicePointersSpreadOverTheSets) {
  // cudaMalloc returns addresses with many low zero bits; they must not crowd into a few sets.
  std::set<std::size_t> sets;
  for (std::uintptr_t i = 0; i < TensorMapCache::kSets; ++i)
    sets.insert(TensorMapCache::set_of(key(0x7f4000000000 + (i << 21))));  // 2 MiB apart
  EXPECT_GE(sets.size(), TensorMapCache::kSets / 2);
  sets.clear();
  TensorMapKey k = key(0x7f4000000000);
  for (int rows = 1; rows <= static_cast<int>(TensorMapCache::kSets); ++rows) {  // one buffer, many M
    k.rows = 64 * rows;
    sets.insert(TensorMapCache::set_of(k));
  }
  EXPECT_GE(sets.size(), TensorMapCache::kSets / 2);
}

TEST(TensorMapCache, MapsOfOneCallSharingASetStayCached) {
  // A, B and D of one GEMM may hash to one set: with two ways, two of them never evict each other.
  TensorMapCache cache;
  const std::vector<TensorMapKey> ks = same_set(2, 0x7f0000200000);
  encodes = 0;
  for (int call = 0; call < 5; ++call)
    for (const TensorMapKey& k : ks) {
      dev::TensorMap m{};
      ASSERT_EQ(cache.get(k, &m, fake_encode), CUDA_SUCCESS);
      expect_map_of(m, k);
    }
  EXPECT_EQ(encodes, 2);
}

TEST(TensorMapCache, ThirdKeyOfASetEvictsTheLeastRecentlyUsed) {
  TensorMapCache cache;
  const std::vector<TensorMapKey> ks = same_set(3, 0x7f0000300000);
  dev::TensorMap m{};
  cache.get(ks[0], &m, fake_encode);
  cache.get(ks[1], &m, fake_encode);
  cache.get(ks[0], &m, fake_encode);  // ks[1] is now the least recently used
  encodes = 0;
  cache.get(ks[2], &m, fake_encode);  // evicts ks[1]
  EXPECT_EQ(encodes, 1);
  cache.get(ks[0], &m, fake_encode);
  expect_map_of(m, ks[0]);
  cache.get(ks[2], &m, fake_encode);
  expect_map_of(m, ks[2]);
  EXPECT_EQ(encodes, 1);
  cache.get(ks[1], &m, fake_encode);  // re-encoded, and right
  expect_map_of(m, ks[1]);
  EXPECT_EQ(encodes, 2);
}

TEST(TensorMapCache, EncoderThatThrowsLeavesNoStaleEntry) {
  // The victim way held a good map; an encoder that writes into it and then throws must not
  // leave that way claiming the old key.
  TensorMapCache cache;
  const std::vector<TensorMapKey> ks = same_set(3, 0x7f0000400000);
  dev::TensorMap m{};
  cache.get(ks[0], &m, fake_encode);
  cache.get(ks[1], &m, fake_encode);  // ks[0] is now the victim
  auto throwing = [](dev::TensorMap* out, const TensorMapKey&) -> CUresult {
    out->opaque[0] = 0xdead;  // half-written before failing
    throw std::runtime_error("no driver");
  };
  EXPECT_THROW(cache.get(ks[2], &m, throwing), std::runtime_error);
  encodes = 0;
  ASSERT_EQ(cache.get(ks[0], &m, fake_encode), CUDA_SUCCESS);
  expect_map_of(m, ks[0]);
  EXPECT_EQ(encodes, 1);  // re-encoded, not served from the clobbered way
  ASSERT_EQ(cache.get(ks[1], &m, fake_encode), CUDA_SUCCESS);
  expect_map_of(m, ks[1]);
}

TEST(TensorMapCache, EachThreadHasItsOwn) {
  TensorMapCache* mine = &TensorMapCache::local();
  TensorMapCache* theirs = nullptr;
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      TensorMapCache& c = TensorMapCache::local();
      if (t == 0) theirs = &c;
      for (int i = 0; i < 1000; ++i) {
        const TensorMapKey k = key(0x7f0000100000 + 4096 * static_cast<std::uintptr_t>((i + t) % 37));
        dev::TensorMap m{};
        c.get(k, &m, fake_encode);
        if (m.opaque[0] != reinterpret_cast<std::uintptr_t>(k.base)) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_NE(mine, theirs);
}

}  // namespace
}  // namespace fp8jit::test
