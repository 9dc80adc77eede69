#include "autotune/gemm_tuning.hpp"

#include <fmt/format.h>

#include "autotune/timer.hpp"
#include "autotune/tuner.hpp"
#include "fp8jit/reference.hpp"
#include "runtime/jit/driver.hpp"

namespace fp8jit {

double gemm_tolerance(const GemmArgs& a) { return a.d_dtype == DType::fp32 && !a.fast_accum ? 1e-3 : 4e-3; }

TuneResult tune_gemm(const GemmArgs& a, const GemmTuneHooks& hooks, const TuneOptions& options) {
  const driver::DeviceInfo dev = driver::device_info();
  GemmProblem problem{a.a_format, a.b_format, a.d_dtype, a.scale_mode, a.bias != nullptr, a.fast_accum};
  const std::vector<KernelSpec> candidates =
      gemm_candidates(problem, a.m, a.n, a.k, dev.sm_count, dev.max_smem_optin, options.top_k);
  // The reference once per sweep; every candidate is checked against it.
  DeviceBuffer ref(static_cast<std::size_t>(a.m * a.n) * sizeof(double));
  reference::gemm_on_device(a, static_cast<double*>(ref.get()), nullptr);
  std::vector<double> ref_host(static_cast<std::size_t>(a.m * a.n));
  ref.download(ref_host.data(), ref.size());
  const std::int64_t ldd = a.ldd ? a.ldd : a.n;
  const std::size_t d_bytes = static_cast<std::size_t>(a.m * ldd) * dtype_size(a.d_dtype);

  Bench bench;
  bench.compile = hooks.compile;
  bench.time = [&](const KernelSpec& s) {
    const std::vector<double> ms = time_samples_ms([&] { hooks.run(s); }, options.warmup, options.iters);
    std::vector<double> us;
    for (double x : ms) us.push_back(x * 1e3);
    return summarize(us);
  };
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

}  // namespace fp8jit
