#include "autotune/gemm_tuning.hpp"

#include <fmt/format.h>

#include "autotune/grouped_reference.hpp"
#include "autotune/timer.hpp"
#include "autotune/tuner.hpp"
#include "fp8jit/reference.hpp"
#include "runtime/jit/driver.hpp"

namespace fp8jit {

namespace {

double tolerance_of(DType out, bool fast_accum) {
  return out == DType::fp32 && !fast_accum ? 1e-3 : 4e-3;
}

// The median and spread of a launch's time (TuneOptions' warm-up and iterations).
Timing timed(const std::function<void()>& launch, const TuneOptions& options) {
  std::vector<double> us;
  for (double ms : time_samples_ms(launch, options.warmup, options.iters)) us.push_back(ms * 1e3);
  return summarize(us);
}

// Compiles through the hooks and times hooks.run; the caller adds the verification.
Bench timed_bench(const GemmTuneHooks& hooks, const TuneOptions& options) {
  Bench bench;
  bench.compile = hooks.compile;
  bench.time = [&hooks, &options](const KernelSpec& s) {
    return timed([&] { hooks.run(s); }, options);
  };
  return bench;
}

}  // namespace

double gemm_tolerance(const GemmArgs& a) {
  return tolerance_of(a.d_dtype, a.fast_accum);
}
double gemm_tolerance(const GroupedGemmArgs& a) {
  return tolerance_of(a.d_dtype, a.fast_accum);
}

namespace {
// The SMs the candidates are ranked for: the call's budget (GemmArgs::max_sms) where it has one.
int sms_of(const driver::DeviceInfo& dev, int max_sms) {
  return max_sms > 0 ? std::min(dev.sm_count, max_sms) : dev.sm_count;
}
}  // namespace

TuneResult tune_gemm(const GemmArgs& a, const GemmTuneHooks& hooks, const TuneOptions& options) {
  const driver::DeviceInfo dev = driver::device_info();
  GemmProblem problem{a.a_format, a.b_format, a.d_dtype, a.scale_mode, a.bias != nullptr, a.fast_accum};
  const std::vector<KernelSpec> candidates =
      gemm_candidates(problem, a.m, a.n, a.k, sms_of(dev, a.max_sms), dev.max_smem_optin, options.top_k);
  // The reference once per sweep; every candidate is checked against it.
  DeviceBuffer ref(static_cast<std::size_t>(a.m * a.n) * sizeof(double));
  reference::gemm_on_device(a, static_cast<double*>(ref.get()), nullptr);
  std::vector<double> ref_host(static_cast<std::size_t>(a.m * a.n));
  ref.download(ref_host.data(), ref.size());
  const std::int64_t ldd = a.ldd ? a.ldd : a.n;
  const std::size_t d_bytes = static_cast<std::size_t>(a.m * ldd) * dtype_size(a.d_dtype);

  Bench bench = timed_bench(hooks, options);
  bench.verify = [&](const KernelSpec& s) -> std::string {
    // Poison D (NaN in every output type), run once, compare.
    driver::check(driver::api().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(a.d), 0xFF, d_bytes, nullptr), "poison D");
    hooks.run(s);
    driver::check(driver::api().cuCtxSynchronize(), "candidate gemm");
    std::vector<unsigned char> d(d_bytes);
    driver::check(driver::api().cuMemcpyDtoH(d.data(), reinterpret_cast<CUdeviceptr>(a.d), d_bytes), "download D");
    const double err = reference::relative_error(d.data(), ldd, a.d_dtype, ref_host.data(), a.m, a.n);
    if (err <= gemm_tolerance(a)) return "";
    return fmt::format("relative error {:.3e} above {:.0e}", err, gemm_tolerance(a));
  };
  return run_sweep(candidates, bench, options);
}

TuneResult tune_grouped_gemm(const GroupedGemmArgs& a, const GemmTuneHooks& hooks,
                             const TuneOptions& options) {
  const driver::DeviceInfo dev = driver::device_info();
  const GemmProblem problem{a.a_format, a.b_format,   a.d_dtype, a.scale_mode,
                            false,      a.fast_accum, a.layout};
  const std::vector<KernelSpec> candidates = grouped_gemm_candidates(
      problem, a.groups, a.expected_m, a.n, a.k, sms_of(dev, a.max_sms), dev.max_smem_optin, options.top_k);
  const GroupedReference ref(a);  // once per sweep, group by group
  Bench bench = timed_bench(hooks, options);
  if (!options.more_group_rows.empty()) {
    if (!hooks.run_on_rows)
      throw_invalid("more_group_rows", std::to_string(options.more_group_rows.size()) + " tables",
                    "this runtime cannot launch on another group table");
    bench.time = [&options, &hooks](const KernelSpec& s) {
      std::vector<Timing> t = {timed([&] { hooks.run(s); }, options)};
      for (const int* rows : options.more_group_rows)
        t.push_back(timed([&] { hooks.run_on_rows(s, rows); }, options));
      return geometric_mean_timing(t);
    };
  }
  bench.verify = [&](const KernelSpec& s) -> std::string {
    ref.poison_d();
    hooks.run(s);
    return ref.check().failure(gemm_tolerance(a));
  };
  return run_sweep(candidates, bench, options);
}

}  // namespace fp8jit
