// Runtime: the facade host apps call, and the one place below the CLI that reads the FP8JIT_*
// settings (RuntimeOptions::from_settings): everything beneath is handed the options' values.
// The launch path after the first call of a route is a shared-lock probe of the route table
// (RouteTable: kernel, SM count, split-K), the parameter block (gemm: tensor maps from
// TensorMapCache) and cuLaunchKernelEx.
#include "fp8jit/runtime.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "autotune/gemm_tuning.hpp"
#include "autotune/lookup.hpp"
#include "common/log.hpp"
#include "common/parallel.hpp"
#include "common/settings.hpp"
#include "fp8jit/error.hpp"
#include "generator/family.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "runtime/ops/dims.hpp"
#include "runtime/ops/elementwise.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/ops/gemm_common.hpp"
#include "runtime/ops/grouped_gemm.hpp"
#include "runtime/ops/routes.hpp"
#include "runtime/ops/scale_columns.hpp"
#include "runtime/sass/gemm_post_passes.hpp"

namespace fp8jit {

RuntimeOptions RuntimeOptions::from_settings() {
  const Settings& s = Settings::get();
  RuntimeOptions o;
  o.cache_dir = s.disk_cache ? s.cache_dir : std::string();
  o.db_path = s.db_path;
  if (s.shipped_tuning) o.shipped_tuning_dir = *s.shipped_tuning;
  o.tune = s.tune;
  o.jobs = s.jobs;
  o.split_sum = s.split_sum;
  o.jit = s.jit;
  o.max_sms = s.max_sms;
  o.pdl = s.pdl;
  o.keep_source = s.keep_source;
  o.ffma_reuse = s.ffma_reuse;
  o.elementwise_arch = s.elementwise_arch;
  o.log_level = s.log_level;
  return o;
}

namespace {

// The options' process-wide part, applied before the runtime's members are built so that what
// they log is filtered by the options' level.
const RuntimeOptions& applied(const RuntimeOptions& o) {
  log::set_level(o.log_level);
  return o;
}

QuantizeProblem problem_of(const QuantizeArgs& a) {
  return {a.input, a.format, a.granularity, a.qt != nullptr, a.deepseek_arithmetic,
          a.column_sums != nullptr};
}
DequantizeProblem problem_of(const DequantizeArgs& a) { return {a.format, a.output, a.granularity}; }

KernelSpec default_spec(const QuantizeProblem& p, int vec) { return default_quantize_spec(p, vec); }
KernelSpec default_spec(const DequantizeProblem& p, int vec) { return default_dequantize_spec(p, vec); }

// The elementwise kernels' vector width: the widest the addresses allow, and 4 where not even 4
// is (the kernels then take their element-wise path).
template <class Args> int vector_width(const Args& a) { return std::max(4, ops::max_vec(a)); }

RouteKey gemm_route_key(CUcontext ctx, const GemmArgs& a) {
  return route_key(ctx, ops::problem_of(a), {a.m, a.n, a.k});
}
RouteKey gemm_route_key(CUcontext ctx, const GroupedGemmArgs& a) {
  return route_key(ctx, ops::problem_of(a), {a.expected_m, a.n, a.k}, a.groups);
}

// What tuning a dense and a grouped gemm differ in, by overload (Runtime::Impl::tune).
TuneResult sweep_of(const GemmArgs& a, const GemmTuneHooks& h, const TuneOptions& o) {
  return tune_gemm(a, h, o);
}
TuneResult sweep_of(const GroupedGemmArgs& a, const GemmTuneHooks& h, const TuneOptions& o) {
  return tune_grouped_gemm(a, h, o);
}
void store_result(const std::string& db, const GpuKey& gpu, const GemmArgs& a, const TuneResult& r) {
  store_gemm_result(db, gpu, current_gpu_identity(), {a.m, a.n, a.k}, r);
}
void store_result(const std::string& db, const GpuKey& gpu, const GroupedGemmArgs& a, const TuneResult& r) {
  store_grouped_gemm_result(db, gpu, current_gpu_identity(), a.groups, {a.expected_m, a.n, a.k}, r);
}
void launch_with(Runtime& rt, const GemmArgs& a, const KernelSpec& s) {
  rt.gemm(a, s, nullptr);
}
void launch_with(Runtime& rt, const GroupedGemmArgs& a, const KernelSpec& s) {
  rt.grouped_gemm(a, s, nullptr);
}
// TuneOptions::more_group_rows, checked before anything else (the device included): a dense gemm
// has no group table, and a grouped one takes at most kMaxMoreGroupTables, none null.
void check_tables(const GemmArgs&, const TuneOptions& o) {
  if (!o.more_group_rows.empty())
    throw_invalid("more_group_rows", std::to_string(o.more_group_rows.size()) + " tables",
                  "group tables are for grouped gemms; a dense gemm is tuned on its own operands");
}
void check_tables(const GroupedGemmArgs&, const TuneOptions& o) {
  if (o.more_group_rows.size() > kMaxMoreGroupTables)
    throw_invalid("more_group_rows", std::to_string(o.more_group_rows.size()) + " tables",
                  fmt::format("at most {}", kMaxMoreGroupTables));
  for (std::size_t i = 0; i < o.more_group_rows.size(); ++i)
    if (!o.more_group_rows[i])
      throw_invalid(fmt::format("more_group_rows[{}]", i), "nullptr", "a device group table");
}

// The grouped launch on another group table (GemmTuneHooks::run_on_rows); dense gemms have none.
std::function<void(const KernelSpec&, const int*)> table_runner(Runtime&, const GemmArgs&) {
  return {};
}
std::function<void(const KernelSpec&, const int*)> table_runner(Runtime& rt,
                                                                const GroupedGemmArgs& a) {
  return [&rt, &a](const KernelSpec& s, const int* rows) {
    GroupedGemmArgs b = a;
    b.group_rows = rows;
    launch_with(rt, b, s);
  };
}

// A dense route keeps the split-K count of its arguments; grouped kernels never split K.
const GemmArgs* split_args(const GemmArgs& a) {
  return &a;
}
const GemmArgs* split_args(const GroupedGemmArgs&) {
  return nullptr;
}

}  // namespace

struct Runtime::Impl {
  explicit Impl(const RuntimeOptions& o)
      : options(applied(o)),
        kernels({options.cache_dir,
                 options.keep_source,
                 gemm_post_passes(options.ffma_reuse),
                 {ops::gemm_load_hook()},
                 options.jit,
                 parse_elementwise_arch(options.elementwise_arch)}),
        pdl(options.pdl) {}

