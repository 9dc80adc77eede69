// Validation of quantize/dequantize arguments: every bad input gets a clear error, and is caught
// before anything is launched or written.
#include <fmt/format.h>

#include <climits>

#include "fp8jit/error.hpp"
#include "runtime/ops/dims.hpp"
#include "runtime/ops/elementwise.hpp"

namespace fp8jit::ops {
namespace {

std::string ptr_str(const void* p) { return fmt::format("{}", p); }

void require_ptr(const void* p, const char* name) {
  if (!p) throw_invalid(name, "nullptr", "a device pointer is required");
}

void require_aligned(const void* p, std::size_t bytes, const char* name) {
  if (reinterpret_cast<std::uintptr_t>(p) % bytes != 0)
    throw_invalid(name, ptr_str(p), fmt::format("must be aligned to {} bytes", bytes));
}

std::int64_t leading_dim(std::int64_t ld, std::int64_t min, const char* name) {
  if (ld == 0) return min;
  if (ld < min) throw_invalid(name, std::to_string(ld), fmt::format("must be at least {}", min));
  return ld;
}

bool aligned_for(const void* p, std::int64_t ld, int vec, std::size_t elem) {
  return reinterpret_cast<std::uintptr_t>(p) % (vec * elem) == 0 && ld % vec == 0;
}

}  // namespace

std::int64_t scale_count_impl(Granularity g, ScaleLayout layout, std::int64_t m, std::int64_t k) {
  const std::int64_t groups = (k + 127) / 128;
  std::int64_t rows = m;
  switch (g) {
    case Granularity::tensor: return 1;
    case Granularity::row: return m;
    case Granularity::group128: break;
    case Granularity::block128: rows = (m + 127) / 128; break;
  }
  return layout == ScaleLayout::row_major ? rows * groups : groups * ((rows + 3) / 4 * 4);
}

QuantizeArgs normalize(const QuantizeArgs& in) {
  QuantizeArgs a = in;
  check_quant_dims(a.m, a.k);
  require_ptr(a.x, "x");
  require_ptr(a.q, "q");
  require_ptr(a.scales, "scales");
  require_aligned(a.x, dtype_size(a.input), "x");
  require_aligned(a.scales, 4, "scales");
  a.ldx = leading_dim(a.ldx, a.k, "ldx");
  a.ldq = leading_dim(a.ldq, a.k, "ldq");
  if (a.static_scale && a.granularity != Granularity::tensor)
    throw_invalid("static_scale", ptr_str(a.static_scale), "only per-tensor scaling takes a static scale");
  if (a.static_scale) require_aligned(a.static_scale, 4, "static_scale");
  if (a.amax) require_aligned(a.amax, 4, "amax");
  if (a.qt) a.ldqt = leading_dim(a.ldqt, a.m, "ldqt");
  else if (a.ldqt != 0) throw_invalid("ldqt", std::to_string(a.ldqt), "given without qt");
  if (a.deepseek_arithmetic && (a.granularity != Granularity::group128 || a.format != Fp8Format::e4m3 || a.qt))
    throw_invalid("deepseek_arithmetic", "true",
                  fmt::format("DeepSeek's act_quant arithmetic is 1x128 E4M3 without a transposed output; "
                              "here granularity {}, format {}{}",
                              to_string(a.granularity), to_string(a.format), a.qt ? ", qt given" : ""));
  // The sums come from the transposed cast's 128x128 tiles (TileQuantizer), which DeepSeek's
  // arithmetic (no transposed output, checked above) never takes.
  if (a.column_sums) {
    require_aligned(a.column_sums, 4, "column_sums");
    if (!a.qt)
      throw_invalid("column_sums", ptr_str(a.column_sums),
                    "column sums come with the transposed output (IEEE arithmetic): give qt (and "
                    "scales_t where the granularity needs it), or leave column_sums null");
  }
  // 1x128 and per-row scaling scale the transpose by its own groups or rows (x's columns).
  const bool wants_scales_t = a.qt && (a.granularity == Granularity::group128 || a.granularity == Granularity::row);
  if (wants_scales_t) {
    require_ptr(a.scales_t, "scales_t");
    require_aligned(a.scales_t, 4, "scales_t");
  } else if (a.scales_t) {
    throw_invalid("scales_t", ptr_str(a.scales_t),
                  "only 1x128 and per-row scaling with a transposed output write scales_t (128x128 and "
                  "tensor share `scales`)");
  }
  return a;
}

DequantizeArgs normalize(const DequantizeArgs& in) {
  DequantizeArgs a = in;
  check_quant_dims(a.m, a.k);
  require_ptr(a.q, "q");
  require_ptr(a.y, "y");
  require_ptr(a.scales, "scales");
  require_aligned(a.y, dtype_size(a.output), "y");
  require_aligned(a.scales, 4, "scales");
  a.ldq = leading_dim(a.ldq, a.k, "ldq");
  a.ldy = leading_dim(a.ldy, a.k, "ldy");
  return a;
}

int max_vec(const QuantizeArgs& a) {
  for (int vec : {16, 8, 4})
    if (aligned_for(a.x, a.ldx, vec, dtype_size(a.input)) && aligned_for(a.q, a.ldq, vec, 1)) return vec;
  return 0;
}

int max_vec(const DequantizeArgs& a) {
  for (int vec : {16, 8, 4})
    if (aligned_for(a.q, a.ldq, vec, 1) && aligned_for(a.y, a.ldy, vec, dtype_size(a.output))) return vec;
  return 0;
}

void check_matches(const KernelSpec& spec, const QuantizeArgs& a) {
  const QuantizeProblem p = quantize_problem_of(spec);
  if (p.input != a.input || p.format != a.format || p.granularity != a.granularity ||
      p.transpose != (a.qt != nullptr) || p.deepseek_arithmetic != a.deepseek_arithmetic)
    throw_invalid("spec", spec_name(spec),
                  "does not match the arguments' dtypes, granularity, transpose or arithmetic");
  if (p.column_sums != (a.column_sums != nullptr))
    throw_invalid(
        "spec", spec_name(spec),
        p.column_sums
            ? "writes column sums: give column_sums (k floats), or take a spec with column_sums = 0"
            : "writes no column sums: take a spec with column_sums = 1, or leave column_sums null");
  if (max_vec(a) < elementwise_config_of(spec).vec)
    throw_invalid("x/q", fmt::format("{}/{} (ldx {}, ldq {})", a.x, a.q, a.ldx, a.ldq),
                  fmt::format("misaligned for the spec's vector width {}", elementwise_config_of(spec).vec));
}

void check_matches(const KernelSpec& spec, const DequantizeArgs& a) {
  const DequantizeProblem p = dequantize_problem_of(spec);
  if (p.format != a.format || p.output != a.output || p.granularity != a.granularity)
    throw_invalid("spec", spec_name(spec), "does not match the arguments' dtypes or granularity");
  if (max_vec(a) < elementwise_config_of(spec).vec)
    throw_invalid("q/y", fmt::format("{}/{} (ldq {}, ldy {})", a.q, a.y, a.ldq, a.ldy),
                  fmt::format("misaligned for the spec's vector width {}", elementwise_config_of(spec).vec));
}

}  // namespace fp8jit::ops

