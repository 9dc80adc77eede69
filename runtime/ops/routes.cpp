#include "runtime/ops/routes.hpp"

#include <mutex>

namespace fp8jit {

// A byte per field, so that a new enumerator cannot make two problems collide.
std::uint64_t problem_bits(const GemmProblem& p) {
  return std::uint64_t(p.layout) << 48 | std::uint64_t(p.a_format) << 40 | std::uint64_t(p.b_format) << 32 |
         std::uint64_t(p.out) << 24 | std::uint64_t(p.scale) << 16 |
         std::uint64_t(p.bias ? 1 : 0) << 8 | std::uint64_t(p.fast_accum ? 1 : 0);
}

std::uint64_t problem_bits(const QuantizeProblem& p) {
  return std::uint64_t(p.column_sums ? 1 : 0) << 40 |
         std::uint64_t(p.deepseek_arithmetic ? 1 : 0) << 32 | std::uint64_t(p.input) << 24 |
         std::uint64_t(p.format) << 16 | std::uint64_t(p.granularity) << 8 |
         std::uint64_t(p.transpose ? 1 : 0);
}

std::uint64_t problem_bits(const DequantizeProblem& p) {
  return std::uint64_t(p.format) << 16 | std::uint64_t(p.output) << 8 |
         std::uint64_t(p.granularity);
}

RouteKey route_key(CUcontext ctx, const GemmProblem& p, const GemmShape& shape, std::int64_t groups) {
  return {ctx, RouteOp::gemm, problem_bits(p), shape.m, shape.n, shape.k, 0, groups};
}

RouteKey route_key(CUcontext ctx, const QuantizeProblem& p, int vec) {
  return {ctx, RouteOp::quantize, problem_bits(p), 0, 0, 0, vec};
}

RouteKey route_key(CUcontext ctx, const DequantizeProblem& p, int vec) {
  return {ctx, RouteOp::dequantize, problem_bits(p), 0, 0, 0, vec};
}

std::size_t RouteTable::Hash::operator()(const RouteKey& r) const noexcept {
  std::uint64_t h = reinterpret_cast<std::uintptr_t>(r.ctx) * 0x9E3779B97F4A7C15ull ^ r.problem;
  for (std::int64_t v : {std::int64_t(r.op), r.m, r.n, r.k, std::int64_t(r.vec), r.groups, std::int64_t(r.sms)})
    h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001B3ull;
  return static_cast<std::size_t>(h ^ (h >> 32));
}

bool RouteTable::find(const RouteKey& key, Route& out) const {
  std::shared_lock lock(mutex_);
  const auto it = routes_.find(key);
  if (it == routes_.end()) return false;
  out = it->second;
  return true;
}

void RouteTable::put(const RouteKey& key, const Route& route) {
  std::unique_lock lock(mutex_);
  routes_[key] = route;
}

std::size_t RouteTable::size() const {
  std::shared_lock lock(mutex_);
  return routes_.size();
}

}  // namespace fp8jit