  RuntimeOptions options;
  KernelCache kernels;
  std::atomic<bool> pdl;  // Runtime::set_pdl; read once per launch
  // What every call seen so far was routed to (quantize, dequantize and gemm).
  RouteTable routes;
  // Contexts whose device was checked (check_device).
  struct CheckedDevice {
    int sm_count = 0;
    bool hopper = false;
  };
  std::shared_mutex device_mutex;
  std::unordered_map<CUcontext, CheckedDevice> checked;

  // Workspaces (split-K partial sums, then A's scales made column-major; a quantize's column sums
  // per tile), one per (context, stream) so that concurrent streams never share one.
  // NOTE: grow-only and freed with the runtime: freeing a buffer that queued kernels may still
  // use would need a synchronisation on the launch path.
  struct Workspace {
    CUdeviceptr ptr = 0;
    std::size_t bytes = 0;
  };
  std::shared_mutex workspace_mutex;
  std::map<std::pair<CUcontext, CUstream>, Workspace> workspaces;
  std::vector<std::pair<CUcontext, CUdeviceptr>> retired;

  int jobs() const { return jobs_or_default(options.jobs); }

  // Grouped GEMMs (normalized arguments): database row or heuristic (lookup_grouped_gemm).
  // Without a GPU to key the database with: the heuristic for an H100/H200.
  GemmLookup select_grouped(const GemmProblem& p, std::int64_t groups, std::int64_t expected_m, std::int64_t n,
                            std::int64_t k, int budget) const {
    if (!driver::available())
      return {default_grouped_gemm_spec(p, groups, expected_m, n, k, within(options.target.sm_count, budget),
                                        options.target.smem_bytes),
              LookupSource::heuristic};
    return lookup_grouped_gemm(p, groups, expected_m, n, k, options.db_path, options.tune,
                               gpu_key(budget), driver::device_info().max_smem_optin,
                               options.shipped_tuning_dir);
  }
  GemmLookup select_grouped(const GroupedGemmArgs& a) const {
    return select_grouped(ops::problem_of(a), a.groups, a.expected_m, a.n, a.k, budget(a.max_sms));
  }

