#include "runtime/jit/headers.hpp"

#include <string_view>

#include "runtime/jit/embedded_headers.hpp"
#include "common/hash.hpp"

namespace fp8jit {

const HeaderSet& embedded_headers() {
  static const HeaderSet set = [] {
    HeaderSet s;
    std::uint64_t h = kStableHashSeed;
    for (std::size_t i = 0; i < detail::kNumEmbeddedHeaders; ++i) {
      const auto& e = detail::kEmbeddedHeaders[i];
      s.names.push_back(e.name);
      s.contents.push_back(e.text);
      h = stable_hash64(e.name, h);
      h = stable_hash64(std::string_view(e.text, e.size), h);
    }
    s.hash = h;
    return s;
  }();
  return set;
}

const char* find_embedded_header(const std::string& name) {
  const HeaderSet& s = embedded_headers();
  for (std::size_t i = 0; i < s.names.size(); ++i)
    if (name == s.names[i]) return s.contents[i];
  return nullptr;
}

}  // namespace fp8jit
