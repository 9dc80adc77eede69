// Names of the public enums, plus the error helpers declared in error.hpp.
#include "fp8jit/types.hpp"

#include <array>
#include <utility>

#include <fmt/format.h>

#include "fp8jit/error.hpp"

namespace fp8jit {
namespace {

template <class E, std::size_t N>
using NameTable = std::array<std::pair<E, std::string_view>, N>;

// One table per enum, read in both directions, keeps to_string and parse_* inverse of each
// other by construction.
constexpr NameTable<DType, 3> k_dtype_names{{
    {DType::bf16, "bf16"},
    {DType::fp16, "fp16"},
    {DType::fp32, "fp32"},
}};

constexpr NameTable<Fp8Format, 2> k_fp8_format_names{{
    {Fp8Format::e4m3, "e4m3"},
    {Fp8Format::e5m2, "e5m2"},
}};

constexpr NameTable<Granularity, 4> k_granularity_names{{
    {Granularity::tensor, "tensor"},
    {Granularity::row, "row"},
    {Granularity::group128, "1x128"},
    {Granularity::block128, "128x128"},
}};

constexpr NameTable<ScaleLayout, 2> k_scale_layout_names{{
    {ScaleLayout::row_major, "row_major"},
    {ScaleLayout::col_major_tma, "col_major_tma"},
}};

constexpr NameTable<ScaleMode, 4> k_scale_mode_names{{
    {ScaleMode::tensor, "tensor"},
    {ScaleMode::rowwise, "rowwise"},
    {ScaleMode::block, "block"},
    {ScaleMode::group, "group"},
}};

constexpr NameTable<GemmEpilogue, 2> k_gemm_epilogue_names{{
    {GemmEpilogue::any, "any"},
    {GemmEpilogue::tma, "tma"},
}};
constexpr NameTable<GemmLayout, 4> k_gemm_layout_names{{
    {GemmLayout::dense, "dense"},
    {GemmLayout::contiguous, "contiguous"},
    {GemmLayout::masked, "masked"},
    {GemmLayout::indexed, "indexed"},
}};

// An enumerator outside the table can only come from a bad cast inside fp8jit or a caller
// bypassing parse_*, so it is reported rather than printed as garbage.
template <class E, std::size_t N>
std::string_view name_of(const NameTable<E, N>& table, E v, const char* type) {
  for (const auto& [e, name] : table)
    if (e == v) return name;
  throw Error(ErrorKind::internal,
              fmt::format("{} has no enumerator with value {}", type, static_cast<int>(v)));
}

// Exact, case-sensitive match: each value has one spelling, so names compared or stored as
// text elsewhere never disagree about which value they mean.
template <class E, std::size_t N>
std::optional<E> parse_name(const NameTable<E, N>& table, std::string_view s) {
  for (const auto& [e, name] : table)
    if (name == s) return e;
  return std::nullopt;
}

}  // namespace

std::string_view to_string(DType v) { return name_of(k_dtype_names, v, "DType"); }
std::string_view to_string(Fp8Format v) { return name_of(k_fp8_format_names, v, "Fp8Format"); }
std::string_view to_string(Granularity v) {
  return name_of(k_granularity_names, v, "Granularity");
}
std::string_view to_string(ScaleLayout v) {
  return name_of(k_scale_layout_names, v, "ScaleLayout");
}

std::string_view to_string(ScaleMode v) { return name_of(k_scale_mode_names, v, "ScaleMode"); }
std::optional<ScaleMode> parse_scale_mode(std::string_view s) {
  return parse_name(k_scale_mode_names, s);
}

std::string_view to_string(GemmLayout v) { return name_of(k_gemm_layout_names, v, "GemmLayout"); }
std::optional<GemmLayout> parse_gemm_layout(std::string_view s) { return parse_name(k_gemm_layout_names, s); }
std::string_view to_string(GemmEpilogue v) {
  return name_of(k_gemm_epilogue_names, v, "GemmEpilogue");
}
std::optional<GemmEpilogue> parse_gemm_epilogue(std::string_view s) {
  return parse_name(k_gemm_epilogue_names, s);
}

std::optional<DType> parse_dtype(std::string_view s) { return parse_name(k_dtype_names, s); }
std::optional<Fp8Format> parse_fp8_format(std::string_view s) {
  return parse_name(k_fp8_format_names, s);
}
std::optional<Granularity> parse_granularity(std::string_view s) {
  return parse_name(k_granularity_names, s);
}
std::optional<ScaleLayout> parse_scale_layout(std::string_view s) {
  return parse_name(k_scale_layout_names, s);
}

std::size_t dtype_size(DType v) {
  switch (v) {
    case DType::bf16:
    case DType::fp16: return 2;
    case DType::fp32: return 4;
  }
  throw Error(ErrorKind::internal, fmt::format("DType has no enumerator with value {}",
                                               static_cast<int>(v)));
}

float fp8_max(Fp8Format f) {
  switch (f) {
    case Fp8Format::e4m3: return 448.0f;
    case Fp8Format::e5m2: return 57344.0f;
  }
  throw Error(ErrorKind::internal, fmt::format("Fp8Format has no enumerator with value {}",
                                               static_cast<int>(f)));
}

void throw_invalid(const std::string& name, const std::string& value, const std::string& rule) {
  throw Error(ErrorKind::invalid_argument, fmt::format("invalid {} = {}: {}", name, value, rule));
}

void throw_unsupported(const std::string& what) { throw Error(ErrorKind::unsupported, what); }

}  // namespace fp8jit