  // The variant for a problem and shape: database row or heuristic (see lookup_gemm). Without
  // a GPU to key the database with: the heuristic for an H100/H200.
  GemmLookup select_gemm(const GemmProblem& p, std::int64_t m, std::int64_t n, std::int64_t k, int budget) const {
    if (!driver::available())
      return {default_gemm_spec(p, m, n, k, within(options.target.sm_count, budget), options.target.smem_bytes),
              LookupSource::heuristic};
    const GpuKey gpu = gpu_key(budget);
    GemmLookup found = lookup_gemm(p, m, n, k, options.db_path, options.tune, gpu,
                                   driver::device_info().max_smem_optin, options.shipped_tuning_dir);
    // Rows tuned before the epilogue was a build choice, or for another SM count, name any.
    found.spec = with_gemm_epilogue(found.spec, m, n, k, gpu.sm_count);
    return found;
  }

  // The SM budget of a call: its own (GemmArgs::max_sms), else the runtime's; 0: every SM.
  // Both are checked already (ops::normalize, the constructor).
  int budget(int call) const { return call > 0 ? call : options.max_sms; }
  // A gemm's route key: its shape and problem, and its SM budget.
  template <class Args> RouteKey route_key_of(const Args& a) const {
    RouteKey key = gemm_route_key(driver::ensure_context(), a);
    key.sms = budget(a.max_sms);
    return key;
  }
  static int within(int sm_count, int budget) { return budget > 0 ? std::min(sm_count, budget) : sm_count; }
  // The GPU's key with its SM count cut to the budget: kernels and tuning rows are chosen for the
  // SMs a call may take, and rows tuned on 100 SMs never answer a call on 132.
  GpuKey gpu_key(int budget) const {
    GpuKey key = current_gpu_key();
    key.sm_count = within(key.sm_count, budget);
    return key;
  }

