// The device headers of templates/, compiled into the library (see cmake/embed_templates.cmake).
#pragma once

#include <cstddef>

namespace fp8jit::detail {

struct EmbeddedHeader {
  const char* name;  // include name relative to templates/, e.g. "fp8jit/common/fp8.cuh"
  const char* text;
  std::size_t size;
};

extern const EmbeddedHeader kEmbeddedHeaders[];
extern const std::size_t kNumEmbeddedHeaders;

}  // namespace fp8jit::detail
