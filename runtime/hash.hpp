// Stable, platform-independent 64-bit hashing (FNV-1a) for cache keys and spec hashes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fp8jit {

constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;

constexpr std::uint64_t fnv1a64(std::string_view data, std::uint64_t h = kFnvOffset) {
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// 16 lowercase hex digits.
std::string hex64(std::uint64_t v);

}  // namespace fp8jit
