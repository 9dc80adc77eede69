// What Runtime::gemm decided for a shape it has seen: the loaded kernel, the SM count it sized
// the grid for and the split-K count.
//
// Choosing a kernel reads the tuning database (or runs the heuristic), builds the spec's name and
// looks it up among the loaded modules, and the SM count comes from a device query: all of it
// allocates, takes mutexes or calls the driver. The database path and tune policy are fixed for a
// runtime's life and Runtime::tune replaces the route it tuned; a row another process stores
// later serves shapes this runtime has not routed yet, and the next runtime. So after the first
// call a shape costs one probe of this table under a shared lock: many host threads read at once,
// and nothing on the way allocates.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <shared_mutex>
#include <unordered_map>

#include "fp8jit/kernel_spec.hpp"
#include "fp8jit/runtime.hpp"

namespace fp8jit {

struct LoadedKernel;

// Everything that decides the route: the context (kernels are loaded per context, the SM count
// is its device's), what is baked into the kernel, and the shape. Pointers, leading dimensions
// and scale layouts are run-time arguments of any kernel and stay out.
struct GemmRouteKey {
  CUcontext ctx = nullptr;
  std::uint64_t problem = 0;  // gemm_problem_bits
  std::int64_t m = 0, n = 0, k = 0;
  bool operator==(const GemmRouteKey&) const = default;
};

// Every field of GemmProblem, packed; distinct problems give distinct bits.
std::uint64_t gemm_problem_bits(const GemmProblem& p);
// The key of normalized arguments on context `ctx`.
GemmRouteKey gemm_route_key(CUcontext ctx, const GemmArgs& a);

struct GemmRoute {
  const LoadedKernel* kernel = nullptr;  // owned by the runtime's KernelCache, lives as long
  int sm_count = 0;
  int splits = 1;
};

class GemmRouteTable {
 public:
  // The route stored for `key`; false (and `out` untouched) when there is none.
  bool find(const GemmRouteKey& key, GemmRoute& out) const;
  // Stores or replaces the route (a tuned kernel replaces the heuristic's).
  void put(const GemmRouteKey& key, const GemmRoute& route);
  std::size_t size() const;

 private:
  struct Hash {
    std::size_t operator()(const GemmRouteKey& g) const noexcept;
  };
  mutable std::shared_mutex mutex_;
  // NOTE: unbounded on purpose: an entry is ~80 bytes per distinct shape, and dropping one would
  // put a database query back on some later call's path.
  std::unordered_map<GemmRouteKey, GemmRoute, Hash> routes_;
};

}  // namespace fp8jit
