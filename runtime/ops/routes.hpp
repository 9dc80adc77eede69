// What the runtime decided for a call it has seen: the loaded kernel of a quantize, dequantize or
// gemm, with (gemm) the SM count it sized the grid for and the split-K count.
//
// Choosing a kernel runs the heuristic (gemm: or reads the tuning database), builds the spec's
// name and looks it up among the loaded modules, and the SM count comes from a device query: all
// of it allocates, takes mutexes or calls the driver. The database path and tune policy are fixed
// for a runtime's life and Runtime::tune replaces the route it tuned; a row another process
// stores later serves shapes this runtime has not routed yet, and the next runtime. So after the
// first call a route costs one probe of this table under a shared lock: many host threads read
// at once, and nothing on the way allocates.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <shared_mutex>
#include <unordered_map>

#include "fp8jit/args.hpp"
#include "fp8jit/kernel_spec.hpp"

namespace fp8jit {

struct LoadedKernel;

enum class RouteOp : std::uint8_t { quantize, dequantize, gemm };

// Everything that decides a route: the context (kernels are loaded per context, the SM count is
// its device's), the operation, what is baked into its kernel, and what else its choice depends
// on: gemm's shape (heuristic and database), the vector width the elementwise operations'
// addresses allow. Pointers, leading dimensions and scale layouts are run-time arguments of any
// kernel and stay out.
struct RouteKey {
  CUcontext ctx = nullptr;
  RouteOp op = RouteOp::gemm;
  std::uint64_t problem = 0;         // problem_bits of the operation's problem
  std::int64_t m = 0, n = 0, k = 0;  // gemm; 0 for quantize and dequantize
  int vec = 0;                       // quantize and dequantize; 0 for gemm
  std::int64_t groups = 0;           // grouped gemm (m: the expected rows per group); 0 otherwise
  int sms = 0;                       // gemm: the SM budget asked for (0: every SM)
  bool operator==(const RouteKey&) const = default;
};

// Every field of a problem, packed; distinct problems of one operation give distinct bits.
std::uint64_t problem_bits(const GemmProblem& p);
std::uint64_t problem_bits(const QuantizeProblem& p);
std::uint64_t problem_bits(const DequantizeProblem& p);

RouteKey route_key(CUcontext ctx, const GemmProblem& p, const GemmShape& shape, std::int64_t groups = 0);
RouteKey route_key(CUcontext ctx, const QuantizeProblem& p, int vec);
RouteKey route_key(CUcontext ctx, const DequantizeProblem& p, int vec);

struct Route {
  const LoadedKernel* kernel = nullptr;  // owned by the runtime's KernelCache, lives as long
  int sm_count = 0;                      // gemm only
  int splits = 1;                        // gemm only
};

class RouteTable {
 public:
  // The route stored for `key`; false (and `out` untouched) when there is none.
  bool find(const RouteKey& key, Route& out) const;
  // Stores or replaces the route (a tuned kernel replaces the heuristic's).
  void put(const RouteKey& key, const Route& route);
  std::size_t size() const;

 private:
  struct Hash {
    std::size_t operator()(const RouteKey& r) const noexcept;
  };
  mutable std::shared_mutex mutex_;
  // NOTE: unbounded on purpose: an entry is ~100 bytes per distinct call, and dropping one would
  // put a database query back on some later call's path.
  std::unordered_map<RouteKey, Route, Hash> routes_;
};

}  // namespace fp8jit
