#include "common/hash.hpp"

#include <fmt/format.h>

namespace fp8jit {

std::string hex64(std::uint64_t v) { return fmt::format("{:016x}", v); }

}  // namespace fp8jit
