// quantize, dequantize, demo: run kernels on the GPU, check them against the host reference,
// report GB/s against the device-to-device copy bandwidth of the same run.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <random>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "runtime/driver.hpp"
#include "tools/cli.hpp"
#include "autotune/timer.hpp"

namespace fp8jit::cli {
namespace {

template <class T, class F> T parse_or_throw(const Args& a, const char* name, const char* def, F parse, const char* rule) {
  const std::string s = a.get_or(name, def);
  auto v = parse(s);
  if (!v) throw_invalid(std::string("--") + name, s, rule);
  return *v;
}

// Normal values with a few large outliers per row, as activations have.
std::vector<unsigned char> random_input(std::int64_t m, std::int64_t k, DType t, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<unsigned char> h(static_cast<std::size_t>(m * k) * dtype_size(t));
  for (std::int64_t i = 0; i < m * k; ++i) {
    float v = dist(rng);
    if (i % 977 == 0) v *= 40.0f;
    fp8::store_from_float(h.data(), static_cast<std::size_t>(i), t, v);
  }
  return h;
}

void require_gpu() {
  if (!driver::available())
    throw Error(ErrorKind::driver, "this command needs a GPU: " + driver::unavailable_reason());
}

struct QuantRun {
  std::string kernel;
  double ms = 0, gbps = 0;
  std::size_t bytes = 0;
  std::int64_t mismatches = 0;
};

QuantRun run_quantize(Runtime& rt, QuantizeArgs a, int iters, std::vector<unsigned char>* q_out,
                      std::vector<float>* s_out, const std::vector<unsigned char>& x_host) {
  const std::size_t n = static_cast<std::size_t>(a.m * a.k);
  const std::int64_t ns = scale_count(a.granularity, a.scale_layout, a.m, a.k);
  DeviceBuffer x(x_host.size()), q(n), s(ns * 4), qt(a.qt ? n : 0), st(a.scales_t ? 4 * scale_count(Granularity::group128, a.scale_layout, a.k, a.m) : 0);
  x.upload(x_host.data(), x_host.size());
  q.fill(0xA5);  // poison
  s.fill(0xFF);
  a.x = x.get();
  a.q = q.get();
  a.scales = s.f32();
  if (a.qt) { a.qt = qt.get(); a.scales_t = a.scales_t ? st.f32() : nullptr; }
  rt.quantize(a, nullptr);
  driver::check(driver::api().cuCtxSynchronize(), "quantize");
  QuantRun r;
  r.kernel = spec_name(rt.select(a));
  std::vector<unsigned char> got(n), want(n);
  std::vector<float> got_s(ns), want_s(ns);
  q.download(got.data(), n);
  s.download(got_s.data(), ns * 4);
  QuantizeArgs h = a;
  h.x = x_host.data();
  h.q = want.data();
  h.scales = want_s.data();
  h.qt = nullptr;
  h.scales_t = nullptr;
  h.amax = nullptr;
  reference::quantize(h);
  for (std::size_t i = 0; i < n; ++i) r.mismatches += got[i] != want[i];
  for (std::int64_t i = 0; i < ns; ++i) r.mismatches += std::memcmp(&got_s[i], &want_s[i], 4) != 0;
  r.bytes = x_host.size() + n + ns * 4 + (a.qt ? n : 0);
  r.ms = time_median_ms([&] { rt.quantize(a, nullptr); }, 3, iters);
  r.gbps = r.bytes / r.ms * 1e-6;
  if (q_out) *q_out = got;
  if (s_out) *s_out = got_s;
  return r;
}

QuantizeArgs quantize_args_from(const Args& args) {
  QuantizeArgs a;
  a.m = args.get_int("m", 8192);
  a.k = args.get_int("k", 7168);
  a.input = parse_or_throw<DType>(args, "input", "bf16", parse_dtype, "bf16, fp16 or fp32");
  a.format = parse_or_throw<Fp8Format>(args, "format", "e4m3", parse_fp8_format, "e4m3 or e5m2");
  a.granularity = parse_or_throw<Granularity>(args, "granularity", "1x128", parse_granularity, "tensor, row, 1x128 or 128x128");
  a.scale_layout = parse_or_throw<ScaleLayout>(args, "layout", "row_major", parse_scale_layout, "row_major or col_major_tma");
  a.pow2_scale = args.flag("pow2");
  if (args.flag("transpose")) {
    a.qt = reinterpret_cast<void*>(16);  // placeholder: replaced by a device buffer
    if (a.granularity == Granularity::group128) a.scales_t = reinterpret_cast<float*>(16);
  }
  return a;
}

}  // namespace

int cmd_quantize(const Args& args) {
  require_gpu();
  const int iters = static_cast<int>(args.get_int("iters", 20));
  QuantizeArgs a = quantize_args_from(args);
  if (a.m <= 0 || a.k <= 0) throw_invalid("--m/--k", fmt::format("{}/{}", a.m, a.k), "must be positive");
  Runtime rt;
  const auto x = random_input(a.m, a.k, a.input, 1234);
  const QuantRun r = run_quantize(rt, a, iters, nullptr, nullptr, x);
  const double copy_gbps = r.bytes / copy_median_ms(r.bytes / 2, iters) * 1e-6;
  fmt::print("{} [{}x{}]: {:.3f} ms, {:.0f} GB/s = {:.1f}% of copy ({:.0f} GB/s); {} vs host reference\n",
             r.kernel, a.m, a.k, r.ms, r.gbps, 100 * r.gbps / copy_gbps, copy_gbps,
             r.mismatches ? fmt::format("{} MISMATCHES", r.mismatches) : "bit-exact");
  return r.mismatches ? 1 : 0;
}

int cmd_dequantize(const Args& args) {
  require_gpu();
  const int iters = static_cast<int>(args.get_int("iters", 20));
  DequantizeArgs d;
  d.m = args.get_int("m", 7168);
  d.k = args.get_int("k", 16384);
  d.format = parse_or_throw<Fp8Format>(args, "format", "e4m3", parse_fp8_format, "e4m3 or e5m2");
  d.output = parse_or_throw<DType>(args, "output", "bf16", parse_dtype, "bf16, fp16 or fp32");
  d.granularity = parse_or_throw<Granularity>(args, "granularity", "128x128", parse_granularity, "tensor, row, 1x128 or 128x128");
  d.scale_layout = parse_or_throw<ScaleLayout>(args, "layout", "row_major", parse_scale_layout, "row_major or col_major_tma");
  if (d.m <= 0 || d.k <= 0) throw_invalid("--m/--k", fmt::format("{}/{}", d.m, d.k), "must be positive");
  const std::size_t n = static_cast<std::size_t>(d.m * d.k);
  const std::int64_t ns = scale_count(d.granularity, d.scale_layout, d.m, d.k);
  std::vector<unsigned char> qh(n);
  std::vector<float> sh(ns);
  std::mt19937 rng(7);
  for (auto& b : qh) b = static_cast<unsigned char>(rng() & 0xFF);
  for (auto& s : sh) s = std::ldexp(1.0f + (rng() % 1000) / 1000.0f, static_cast<int>(rng() % 20) - 10);
  DeviceBuffer q(n), s(ns * 4), y(n * dtype_size(d.output));
  q.upload(qh.data(), n);
  s.upload(sh.data(), ns * 4);
  y.fill(0xA5);
  d.q = q.get();
  d.scales = s.f32();
  d.y = y.get();
  Runtime rt;
  rt.dequantize(d, nullptr);
  driver::check(driver::api().cuCtxSynchronize(), "dequantize");
  std::vector<unsigned char> got(y.size()), want(y.size());
  y.download(got.data(), got.size());
  DequantizeArgs h = d;
  h.q = qh.data();
  h.scales = sh.data();
  h.y = want.data();
  reference::dequantize(h);
  // NaN codes decode to NaN on both sides; compare bits, so NaN payloads must agree too.
  std::int64_t mismatches = 0;
  for (std::size_t i = 0; i < got.size(); ++i) mismatches += got[i] != want[i];
  const std::size_t bytes = n + y.size() + ns * 4;
  const double ms = time_median_ms([&] { rt.dequantize(d, nullptr); }, 3, iters);
  const double copy_gbps = bytes / copy_median_ms(bytes / 2, iters) * 1e-6;
  const double gbps = bytes / ms * 1e-6;
  fmt::print("{} [{}x{}]: {:.3f} ms, {:.0f} GB/s = {:.1f}% of copy ({:.0f} GB/s); {}\n",
             spec_name(rt.select(d)), d.m, d.k, ms, gbps, 100 * gbps / copy_gbps, copy_gbps,
             mismatches ? fmt::format("{} MISMATCHED BYTES", mismatches) : "bit-exact vs host reference");
  return mismatches ? 1 : 0;
}

int cmd_demo(const Args& args) {
  if (!driver::available()) {
    fmt::print("no GPU ({}): compiling every kernel variant instead\n", driver::unavailable_reason());
    return cmd_compile_all(args);
  }
  // Round trip: bf16 -> E4M3 with 1x128 scales -> bf16, on a DeepSeek-V3-sized activation.
  QuantizeArgs a;
  a.m = args.get_int("m", 16384);
  a.k = args.get_int("k", 7168);
  if (a.m <= 0 || a.k <= 0) throw_invalid("--m/--k", fmt::format("{}/{}", a.m, a.k), "must be positive");
  Runtime rt;
  const auto x = random_input(a.m, a.k, a.input, 42);
  std::vector<unsigned char> qh;
  std::vector<float> sh;
  const QuantRun qr = run_quantize(rt, a, 20, &qh, &sh, x);
  const std::size_t n = qh.size();
  DeviceBuffer q(n), s(sh.size() * 4), y(n * 2);
  q.upload(qh.data(), n);
  s.upload(sh.data(), sh.size() * 4);
  y.fill(0xA5);
  DequantizeArgs d;
  d.q = q.get();
  d.m = a.m;
  d.k = a.k;
  d.scales = s.f32();
  d.granularity = Granularity::group128;
  d.y = y.get();
  rt.dequantize(d, nullptr);
  driver::check(driver::api().cuCtxSynchronize(), "dequantize");
  std::vector<unsigned char> yh(n * 2);
  y.download(yh.data(), yh.size());
  double err = 0, ref = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double xv = fp8::load_as_float(x.data(), i, DType::bf16), yv = fp8::load_as_float(yh.data(), i, DType::bf16);
    err += (xv - yv) * (xv - yv);
    ref += xv * xv;
  }
  const std::size_t dbytes = n + n * 2 + sh.size() * 4;
  const double dms = time_median_ms([&] { rt.dequantize(d, nullptr); }, 3, 20);
  const double copy_q = qr.bytes / copy_median_ms(qr.bytes / 2, 20) * 1e-6;
  const double copy_d = dbytes / copy_median_ms(dbytes / 2, 20) * 1e-6;
  const double rel = std::sqrt(err / ref);
  fmt::print("round trip bf16 [{}x{}] -> e4m3 (1x128 scales) -> bf16 on {}\n", a.m, a.k, driver::device_info().name);
  fmt::print("  quantize   {:.3f} ms  {:6.0f} GB/s  {:5.1f}% of copy ({:.0f} GB/s)  {}\n", qr.ms, qr.gbps,
             100 * qr.gbps / copy_q, copy_q, qr.mismatches ? "MISMATCHES vs reference" : "bit-exact vs reference");
  fmt::print("  dequantize {:.3f} ms  {:6.0f} GB/s  {:5.1f}% of copy ({:.0f} GB/s)\n", dms, dbytes / dms * 1e-6,
             100 * dbytes / dms * 1e-6 / copy_d, copy_d);
  fmt::print("  round-trip relative error {:.4f} (E4M3 carries 3 mantissa bits: expect ~0.02-0.03)\n", rel);
  return (qr.mismatches || !(rel < 0.05)) ? 1 : 0;
}

}  // namespace fp8jit::cli
