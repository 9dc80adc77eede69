// fp8jit gemm: one scaled FP8 GEMM on the GPU, checked against the float64 reference, timed.
#include <fmt/format.h>

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

// Quantizes a random bf16 [rows, k] tensor on the GPU into `q` and `scales` with granularity g.
void make_operand(Runtime& rt, std::int64_t rows, std::int64_t k, Fp8Format f, Granularity g, ScaleLayout layout,
                  DeviceBuffer& q, DeviceBuffer& scales, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<unsigned char> h(static_cast<std::size_t>(rows * k) * 2);
  for (std::int64_t i = 0; i < rows * k; ++i)
    fp8::store_from_float(h.data(), static_cast<std::size_t>(i), DType::bf16, dist(rng) * (i % 331 == 0 ? 20.0f : 1.0f));
  DeviceBuffer x(h.size());
  x.upload(h.data(), h.size());
  QuantizeArgs a;
  a.x = x.get();
  a.m = rows;
  a.k = k;
  a.q = q.get();
  a.format = f;
  a.scales = scales.f32();
  a.granularity = g;
  a.scale_layout = layout;
  rt.quantize(a, nullptr);
  driver::check(driver::api().cuCtxSynchronize(), "quantize operand");
}

}  // namespace

int cmd_gemm(const Args& args) {
  if (!driver::available()) throw Error(ErrorKind::driver, "fp8jit gemm needs a GPU: " + driver::unavailable_reason());
  GemmArgs g;
  g.m = args.get_int("m", 4096);
  g.n = args.get_int("n", 7168);
  g.k = args.get_int("k", 7168);
  const std::string scale = args.get_or("scale", "block"), out = args.get_or("out", "bf16");
  auto mode = parse_scale_mode(scale);
  if (!mode) throw_invalid("--scale", scale, "tensor, rowwise, block or group");
  auto dtype = parse_dtype(out);
  if (!dtype) throw_invalid("--out", out, "bf16, fp16 or fp32");
  auto fa = parse_fp8_format(args.get_or("a-format", "e4m3")), fb = parse_fp8_format(args.get_or("b-format", "e4m3"));
  if (!fa || !fb) throw_invalid("--a-format/--b-format", args.get_or("a-format", "e4m3") + "/" + args.get_or("b-format", "e4m3"), "e4m3 or e5m2");
  g.scale_mode = *mode;
  g.d_dtype = *dtype;
  g.a_format = *fa;
  g.b_format = *fb;
  g.fast_accum = args.flag("fast-accum");
  const int iters = static_cast<int>(args.get_int("iters", 20));
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || iters <= 0)
    throw_invalid("--m/--n/--k/--iters", fmt::format("{}/{}/{}/{}", g.m, g.n, g.k, iters), "must be positive");
  Runtime rt;
  const Granularity ga = g.scale_mode == ScaleMode::tensor ? Granularity::tensor
                         : g.scale_mode == ScaleMode::rowwise ? Granularity::row : Granularity::group128;
  const Granularity gb = g.scale_mode == ScaleMode::tensor ? Granularity::tensor
                         : g.scale_mode == ScaleMode::rowwise ? Granularity::row
                         : g.scale_mode == ScaleMode::block ? Granularity::block128 : Granularity::group128;
  g.scale_a_layout = ScaleLayout::col_major_tma;
  g.scale_b_layout = g.scale_mode == ScaleMode::group ? ScaleLayout::col_major_tma : ScaleLayout::row_major;
  g.scale_a_size = scale_count(ga, g.scale_a_layout, g.m, g.k);
  g.scale_b_size = scale_count(gb, g.scale_b_layout, g.n, g.k);
  DeviceBuffer a(g.m * g.k), b(g.n * g.k), sa(4 * g.scale_a_size), sb(4 * g.scale_b_size);
  make_operand(rt, g.m, g.k, g.a_format, ga, g.scale_a_layout, a, sa, 1);
  make_operand(rt, g.n, g.k, g.b_format, gb, g.scale_b_layout, b, sb, 2);
  DeviceBuffer d(g.m * g.n * dtype_size(g.d_dtype)), ref(g.m * g.n * 8);
  d.fill(0xFF);  // NaN in every output type: an unwritten element cannot pass
  g.a = a.get();
  g.b = b.get();
  g.scale_a = sa.f32();
  g.scale_b = sb.f32();
  g.d = d.get();
  const std::string kernel = spec_name(rt.select(g));
  rt.gemm(g, nullptr);
  driver::check(driver::api().cuCtxSynchronize(), "gemm");
  reference::gemm_on_device(g, static_cast<double*>(ref.get()), nullptr);
  std::vector<unsigned char> dh(d.size());
  std::vector<double> rh(g.m * g.n);
  d.download(dh.data(), dh.size());
  ref.download(rh.data(), ref.size());
  const double err = reference::relative_error(dh.data(), g.n, g.d_dtype, rh.data(), g.m, g.n);
  // fast accumulation trades precision for speed: it is held to the bf16 bound.
  const double tol = (g.d_dtype == DType::fp32 && !g.fast_accum) ? 1e-3 : 4e-3;
  const double ms = time_median_ms([&] { rt.gemm(g, nullptr); }, 3, iters);
  const double tflops = 2.0 * g.m * g.n * g.k / (ms * 1e-3) * 1e-12;
  fmt::print("{} [{}x{}x{}] on {}: {:.3f} ms, {:.1f} TFLOP/s, relative error {:.2e} ({} {:.0e})\n", kernel, g.m, g.n,
             g.k, driver::device_info().name, ms, tflops, err, err <= tol ? "within" : "ABOVE", tol);
  return err <= tol ? 0 : 1;
}

}  // namespace fp8jit::cli

namespace fp8jit::cli {

// The heuristic's gemm spec for a shape, as JSON (for `fp8jit compile --spec`).
int cmd_select_gemm(const Args& args) {
  GemmProblem p;
  const std::string scale = args.get_or("scale", "block"), out = args.get_or("out", "bf16");
  auto mode = parse_scale_mode(scale);
  auto dtype = parse_dtype(out);
  if (!mode) throw_invalid("--scale", scale, "tensor, rowwise, block or group");
  if (!dtype) throw_invalid("--out", out, "bf16, fp16 or fp32");
  p.scale = *mode;
  p.out = *dtype;
  p.fast_accum = args.flag("fast-accum");
  const std::int64_t m = args.get_int("m", 4096), n = args.get_int("n", 7168), k = args.get_int("k", 7168);
  if (m <= 0 || n <= 0 || k <= 0) throw_invalid("--m/--n/--k", fmt::format("{}/{}/{}", m, n, k), "must be positive");
  int sms = 132, smem = 232448;
  if (driver::available()) {
    sms = driver::device_info().sm_count;
    smem = driver::device_info().max_smem_optin;
  }
  fmt::print("{}\n", spec_to_json(default_gemm_spec(p, m, n, k, sms, smem)));
  return 0;
}

}  // namespace fp8jit::cli
