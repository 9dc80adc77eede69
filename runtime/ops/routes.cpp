#include "runtime/ops/routes.hpp"

#include <mutex>

namespace fp8jit {

std::uint64_t gemm_problem_bits(const GemmProblem& p) {
  // Byte per enum so that a new enumerator cannot make two problems collide.
  return std::uint64_t{1} << 48 | std::uint64_t(p.a_format) << 40 | std::uint64_t(p.b_format) << 32 |
         std::uint64_t(p.out) << 24 | std::uint64_t(p.scale) << 16 | std::uint64_t(p.bias ? 1 : 0) << 8 |
         std::uint64_t(p.fast_accum ? 1 : 0);
}

GemmRouteKey gemm_route_key(CUcontext ctx, const GemmArgs& a) {
  const GemmProblem p{a.a_format, a.b_format, a.d_dtype, a.scale_mode, a.bias != nullptr, a.fast_accum};
  return {ctx, gemm_problem_bits(p), a.m, a.n, a.k};
}

std::size_t GemmRouteTable::Hash::operator()(const GemmRouteKey& g) const noexcept {
  std::uint64_t h = reinterpret_cast<std::uintptr_t>(g.ctx) * 0x9E3779B97F4A7C15ull ^ g.problem;
  for (std::int64_t v : {g.m, g.n, g.k}) h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001B3ull;
  return static_cast<std::size_t>(h ^ (h >> 32));
}

bool GemmRouteTable::find(const GemmRouteKey& key, GemmRoute& out) const {
  std::shared_lock lock(mutex_);
  const auto it = routes_.find(key);
  if (it == routes_.end()) return false;
  out = it->second;
  return true;
}

void GemmRouteTable::put(const GemmRouteKey& key, const GemmRoute& route) {
  std::unique_lock lock(mutex_);
  routes_[key] = route;
}

std::size_t GemmRouteTable::size() const {
  std::shared_lock lock(mutex_);
  return routes_.size();
}

}  // namespace fp8jit
