// Enum values from their fp8jit names ("e4m3", "1x128", "block", ...), as the CLI and the JSON
// specs spell them; an unknown name is a ValueError naming the argument and the allowed names.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "fp8jit/error.hpp"
#include "fp8jit/types.hpp"

namespace fp8jit::python {

template <class E>
struct EnumNames;
template <>
struct EnumNames<DType> {
  static std::optional<DType> parse(std::string_view s) { return parse_dtype(s); }
  static constexpr const char* kAllowed = "bf16, fp16 or fp32";
};
template <>
struct EnumNames<Fp8Format> {
  static std::optional<Fp8Format> parse(std::string_view s) { return parse_fp8_format(s); }
  static constexpr const char* kAllowed = "e4m3 or e5m2";
};
template <>
struct EnumNames<Granularity> {
  static std::optional<Granularity> parse(std::string_view s) { return parse_granularity(s); }
  static constexpr const char* kAllowed = "tensor, row, 1x128 or 128x128";
};
template <>
struct EnumNames<ScaleLayout> {
  static std::optional<ScaleLayout> parse(std::string_view s) { return parse_scale_layout(s); }
  static constexpr const char* kAllowed = "row_major or col_major_tma";
};
template <>
struct EnumNames<ScaleMode> {
  static std::optional<ScaleMode> parse(std::string_view s) { return parse_scale_mode(s); }
  static constexpr const char* kAllowed = "tensor, rowwise, block or group";
};
template <>
struct EnumNames<GemmLayout> {
  static std::optional<GemmLayout> parse(std::string_view s) { return parse_gemm_layout(s); }
  static constexpr const char* kAllowed = "dense, contiguous, masked or indexed";
};

template <class E>
E parse_enum(const char* argument, const std::string& value) {
  const std::optional<E> e = EnumNames<E>::parse(value);
  if (!e)
    throw_invalid(argument, "'" + value + "'", std::string("one of ") + EnumNames<E>::kAllowed);
  return *e;
}

}  // namespace fp8jit::python
