#include "generator/families/elementwise.hpp"

#include <fmt/format.h>

#include "fp8jit/error.hpp"
#include "generator/family.hpp"

namespace fp8jit::elementwise {

const char* dev_elem(DType d) {
  switch (d) {
    case DType::bf16: return "kBF16";
    case DType::fp16: return "kFP16";
    case DType::fp32: return "kFP32";
  }
  throw Error(ErrorKind::internal, "dev_elem: bad DType");
}

const char* dev_fp8(Fp8Format f) { return f == Fp8Format::e4m3 ? "kE4M3" : "kE5M2"; }

const char* dev_gran(Granularity g) {
  switch (g) {
    case Granularity::tensor: return "kTensor";
    case Granularity::row: return "kRow";
    case Granularity::group128: return "kGroup128";
    case Granularity::block128: return "kBlock128";
  }
  throw Error(ErrorKind::internal, "dev_gran: bad Granularity");
}

DType dtype_param(const KernelSpec& spec, const std::string& key) {
  auto v = parse_dtype(spec.s(key));
  if (!v) throw_invalid(key, spec.s(key), "bf16, fp16 or fp32");
  return *v;
}

Fp8Format format_param(const KernelSpec& spec, const std::string& key) {
  auto v = parse_fp8_format(spec.s(key));
  if (!v) throw_invalid(key, spec.s(key), "e4m3 or e5m2");
  return *v;
}

Granularity granularity_param(const KernelSpec& spec) {
  auto v = parse_granularity(spec.s("granularity"));
  if (!v) throw_invalid("granularity", spec.s("granularity"), "tensor, row, 1x128 or 128x128");
  return *v;
}

std::string check_config(const KernelSpec& spec) {
  const auto threads = spec.i("threads"), vec = spec.i("vec");
  if (threads % 32 != 0) return fmt::format("threads = {} is not a multiple of 32", threads);
  if (128 % vec != 0) return fmt::format("vec = {} does not divide 128", vec);
  return "";
}

std::string config_suffix(const KernelSpec& spec) {
  return fmt::format("_v{}_t{}_u{}", spec.i("vec"), spec.i("threads"), spec.i("unroll"));
}

void add_config_params(std::vector<ParamDef>& params) {
  params.push_back({"vec", true, {4, 8, 16}, "elements per vector access"});
  params.push_back({"threads", true, {64, 128, 256, 512}, "threads per block"});
  params.push_back({"unroll", true, {1, 2, 4, 8}, "vector segments in flight per thread"});
}

}  // namespace fp8jit::elementwise
