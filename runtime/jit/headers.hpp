// The embedded device headers as NVRTC sees them, and their combined hash (part of every binary
// cache key, so editing a header invalidates every kernel built from it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp8jit {

struct HeaderSet {
  std::vector<const char*> names;     // include names, e.g. "fp8jit/common/defs.cuh"
  std::vector<const char*> contents;  // NUL-terminated texts, parallel to names
  std::uint64_t hash = 0;             // stable_hash64 (common/hash.hpp) over every name and text
};

const HeaderSet& embedded_headers();
// Text of one embedded header, or nullptr.
const char* find_embedded_header(const std::string& name);

}  // namespace fp8jit
