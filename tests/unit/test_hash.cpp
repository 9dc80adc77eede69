// Pins the values of stable_hash64: kernel names, binary cache file names and tuning database keys
// already stored depend on them, so any change to the seed, prime or byte order must fail here.
#include <gtest/gtest.h>

#include "common/hash.hpp"

namespace fp8jit {
namespace {

// Compile-time too: the hash is constexpr and used as such.
static_assert(stable_hash64("") == 1469598103934665603ull);

TEST(StableHash, KnownValuesArePinned) {
  EXPECT_EQ(kStableHashSeed, 1469598103934665603ull);
  EXPECT_EQ(stable_hash64(""), 1469598103934665603ull);
  EXPECT_EQ(stable_hash64("a"), 0x44bd8ad473cd9906ull);
  EXPECT_EQ(stable_hash64("fp8jit"), 0x5efc0f63e7f83f92ull);
  EXPECT_EQ(hex64(stable_hash64("fp8jit")), "5efc0f63e7f83f92");
  EXPECT_EQ(hex64(stable_hash64("")), "14650fb0739d0383");
}

TEST(StableHash, BytesAboveAsciiAndNulCount) {
  // Bytes are hashed unsigned: a sign-extended 0xff would give another value.
  EXPECT_EQ(stable_hash64(std::string_view("\xff", 1)), 0x44bd24d473ccebb4ull);
  EXPECT_NE(stable_hash64(std::string_view("a\0", 2)), stable_hash64("a"));
}

TEST(StableHash, ChainsOverPieces) {
  EXPECT_EQ(stable_hash64("8jit", stable_hash64("fp")), stable_hash64("fp8jit"));
  EXPECT_EQ(stable_hash64("", stable_hash64("fp8jit")), stable_hash64("fp8jit"));
}

TEST(StableHash, IsNotFnv1a) {
  // FNV-1a 64 of "a" (offset basis 14695981039346656037): the seeds differ, so must the values.
  EXPECT_NE(stable_hash64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(stable_hash64("a", 14695981039346656037ull), 0xaf63dc4c8601ec8cull);
}

}  // namespace
}  // namespace fp8jit