namespace fp8jit {

std::int64_t scale_count(Granularity g, ScaleLayout layout, std::int64_t m, std::int64_t k) {
  check_scale_dims(m, k);
  return ops::scale_count_impl(g, layout, m, k);
}

namespace {

void check_dim(const char* name, std::int64_t v) {
  if (v <= 0) throw_invalid(name, std::to_string(v), "must be positive");
  if (v > kMaxDim) throw_invalid(name, std::to_string(v), "must be at most 2^31-1");
}

}  // namespace

void check_gemm_dims(std::int64_t m, std::int64_t n, std::int64_t k) {
  check_dim("m", m);
  check_dim("n", n);
  check_dim("k", k);
  if (k % 16 != 0)
    throw_invalid("k", std::to_string(k),
                  "must be a multiple of 16: TMA needs 16-byte aligned rows of the FP8 operands; pad K with zeros");
}

void check_quant_dims(std::int64_t m, std::int64_t k) {
  check_dim("m", m);
  check_dim("k", k);
  if (m * ((k + 3) / 4) >= (std::int64_t{1} << 32))
    throw_invalid("m*k", std::to_string(m * k), "must be below 2^34 elements; split the tensor");
}

void check_scale_dims(std::int64_t m, std::int64_t k) {
  check_dim("m", m);
  check_dim("k", k);
}

}  // namespace fp8jit