  // Tuning synchronizes the device, which a stream being captured into a graph cannot survive:
  // a miss there takes the database's nearest row or the heuristic, and says so.
  bool tune_on_miss(CUstream stream) const {
    if (options.tune != TunePolicy::on_miss) return false;
    if (!driver::stream_capturing(stream)) return true;
    log::at(log::warning, "a first call inside a CUDA graph capture is not tuned (tuning synchronizes the device); "
                          "call it once before capturing to tune it");
    return false;
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
      // The first call on a stream that needs one may be inside a capture: the buffer outlives the
      // graph.
      const driver::RelaxedCapture relaxed;
      driver::check(driver::api().cuMemAlloc(&w.ptr, grown), "cuMemAlloc(gemm workspace)");
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

  // A context's device: its SM count and whether it is a Hopper GPU (compute capability 9.0),
  // read on its first use and remembered so that launches do not query the device (a mutex and a
  // copy of its name) every call. GEMMs need Hopper and are refused here on any other GPU; the
  // elementwise families run from sm_89 on, as the kernel cache builds them (build_target_for).
  int check_device(CUcontext ctx, bool needs_hopper = true) {
    CheckedDevice d;
    bool known = false;
    {
      std::shared_lock lock(device_mutex);
      if (const auto it = checked.find(ctx); it != checked.end()) {
        d = it->second;
        known = true;
      }
    }
    if (!known) {
      const driver::DeviceInfo info = driver::device_info();
      d = {info.sm_count, info.cc_major == 9 && info.cc_minor == 0};
      std::unique_lock lock(device_mutex);
      checked[ctx] = d;
    }
    if (needs_hopper && !d.hopper) driver::require_sm90(driver::device_info());
    return d.sm_count;
  }

  // Remembers `k` as the route of `key`; a gemm's with the split-K count of its normalized
  // arguments, which is fixed for a kernel, shape and device like the SM count. Its device was
  // checked for the route's operation before `k` was built.
  Route remember(const RouteKey& key, const LoadedKernel& k, const GemmArgs* gemm = nullptr) {
    Route route{&k, within(check_device(key.ctx, false), key.sms), 1};
    if (gemm) route.splits = ops::split_count(k, *gemm, route.sm_count, options.split_sum);
    routes.put(key, route);
    return route;
  }

  // quantize and dequantize: the heuristic's kernel for the problem and vector width, checked,
  // loaded (compiled) and routed on the key's first call.
  template <class Args> void run_elementwise(const Args& args, CUstream stream) {
    const Args a = ops::normalize(args);
    const int vec = vector_width(a);
    const auto problem = problem_of(a);
    const RouteKey key = route_key(driver::ensure_context(), problem, vec);
    Route route;
    if (!routes.find(key, route)) [[unlikely]] {
      check_device(key.ctx, false);
      route = remember(key, kernels.get(default_spec(problem, vec)));
    }
    launch_elementwise(*route.kernel, a, key.ctx, stream);
  }

  template <class Args> void run_elementwise(const Args& args, const KernelSpec& spec, CUstream stream) {
    const Args a = ops::normalize(args);
    ops::check_matches(spec, a);
    CUcontext ctx = driver::ensure_context();
    check_device(ctx, false);
    launch_elementwise(kernels.get(spec), a, ctx, stream);
  }

  // A quantize's column sums pass their per-tile partial sums through the stream's workspace
  // (stream order keeps them apart from the stream's GEMMs' split-K sums).
  void launch_elementwise(const LoadedKernel& k, const QuantizeArgs& a, CUcontext ctx,
                          CUstream stream) {
    float* partials =
        a.column_sums ? workspace(ctx, stream, ops::column_partial_bytes(a)) : nullptr;
    ops::launch(k, a, stream, pdl.load(std::memory_order_relaxed), partials);
  }
  void launch_elementwise(const LoadedKernel& k, const DequantizeArgs& a, CUcontext,
                          CUstream stream) {
    ops::launch(k, a, stream, pdl.load(std::memory_order_relaxed));
  }

  // Both tune()s (normalized arguments): the sweep, compiling through the kernel cache and
  // launching through `rt`; the winner is stored in the database and routed, so that later calls
  // of the shape take it without asking the database again.
  template <class Args>
  TuneResult tune(Runtime& rt, const Args& args, const TuneOptions& options) {
    check_tables(args, options);
    check_device(driver::ensure_context());
    Args a = args;
    a.max_sms = budget(a.max_sms);  // the candidates are ranked, timed and stored for the budget
    const GemmTuneHooks hooks{[this](const KernelSpec& s) { kernels.cubin(s); },
                              [&rt, &a](const KernelSpec& s) { launch_with(rt, a, s); },
                              table_runner(rt, a)};
    TuneOptions o = options;
    if (o.jobs <= 0) o.jobs = jobs();
    TuneResult r = sweep_of(a, hooks, o);
    if (r.best) {
      store_result(this->options.db_path, gpu_key(a.max_sms), a, r);
      const LoadedKernel& k = kernels.get(r.candidates[*r.best].spec);
      remember(route_key_of(a), k, split_args(a));
    }
    return r;
  }

  // The any build of a tma kernel's config, remembered per kernel: a caller whose every D lacks
  // TMA stores then pays a shared lock per call, not a spec built and hashed.
  std::shared_mutex any_builds_mutex;
  std::unordered_map<const LoadedKernel*, const LoadedKernel*> any_builds;
  const LoadedKernel& any_build(const LoadedKernel& tma, const GemmArgs& a, int splits) {
    {
      std::shared_lock lock(any_builds_mutex);
      if (const auto it = any_builds.find(&tma); it != any_builds.end()) return *it->second;
    }
    GemmConfig c = tma.gemm_config;
    c.epilogue = GemmEpilogue::any;
    const LoadedKernel& any = kernels.get(
        make_gemm_spec(gemm_problem_of(tma.spec), c),
        fmt::format("gemm M={} N={} K={} in {} K ranges{}", a.m, a.n, a.k, splits,
                    ops::takes_tma_stores(a.d, a.d_dtype, a.ldd) ? "" : ", D without TMA stores"));
    std::unique_lock lock(any_builds_mutex);
    any_builds.emplace(&tma, &any);
    return any;
  }

  void run_gemm(const LoadedKernel& chosen, const GemmArgs& a, CUcontext ctx, int sm_count,
                int splits, CUstream stream) {
    const SplitSum sum = options.split_sum;
    const LoadedKernel* kernel = &chosen;
    // A kernel built for TMA epilogues serves calls whose K is one range and whose D takes TMA
    // stores (a route's shape fixes the first, the call's D the second); any other call runs the
    // same config built for every launch.
    if (chosen.gemm_config.epilogue == GemmEpilogue::tma &&
        (splits != 1 || !ops::takes_tma_stores(a.d, a.d_dtype, a.ldd))) [[unlikely]] {
      kernel = &any_build(chosen, a, splits);
      splits = ops::split_count(*kernel, a, sm_count, sum);
    }
    const LoadedKernel& k = *kernel;
    const bool with_pdl = pdl.load(std::memory_order_relaxed);
    const std::size_t split_bytes =
        (ops::workspace_bytes(k, a, splits, sum, sm_count) + 255) / 256 * 256;
    const std::size_t column_bytes =
        ops::scale_columns_bytes(k, a.scale_mode, a.scale_a_layout, a.m, a.k);
    float* ws = workspace(ctx, stream, split_bytes + column_bytes);
    if (column_bytes == 0) [[likely]]
      return ops::launch(k, a, sm_count, splits, ws, stream, sum, with_pdl);
    ops::launch(k, ops::scale_columns_first(k, a, a.m, ws + split_bytes / 4, stream, with_pdl),
                sm_count, splits, ws, stream, sum, with_pdl);
  }

  // A grouped launch; row-major A scales first go column-major into the stream's workspace.
  void run_grouped(const LoadedKernel& k, const GroupedGemmArgs& a, CUcontext ctx, int sm_count,
                   CUstream stream) {
    const bool with_pdl = pdl.load(std::memory_order_relaxed);
    const std::int64_t rows = ops::total_rows(a);
    const std::size_t column_bytes =
        ops::scale_columns_bytes(k, a.scale_mode, a.scale_a_layout, rows, a.k);
    if (column_bytes == 0) [[likely]]
      return ops::launch(k, a, sm_count, stream, with_pdl);
    float* columns = workspace(ctx, stream, column_bytes);
    ops::launch(k, ops::scale_columns_first(k, a, rows, columns, stream, with_pdl), sm_count,
                stream, with_pdl);
  }
};

Runtime::Runtime() : Runtime(RuntimeOptions::from_settings()) {}
Runtime::Runtime(const RuntimeOptions& options) {
  if (options.max_sms < 0)
    throw_invalid("max_sms", std::to_string(options.max_sms), "the most SMs a GEMM may occupy: 1 or more, or 0 for all");
  // Tuning on a miss compiles every candidate on the request that missed.
  if (!options.jit && options.tune == TunePolicy::on_miss)
    throw_invalid("tune", "on-miss", "tuning on a miss compiles on the request path, which jit = false (FP8JIT_JIT=off) "
                                     "forbids; use cached or off");
  impl_ = std::make_unique<Impl>(options);
}
Runtime::~Runtime() = default;

KernelSpec Runtime::select(const QuantizeArgs& args) const {
  const QuantizeArgs a = ops::normalize(args);
  return default_spec(problem_of(a), vector_width(a));
}

KernelSpec Runtime::select(const DequantizeArgs& args) const {
  const DequantizeArgs a = ops::normalize(args);
  return default_spec(problem_of(a), vector_width(a));
}

void Runtime::quantize(const QuantizeArgs& args, CUstream stream) { impl_->run_elementwise(args, stream); }
void Runtime::dequantize(const DequantizeArgs& args, CUstream stream) { impl_->run_elementwise(args, stream); }

void Runtime::quantize(const QuantizeArgs& args, const KernelSpec& spec, CUstream stream) {
  impl_->run_elementwise(args, spec, stream);
}

void Runtime::dequantize(const DequantizeArgs& args, const KernelSpec& spec, CUstream stream) {
  impl_->run_elementwise(args, spec, stream);
}

KernelSpec Runtime::select(const GemmArgs& args) const {
  const GemmArgs a = ops::normalize(args);
  return impl_->select_gemm(ops::problem_of(a), a.m, a.n, a.k, impl_->budget(a.max_sms)).spec;
}

void Runtime::gemm(const GemmArgs& args, CUstream stream) {
  const GemmArgs a = ops::normalize(args);
  const RouteKey key = impl_->route_key_of(a);
  Route route;
  if (!impl_->routes.find(key, route)) [[unlikely]] {
    impl_->check_device(key.ctx);
    GemmLookup found = impl_->select_gemm(ops::problem_of(a), a.m, a.n, a.k, key.sms);
    // A shipped row tuned for this GPU and shape counts as tuned; a nearest-M one does not.
    if (found.source != LookupSource::exact && found.source != LookupSource::shipped &&
        impl_->tune_on_miss(stream)) {
      const TuneResult r = tune(a);  // stores the row and the route
      if (r.best) found.spec = r.candidates[*r.best].spec, found.source = LookupSource::exact;
    }
    const std::string what = fmt::format("gemm M={} N={} K={}", a.m, a.n, a.k);
    log::at(log::info, "{}: {} (from the {})", what, spec_name(found.spec), to_string(found.source));
    route = impl_->remember(key, impl_->kernels.get(found.spec, what), &a);
  }
  impl_->run_gemm(*route.kernel, a, key.ctx, route.sm_count, route.splits, stream);
}

KernelSpec Runtime::select(const GemmProblem& problem, const GemmShape& shape) const {
  check_gemm_dims(shape.m, shape.n, shape.k);
  if (problem.layout != GemmLayout::dense)
    throw_invalid("problem.layout", std::string(to_string(problem.layout)),
                  "select(problem, shape) is for dense GEMMs; grouped layouts go through select_grouped");
  return impl_->select_gemm(problem, shape.m, shape.n, shape.k, impl_->options.max_sms).spec;
}

KernelSpec Runtime::select_grouped(const GemmProblem& problem, std::int64_t groups, std::int64_t expected_m,
                                   std::int64_t n, std::int64_t k) const {
  // The operand checks' rules on what there is without operands: a group of expected_m rows.
  GroupedGemmArgs shape;
  shape.layout = problem.layout;
  shape.groups = groups;
  shape.m = expected_m;
  shape.n = n;
  shape.k = k;
  if (expected_m < 1) throw_invalid("expected_m", std::to_string(expected_m), "at least one row per group");
  check_gemm_dims(expected_m, n, k);
  ops::check_group_shape(shape);
  if (problem.scale == ScaleMode::group)
    throw_invalid("problem.scale", "group", "grouped GEMMs take tensor, rowwise or block scaling");
  if (problem.bias) throw_invalid("problem.bias", "true", "grouped GEMMs take no bias");
  return impl_->select_grouped(problem, groups, expected_m, n, k, impl_->options.max_sms).spec;
}

KernelSpec Runtime::select(const GroupedGemmArgs& args) const {
  const GroupedGemmArgs a = ops::normalize(args);
  return impl_->select_grouped(a).spec;
}

void Runtime::grouped_gemm(const GroupedGemmArgs& args, CUstream stream) {
  const GroupedGemmArgs a = ops::normalize(args);
  const RouteKey key = impl_->route_key_of(a);
  Route route;
  if (!impl_->routes.find(key, route)) [[unlikely]] {
    impl_->check_device(key.ctx);
    GemmLookup found = impl_->select_grouped(a);
    // A shipped row tuned for this GPU and shape counts as tuned; a nearest-M one does not.
    if (found.source != LookupSource::exact && found.source != LookupSource::shipped &&
        impl_->tune_on_miss(stream)) {
      const TuneResult r = tune(a);  // stores the row and the route
      if (r.best) found.spec = r.candidates[*r.best].spec, found.source = LookupSource::exact;
    }
    const std::string what = fmt::format("{} grouped gemm of {} groups, M={} N={} K={}, expected M={}",
                                         to_string(a.layout), a.groups, a.m, a.n, a.k, a.expected_m);
    log::at(log::info, "{}: {} (from the {})", what, spec_name(found.spec), to_string(found.source));
    route = impl_->remember(key, impl_->kernels.get(found.spec, what));
  }
  impl_->run_grouped(*route.kernel, a, key.ctx, route.sm_count, stream);
}

void Runtime::grouped_gemm(const GroupedGemmArgs& args, const KernelSpec& spec, CUstream stream) {
  const GroupedGemmArgs a = ops::normalize(args);
  ops::check_matches(spec, a);
  CUcontext ctx = driver::ensure_context();
  const int sms = Impl::within(impl_->check_device(ctx), impl_->budget(a.max_sms));
  impl_->run_grouped(impl_->kernels.get(spec), a, ctx, sms, stream);
}

void Runtime::gemm(const GemmArgs& args, const KernelSpec& spec, CUstream stream) {
  const GemmArgs a = ops::normalize(args);
  ops::check_matches(spec, a);
  CUcontext ctx = driver::ensure_context();
  const int sms = Impl::within(impl_->check_device(ctx), impl_->budget(a.max_sms));
  const LoadedKernel& k = impl_->kernels.get(spec);
  impl_->run_gemm(k, a, ctx, sms, ops::split_count(k, a, sms, impl_->options.split_sum), stream);
}

TuneResult Runtime::tune(const GemmArgs& args, const TuneOptions& options) {
  return impl_->tune(*this, ops::normalize(args), options);
}

TuneResult Runtime::tune(const GroupedGemmArgs& args, const TuneOptions& options) {
  return impl_->tune(*this, ops::normalize(args), options);
}

std::size_t Runtime::precompile(const GemmProblem& problem, const std::vector<GemmShape>& shapes, int jobs,
                                const CompileProgress& progress) {
  std::vector<KernelSpec> specs;
  for (const GemmShape& s : shapes) {
    check_gemm_dims(s.m, s.n, s.k);
    specs.push_back(impl_->select_gemm(problem, s.m, s.n, s.k, impl_->options.max_sms).spec);
  }
  return precompile(specs, jobs, progress);
}

std::size_t Runtime::precompile(const std::vector<KernelSpec>& all, int jobs, const CompileProgress& progress) {
  std::vector<KernelSpec> specs;
  for (const KernelSpec& s : all) {
    validate_spec(s);
    if (std::find(specs.begin(), specs.end(), s) == specs.end()) specs.push_back(s);
  }
  std::mutex mutex;
  std::vector<std::string> errors;
  std::size_t done = 0;
  parallel_for(specs.size(), jobs > 0 ? jobs : impl_->jobs(), [&](std::size_t i) {
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
  // With a Hopper GPU, also load them into the calling thread's context: a serving process's
  // first call of each then does no driver work beyond its launch set-up. Another GPU (a build
  // machine's) only compiles, as a machine without one does.
  // On a GPU of another architecture the elementwise kernels are loaded (built for it).
  if (driver::available()) {
    const driver::DeviceInfo d = driver::device_info(driver::current_device());
    const int cc = d.cc_major * 10 + d.cc_minor;
    for (const KernelSpec& s : specs)
      if (arch_refusal(find_family(s.family), cc, cc == 90).empty()) (void)impl_->kernels.get(s);
  }
  return specs.size();
}

std::string Runtime::compile(const KernelSpec& spec) { return impl_->kernels.cubin(spec); }
CacheStats Runtime::cache_stats() const { return impl_->kernels.stats(); }
void Runtime::reset_cache_stats() { impl_->kernels.reset_stats(); }
const std::string& Runtime::cache_dir() const { return impl_->options.cache_dir; }
const RuntimeOptions& Runtime::options() const { return impl_->options; }
void Runtime::set_pdl(bool enabled) { impl_->pdl.store(enabled, std::memory_order_relaxed); }
bool Runtime::pdl() const { return impl_->pdl.load(std::memory_order_relaxed); }

Runtime& default_runtime() {
  static Runtime runtime;
  return runtime;
}

}  // namespace fp8jit
