// quantize, dequantize, demo: run kernels on the GPU, check them against the host reference,
// report GB/s against the device-to-device copy bandwidth of the same run.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/dims.hpp"
#include "tools/cli.hpp"
#include "tools/demo.hpp"
#include "tools/options.hpp"
#include "autotune/timer.hpp"

namespace fp8jit::cli {
namespace {

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
  DeviceBuffer x(x_host.size()), q(n), s(ns * 4), qt(a.qt ? n : 0), st(a.scales_t ? 4 * scale_count(a.granularity, a.scale_layout, a.k, a.m) : 0);
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


struct QuantOptions {
  std::int64_t m = 8192, k = 7168;
  std::string input = "bf16", format = "e4m3", granularity = "1x128", layout = "row_major";
  bool pow2 = false, transpose = false;
  int iters = 20;
};

QuantizeArgs quantize_args_from(const QuantOptions& o) {
  QuantizeArgs a;
  a.m = o.m;
  a.k = o.k;
  a.input = *parse_dtype(o.input);  // the option's IsMember check admitted only parseable names
  a.format = *parse_fp8_format(o.format);
  a.granularity = *parse_granularity(o.granularity);
  a.scale_layout = *parse_scale_layout(o.layout);
  a.pow2_scale = o.pow2;
  if (o.transpose) {
    a.qt = reinterpret_cast<void*>(16);  // placeholder: replaced by a device buffer
    if (a.granularity == Granularity::group128 || a.granularity == Granularity::row)
      a.scales_t = reinterpret_cast<float*>(16);
  }
  return a;
}

int quantize(const QuantOptions& o) {
  check_quant_dims(o.m, o.k);
  QuantizeArgs a = quantize_args_from(o);
  require_gpu();
  Runtime rt;
  const auto x = random_input(a.m, a.k, a.input, 1234);
  const QuantRun r = run_quantize(rt, a, o.iters, nullptr, nullptr, x);
  const double copy_gbps = r.bytes / copy_median_ms(r.bytes / 2, o.iters) * 1e-6;
  fmt::print("{} [{}x{}]: {:.3f} ms, {:.0f} GB/s = {:.1f}% of copy ({:.0f} GB/s); {} vs host reference\n", r.kernel,
             a.m, a.k, r.ms, r.gbps, 100 * r.gbps / copy_gbps, copy_gbps,
             r.mismatches ? fmt::format("{} MISMATCHES", r.mismatches) : "bit-exact");
  return r.mismatches ? 1 : 0;
}

int dequantize(const QuantOptions& o) {
  check_quant_dims(o.m, o.k);
  require_gpu();
  DequantizeArgs d;
  d.m = o.m;
  d.k = o.k;
  d.format = *parse_fp8_format(o.format);
  d.output = *parse_dtype(o.input);  // --output binds the same field as quantize's --input
  d.granularity = *parse_granularity(o.granularity);
  d.scale_layout = *parse_scale_layout(o.layout);
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
  const double ms = time_median_ms([&] { rt.dequantize(d, nullptr); }, 3, o.iters);
  const double copy_gbps = bytes / copy_median_ms(bytes / 2, o.iters) * 1e-6;
  const double gbps = bytes / ms * 1e-6;
  fmt::print("{} [{}x{}]: {:.3f} ms, {:.0f} GB/s = {:.1f}% of copy ({:.0f} GB/s); {}\n", spec_name(rt.select(d)), d.m,
             d.k, ms, gbps, 100 * gbps / copy_gbps, copy_gbps,
             mismatches ? fmt::format("{} MISMATCHED BYTES", mismatches) : "bit-exact vs host reference");
  return mismatches ? 1 : 0;
}

// Round trip: bf16 -> E4M3 with 1x128 scales -> bf16, on a DeepSeek-V3-sized activation.
int demo_on_gpu(std::int64_t m, std::int64_t k) {
  check_quant_dims(m, k);
  QuantizeArgs a;
  a.m = m;
  a.k = k;
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

}  // namespace

void add_run_commands(CLI::App& app) {
  const std::vector<std::string> dtypes = {"bf16", "fp16", "fp32"}, formats = {"e4m3", "e5m2"},
                                 grans = {"tensor", "row", "1x128", "128x128"}, layouts = {"row_major", "col_major_tma"};
  auto* q = app.add_subcommand("quantize", "GPU: quantize a random tensor, check it bit for bit, report GB/s");
  auto qo = std::make_shared<QuantOptions>();
  q->add_option("--m", qo->m, "rows")->check(quant_dim('m'))->capture_default_str();
  q->add_option("--k", qo->k, "columns")->check(quant_dim('k'))->capture_default_str();
  add_choice(q, "--input", qo->input, dtypes, "input dtype");
  add_choice(q, "--format", qo->format, formats, "FP8 format");
  add_choice(q, "--granularity", qo->granularity, grans, "scale granularity");
  add_choice(q, "--layout", qo->layout, layouts, "scale layout");
  q->add_flag("--pow2", qo->pow2, "round scales up to powers of two");
  q->add_flag("--transpose", qo->transpose, "also write the transposed output");
  q->add_option("--iters", qo->iters, "timed iterations")->check(integer_in(1, 100000))->capture_default_str();
  on_run(q, [=] { return quantize(*qo); });

  auto* d = app.add_subcommand("dequantize", "GPU: dequantize random FP8 data, check it bit for bit, report GB/s");
  auto dq = std::make_shared<QuantOptions>();
  dq->m = 7168, dq->k = 16384, dq->granularity = "128x128";
  d->add_option("--m", dq->m, "rows")->check(quant_dim('m'))->capture_default_str();
  d->add_option("--k", dq->k, "columns")->check(quant_dim('k'))->capture_default_str();
  add_choice(d, "--format", dq->format, formats, "FP8 format");
  add_choice(d, "--output", dq->input, dtypes, "output dtype");
  add_choice(d, "--granularity", dq->granularity, grans, "scale granularity");
  add_choice(d, "--layout", dq->layout, layouts, "scale layout");
  d->add_option("--iters", dq->iters, "timed iterations")->check(integer_in(1, 100000))->capture_default_str();
  on_run(d, [=] { return dequantize(*dq); });

  auto* demo = app.add_subcommand(
      "demo", "with a GPU: bf16 -> E4M3 -> bf16 round trip, checked, in GB/s; without: the kernels it would run, compiled");
  auto m = std::make_shared<std::int64_t>(16384), k = std::make_shared<std::int64_t>(7168);
  auto jobs = std::make_shared<int>(1);
  demo->add_option("--m", *m, "rows of the activation")->check(quant_dim('m'))->capture_default_str();
  demo->add_option("--k", *k, "columns of the activation")->check(quant_dim('k'))->capture_default_str();
  add_jobs(demo, *jobs);
  on_run(demo, [=] { return driver::available() ? demo_on_gpu(*m, *k) : demo_without_gpu(resolve_jobs(*jobs)); });
}

}  // namespace fp8jit::cli
