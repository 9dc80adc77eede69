// Runtime: the facade host apps call. The launch path after the first call per variant is a
// shared-lock lookup of a small integer key (gemm: GemmRouteTable), the parameter block (gemm:
// tensor maps from TensorMapCache) and cuLaunchKernelEx.
#include "fp8jit/runtime.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "fp8jit/error.hpp"
#include "autotune/gemm_tuning.hpp"
#include "autotune/lookup.hpp"
#include "runtime/ops/dims.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/routes.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "runtime/ops/elementwise.hpp"
#include "common/parallel.hpp"
#include "common/settings.hpp"

namespace fp8jit {

RuntimeOptions RuntimeOptions::from_settings() {
  const Settings& s = Settings::get();
  return {s.disk_cache ? s.cache_dir : std::string(), s.db_path, s.tune};
}

struct Runtime::Impl {
  explicit Impl(const RuntimeOptions& o) : kernels(o.cache_dir), cache_dir(o.cache_dir), options(o) {}

  KernelCache kernels;
  std::string cache_dir;
  RuntimeOptions options;
  // (context, packed problem + vector width) -> loaded heuristic kernel.
  std::shared_mutex fast_mutex;
  std::unordered_map<CUcontext, std::unordered_map<std::uint64_t, const LoadedKernel*>> fast;
  // Contexts whose device was checked, with its SM count (under fast_mutex).
  std::unordered_map<CUcontext, int> checked;
  // gemm: the heuristic depends on the shape, so the key holds it: (context, problem, m, n, k).
  GemmRouteTable gemm_routes;

  // Split-K workspaces, one per (context, stream) so that concurrent streams never share one.
  // NOTE: grow-only and freed with the runtime: freeing a buffer that queued kernels may still
  // use would need a synchronisation on the launch path.
  struct Workspace {
    CUdeviceptr ptr = 0;
    std::size_t bytes = 0;
  };
  std::shared_mutex workspace_mutex;
  std::map<std::pair<CUcontext, CUstream>, Workspace> workspaces;
  std::vector<std::pair<CUcontext, CUdeviceptr>> retired;

  // The variant for a problem and shape: database row or heuristic (see lookup_gemm). Without
  // a GPU to key the database with: the heuristic for an H100/H200.
  GemmLookup select_gemm(const GemmProblem& p, std::int64_t m, std::int64_t n, std::int64_t k) const {
    if (!driver::available()) return {default_gemm_spec(p, m, n, k), LookupSource::heuristic};
    return lookup_gemm(p, m, n, k, options.db_path, options.tune, current_gpu_key(),
                       driver::device_info().max_smem_optin);
  }

  float* workspace(CUcontext ctx, CUstream stream, std::size_t bytes) {
    if (bytes == 0) return nullptr;
    {
      // Split-K calls on many threads and streams: readers share the lock once buffers are sized.
      std::shared_lock lock(workspace_mutex);
      const auto it = workspaces.find({ctx, stream});
      if (it != workspaces.end() && it->second.bytes >= bytes) return reinterpret_cast<float*>(it->second.ptr);
    }
    std::unique_lock lock(workspace_mutex);
    Workspace& w = workspaces[{ctx, stream}];
    if (w.bytes < bytes) {
      if (w.ptr) retired.push_back({ctx, w.ptr});
      const std::size_t grown = std::max(bytes, 2 * w.bytes);
      driver::check(driver::api().cuMemAlloc(&w.ptr, grown), "cuMemAlloc(split-K workspace)");
      w.bytes = grown;
    }
    return reinterpret_cast<float*>(w.ptr);
  }

  ~Impl() {
    const driver::Api* api = driver::try_api();
    if (!api) return;
    for (auto& [key, w] : workspaces)
      if (w.ptr) api->cuMemFree(w.ptr);
    for (auto& [ctx, ptr] : retired) api->cuMemFree(ptr);
  }

  const LoadedKernel* find_fast(CUcontext ctx, std::uint64_t key) {
    std::shared_lock lock(fast_mutex);
    auto it = fast.find(ctx);
    if (it == fast.end()) return nullptr;
    auto jt = it->second.find(key);
    return jt == it->second.end() ? nullptr : jt->second;
  }

