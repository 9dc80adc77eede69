#include "tools/operands.hpp"

#include <random>

#include "fp8jit/fp8.hpp"
#include "runtime/jit/driver.hpp"

namespace fp8jit::cli {
namespace {

// count values ~N(0, 1) in `dtype` on the device; every `outlier_every`-th (0: none) 20x larger,
// as activations' outliers are.
std::unique_ptr<DeviceBuffer> random_on_device(std::int64_t count, DType dtype, unsigned seed,
                                               std::int64_t outlier_every) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<unsigned char> h(static_cast<std::size_t>(count) * dtype_size(dtype));
  for (std::int64_t i = 0; i < count; ++i)
    fp8::store_from_float(h.data(), static_cast<std::size_t>(i), dtype,
                          dist(rng) * (outlier_every > 0 && i % outlier_every == 0 ? 20.0f : 1.0f));
  auto buffer = std::make_unique<DeviceBuffer>(h.size());
  buffer->upload(h.data(), h.size());
  return buffer;
}

}  // namespace

void quantize_random(Runtime& rt, std::int64_t rows, std::int64_t k, Fp8Format f, Granularity g,
                     ScaleLayout layout, void* q, float* scales, unsigned seed) {
  const std::unique_ptr<DeviceBuffer> x = random_on_device(rows * k, DType::bf16, seed, 331);
  QuantizeArgs a;
  a.x = x->get();
  a.m = rows;
  a.k = k;
  a.q = q;
  a.format = f;
  a.scales = scales;
  a.granularity = g;
  a.scale_layout = layout;
  rt.quantize(a, nullptr);
  driver::check(driver::api().cuCtxSynchronize(), "quantize operand");
}

GemmOperands make_gemm_operands(Runtime& rt, GemmArgs& g, bool bias) {
  const Granularity ga = gemm_scale_granularity_a(g.scale_mode), gb = gemm_scale_granularity_b(g.scale_mode);
  g.scale_b_layout = g.scale_mode == ScaleMode::group ? ScaleLayout::col_major_tma : ScaleLayout::row_major;
  g.scale_a_size = scale_count(ga, g.scale_a_layout, g.m, g.k);
  g.scale_b_size = scale_count(gb, g.scale_b_layout, g.n, g.k);
  GemmOperands o;
  o.a = std::make_unique<DeviceBuffer>(g.m * g.k);
  o.b = std::make_unique<DeviceBuffer>(g.n * g.k);
  o.scale_a = std::make_unique<DeviceBuffer>(4 * g.scale_a_size);
  o.scale_b = std::make_unique<DeviceBuffer>(4 * g.scale_b_size);
  o.d = std::make_unique<DeviceBuffer>(g.m * g.n * dtype_size(g.d_dtype));
  quantize_random(rt, g.m, g.k, g.a_format, ga, g.scale_a_layout, o.a->get(), o.scale_a->f32(), 1);
  quantize_random(rt, g.n, g.k, g.b_format, gb, g.scale_b_layout, o.b->get(), o.scale_b->f32(), 2);
  g.a = o.a->get();
  g.b = o.b->get();
  g.scale_a = o.scale_a->f32();
  g.scale_b = o.scale_b->f32();
  g.d = o.d->get();
  if (bias) {
    o.bias = random_on_device(g.n, g.d_dtype, 3, 0);
    g.bias = o.bias->get();
  }
  return o;
}

}  // namespace fp8jit::cli
