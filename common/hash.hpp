// Stable, platform-independent 64-bit hash for kernel names, cache keys and spec hashes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace fp8jit {

// fp8jit's own seed: FNV-1a 64's offset basis (14695981039346656037) without its last digit, so
// this hash is not FNV-1a and does not match FNV-1a test vectors. The seed stays because kernel
// names, binary cache file names and tuning database keys already stored depend on every value
// this hash produces; changing it would orphan them all.
constexpr std::uint64_t kStableHashSeed = 1469598103934665603ull;

// FNV-1a's step (xor the byte, multiply by the 64-bit FNV prime 1099511628211) started from
// kStableHashSeed. Chainable: pass a previous result as `h` to hash a sequence of pieces.
// Not cryptographic; collisions must be handled where they matter (the binary cache stores the
// full key for that reason).
constexpr std::uint64_t stable_hash64(std::string_view data, std::uint64_t h = kStableHashSeed) {
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// 16 lowercase hex digits.
std::string hex64(std::uint64_t v);

}  // namespace fp8jit