  // First use of a context: the device must be a Hopper GPU. Returns its SM count, remembered
  // so that launches do not query the device (a mutex and a copy of its name) every call.
  int check_device(CUcontext ctx) {
    {
      std::shared_lock lock(fast_mutex);
      if (const auto it = checked.find(ctx); it != checked.end()) return it->second;
    }
    const driver::DeviceInfo info = driver::device_info();
    driver::require_sm90(info);
    std::unique_lock lock(fast_mutex);
    checked[ctx] = info.sm_count;
    return info.sm_count;
  }

  // Remembers `k` for the shape of normalized arguments `a`, with the SM count and split-K the
  // launch uses (both fixed for a kernel, shape and device).
  GemmRoute remember_gemm(const GemmRouteKey& key, const LoadedKernel& k, const GemmArgs& a) {
    const int sms = check_device(key.ctx);
    const GemmRoute route{&k, sms, ops::split_count(k, a, sms)};
    gemm_routes.put(key, route);
    return route;
  }

  template <class Args>
  const LoadedKernel& resolve(std::uint64_t key, const Args& a, const KernelSpec& spec) {
    CUcontext ctx = driver::ensure_context();
    if (const LoadedKernel* k = find_fast(ctx, key)) return *k;
    check_device(ctx);
    (void)a;
    const LoadedKernel& k = kernels.get(spec);
    std::unique_lock lock(fast_mutex);
    fast[ctx][key] = &k;
    return k;
  }
};

namespace {

std::uint64_t pack_key(int op, int a, int b, int c, int d, int vec) {
  return (std::uint64_t(op) << 40) | (std::uint64_t(a) << 32) | (std::uint64_t(b) << 24) |
         (std::uint64_t(c) << 16) | (std::uint64_t(d) << 8) | std::uint64_t(vec);
}

QuantizeProblem problem_of(const QuantizeArgs& a) {
  return {a.input, a.format, a.granularity, a.qt != nullptr};
}

DequantizeProblem problem_of(const DequantizeArgs& a) { return {a.format, a.output, a.granularity}; }

}  // namespace

Runtime::Runtime() : Runtime(RuntimeOptions::from_settings()) {}
Runtime::Runtime(const RuntimeOptions& options) : impl_(std::make_unique<Impl>(options)) {}
Runtime::~Runtime() = default;

KernelSpec Runtime::select(const QuantizeArgs& args) const {
  const QuantizeArgs a = ops::normalize(args);
  return default_quantize_spec(problem_of(a), std::max(4, ops::max_vec(a)));
}

KernelSpec Runtime::select(const DequantizeArgs& args) const {
  const DequantizeArgs a = ops::normalize(args);
  return default_dequantize_spec(problem_of(a), std::max(4, ops::max_vec(a)));
}

void Runtime::quantize(const QuantizeArgs& args, CUstream stream) {
  const QuantizeArgs a = ops::normalize(args);
  const int vec = std::max(4, ops::max_vec(a));
  const std::uint64_t key = pack_key(1, int(a.input), int(a.format), int(a.granularity), a.qt ? 1 : 0, vec);
  CUcontext ctx = driver::ensure_context();
  const LoadedKernel* k = impl_->find_fast(ctx, key);
  if (!k) k = &impl_->resolve(key, a, default_quantize_spec(problem_of(a), vec));
  ops::launch(*k, a, stream);
}

void Runtime::dequantize(const DequantizeArgs& args, CUstream stream) {
  const DequantizeArgs a = ops::normalize(args);
  const int vec = std::max(4, ops::max_vec(a));
  const std::uint64_t key = pack_key(2, int(a.format), int(a.output), int(a.granularity), 0, vec);
  CUcontext ctx = driver::ensure_context();
  const LoadedKernel* k = impl_->find_fast(ctx, key);
  if (!k) k = &impl_->resolve(key, a, default_dequantize_spec(problem_of(a), vec));
  ops::launch(*k, a, stream);
}

void Runtime::quantize(const QuantizeArgs& args, const KernelSpec& spec, CUstream stream) {
  const QuantizeArgs a = ops::normalize(args);
  ops::check_matches(spec, a);
  impl_->check_device(driver::ensure_context());
  ops::launch(impl_->kernels.get(spec), a, stream);
}

void Runtime::dequantize(const DequantizeArgs& args, const KernelSpec& spec, CUstream stream) {
  const DequantizeArgs a = ops::normalize(args);
  ops::check_matches(spec, a);
  impl_->check_device(driver::ensure_context());
  ops::launch(impl_->kernels.get(spec), a, stream);
}

KernelSpec Runtime::select(const GemmArgs& args) const {
  const GemmArgs a = ops::normalize(args);
  return impl_->select_gemm(ops::problem_of(a), a.m, a.n, a.k).spec;
}

void Runtime::gemm(const GemmArgs& args, CUstream stream) {
  const GemmArgs a = ops::normalize(args);
  const GemmRouteKey key = gemm_route_key(driver::ensure_context(), a);
  GemmRoute route;
  if (!impl_->gemm_routes.find(key, route)) [[unlikely]] {
    impl_->check_device(key.ctx);
    GemmLookup found = impl_->select_gemm(ops::problem_of(a), a.m, a.n, a.k);
    if (found.source != LookupSource::exact && impl_->options.tune == TunePolicy::on_miss) {
      const TuneResult r = tune(a);  // stores the row and the fast-path entry
      if (r.best) found.spec = r.candidates[*r.best].spec;
    }
    route = impl_->remember_gemm(key, impl_->kernels.get(found.spec), a);
  }
  ops::launch(*route.kernel, a, route.sm_count, route.splits,
              impl_->workspace(key.ctx, stream, ops::workspace_bytes(*route.kernel, a, route.splits)), stream);
}

void Runtime::gemm(const GemmArgs& args, const KernelSpec& spec, CUstream stream) {
  const GemmArgs a = ops::normalize(args);
  ops::check_matches(spec, a);
  CUcontext ctx = driver::ensure_context();
  const int sms = impl_->check_device(ctx);
  const LoadedKernel& k = impl_->kernels.get(spec);
  const int splits = ops::split_count(k, a, sms);
  ops::launch(k, a, sms, splits, impl_->workspace(ctx, stream, ops::workspace_bytes(k, a, splits)), stream);
}

TuneResult Runtime::tune(const GemmArgs& args, const TuneOptions& options) {
  const GemmArgs a = ops::normalize(args);
  impl_->check_device(driver::ensure_context());
  TuneResult r = tune_gemm(*this, a, options);
  if (r.best) {
    store_gemm_result(impl_->options.db_path, current_gpu_key(), {a.m, a.n, a.k}, r);
    // Later calls of this shape take the winner without asking the database again.
    const LoadedKernel& k = impl_->kernels.get(r.candidates[*r.best].spec);
    impl_->remember_gemm(gemm_route_key(driver::ensure_context(), a), k, a);
  }
  return r;
}

std::size_t Runtime::precompile(const GemmProblem& problem, const std::vector<GemmShape>& shapes, int jobs,
                                const CompileProgress& progress) {
  std::vector<KernelSpec> specs;
  for (const GemmShape& s : shapes) {
    check_gemm_dims(s.m, s.n, s.k);
    const KernelSpec spec = impl_->select_gemm(problem, s.m, s.n, s.k).spec;
    if (std::find(specs.begin(), specs.end(), spec) == specs.end()) specs.push_back(spec);
  }
  std::mutex mutex;
  std::vector<std::string> errors;
  std::size_t done = 0;
  parallel_for(specs.size(), jobs > 0 ? jobs : Settings::get().jobs, [&](std::size_t i) {
    std::string error;
    try {
      compile(specs[i]);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (!error.empty()) errors.push_back(std::move(error));
    if (progress) progress(++done, specs.size(), specs[i]);
  });
  if (!errors.empty())
    throw Error(ErrorKind::compile, fmt::format("{} of {} kernels failed to compile; first: {}", errors.size(),
                                                specs.size(), errors.front()));
  return specs.size();
}

std::string Runtime::compile(const KernelSpec& spec) { return impl_->kernels.cubin(spec); }
CacheStats Runtime::cache_stats() const { return impl_->kernels.stats(); }
void Runtime::reset_cache_stats() { impl_->kernels.reset_stats(); }
const std::string& Runtime::cache_dir() const { return impl_->cache_dir; }

Runtime& default_runtime() {
  static Runtime runtime;
  return runtime;
}

}  // namespace fp8jit
