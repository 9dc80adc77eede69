// Launch sequences of quantize and dequantize: parameter blocks and grids. Nothing here
// allocates or synchronises, so a launch can be captured in a CUDA graph.
#include <algorithm>

#include "fp8jit/error.hpp"
#include "fp8jit/quant/params.cuh"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/elementwise.hpp"

namespace fp8jit::ops {
namespace {

constexpr std::int64_t kGroup = 128;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// (rs, cs) such that scale (i, j) sits at i * rs + j * cs for a tensor with `rows` scale rows.
void scale_strides(Granularity g, ScaleLayout layout, std::int64_t rows, std::int64_t groups,
                   long long& rs, long long& cs) {
  if (g == Granularity::tensor) { rs = cs = 0; return; }
  if (g == Granularity::row) { rs = 1; cs = 0; return; }
  if (layout == ScaleLayout::row_major) { rs = groups; cs = 1; return; }
  rs = 1;
  cs = (rows + 3) / 4 * 4;  // TMA needs 16-byte aligned columns
}

std::int64_t scale_rows(Granularity g, std::int64_t m) {
  return g == Granularity::block128 ? ceil_div(m, kGroup) : m;
}

LaunchConfig config(unsigned grid_x, unsigned grid_y, int threads, int smem, CUstream stream, bool pdl) {
  LaunchConfig c;
  c.pdl = pdl;
  c.grid[0] = grid_x;
  c.grid[1] = grid_y;
  c.block[0] = static_cast<unsigned>(threads);
  c.smem_bytes = static_cast<unsigned>(smem);
  c.stream = stream;
  return c;
}

dev::QuantParams quant_params(const QuantizeArgs& a, bool vector_ok, float* col_partials) {
  dev::QuantParams p{};
  p.x = a.x;
  p.ldx = a.ldx;
  p.q = a.q;
  p.ldq = a.ldq;
  p.qt = a.qt;
  p.ldqt = a.ldqt;
  p.scales = a.scales;
  scale_strides(a.granularity, a.scale_layout, scale_rows(a.granularity, a.m), ceil_div(a.k, kGroup),
                p.scale_rs, p.scale_cs);
  p.scales_t = a.scales_t;
  if (a.scales_t)  // 1x128 groups or rows of the transpose [k, m]
    scale_strides(a.granularity, a.scale_layout, a.k, ceil_div(a.m, kGroup), p.scale_t_rs, p.scale_t_cs);
  p.static_scale = a.static_scale;
  p.amax_out = a.amax;
  p.tensor_amax = a.scales;  // dynamic per-tensor: scales[0] holds the amax until finalize
  p.M = static_cast<int>(a.m);
  p.K = static_cast<int>(a.k);
  p.pow2 = a.pow2_scale ? 1 : 0;
  p.vector_ok = vector_ok ? 1 : 0;
  p.col_partials = col_partials;
  p.col_sums = a.column_sums;
  return p;
}

// The cast and, around it, the amax pass and finalize of the scalings that have them.
void launch_cast(const LoadedKernel& k, const QuantizeArgs& a, CUstream stream, bool pdl,
                 dev::QuantParams p) {
  const ElementwiseConfig c = elementwise_config_of(k.spec);
  const QuantizeProblem prob = quantize_problem_of(k.spec);
  const auto& cu = driver::api();
  const std::int64_t segments = a.m * ceil_div(a.k, kGroup);
  const std::int64_t per_cta = (c.threads / (kGroup / c.vec)) * c.unroll;
  const auto stream_grid = static_cast<unsigned>(ceil_div(segments, per_cta));
  void* args[] = {&p};
  const bool dynamic_tensor = prob.granularity == Granularity::tensor;  // 3 kernels: amax, quantize, finalize
  std::size_t main = 0;
  if (prob.granularity == Granularity::row && prob.transpose) {
    // Rows and columns of x: their amaxes into scales and scales_t (zeroed first), the cast, then
    // the amaxes turned into scales.
    driver::check(cu.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(a.scales), 0, a.m, stream), "cuMemsetD32Async(scales)");
    driver::check(cu.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(a.scales_t), 0, a.k, stream),
                  "cuMemsetD32Async(scales_t)");
    if (p.amax_out)
      driver::check(cu.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(p.amax_out), 0, 1, stream), "cuMemsetD32Async(amax)");
    const LaunchConfig tiles = config(static_cast<unsigned>(ceil_div(a.k, kGroup)),
                                      static_cast<unsigned>(ceil_div(a.m, kGroup)), c.threads, 0, stream, pdl);
    fp8jit::launch(k.functions[0], tiles, args);
    LaunchConfig cast = tiles;
    cast.smem_bytes = static_cast<unsigned>(k.smem_bytes);
    fp8jit::launch(k.functions[1], cast, args);
    fp8jit::launch(k.functions[2],
                   config(static_cast<unsigned>(std::min<std::int64_t>(ceil_div(a.m + a.k, 256), 1024)), 1, 256, 0,
                          stream, pdl),
                   args);
    return;
  }
  if (dynamic_tensor) {
    if (!a.static_scale) {
      driver::check(cu.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(a.scales), 0, 1, stream), "cuMemsetD32Async(scales)");
      // The amax pass walks the tensor with a grid of at most what an H100/H200 holds at once
      // (132 SMs x 2048 threads), one atomic per CTA (StreamQuantizer::amax_pass).
      const auto amax_grid = std::min<unsigned>(stream_grid, std::max(1, 132 * 2048 / c.threads));
      fp8jit::launch(k.functions[0], config(amax_grid, 1, c.threads, 0, stream, pdl), args);
      p.amax_out = nullptr;  // finalize copies the tensor amax
    }
    main = 1;
  }
  if (p.amax_out)
    driver::check(cu.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(p.amax_out), 0, 1, stream), "cuMemsetD32Async(amax)");
  LaunchConfig lc;
  if (prob.granularity == Granularity::block128 || prob.transpose)
    lc = config(static_cast<unsigned>(ceil_div(a.k, kGroup)), static_cast<unsigned>(ceil_div(a.m, kGroup)),
                c.threads, k.smem_bytes, stream, pdl);
  else if (prob.granularity == Granularity::row)
    lc = config(static_cast<unsigned>(ceil_div(a.m, c.threads / 32)), 1, c.threads, 0, stream, pdl);
  else
    lc = config(stream_grid, 1, c.threads, 0, stream, pdl);
  fp8jit::launch(k.functions[main], lc, args);
  if (dynamic_tensor) {
    p.amax_out = a.static_scale ? nullptr : a.amax;
    fp8jit::launch(k.functions[2], config(1, 1, 32, 0, stream, pdl), args);
  }
}

}  // namespace

std::size_t column_partial_bytes(const QuantizeArgs& a) {
  return a.column_sums ? static_cast<std::size_t>(ceil_div(a.m, kGroup) * a.k) * sizeof(float) : 0;
}

void launch(const LoadedKernel& k, const QuantizeArgs& a, CUstream stream, bool pdl,
            float* col_partials) {
  pdl = pdl && k.pdl;  // builds before sm_90 have no griddepcontrol.wait
  const bool sums = quantize_problem_of(k.spec).column_sums;
  if (sums && !col_partials)
    throw Error(ErrorKind::internal,
                "quantize: a column-sums kernel launched without its partial sums' memory");
  dev::QuantParams p =
      quant_params(a, max_vec(a) >= elementwise_config_of(k.spec).vec, col_partials);
  launch_cast(k, a, stream, pdl, p);
  if (!sums) return;
  // The cast wrote each 128-row tile's column sums; fp8jit_colsum (the last entry point) adds
  // them in tile order, a thread per column.
  void* args[] = {&p};
  fp8jit::launch(k.functions.back(),
                 config(static_cast<unsigned>(ceil_div(a.k, dev::kColumnSumThreads)), 1,
                        dev::kColumnSumThreads, 0, stream, pdl),
                 args);
}

void launch(const LoadedKernel& k, const DequantizeArgs& a, CUstream stream, bool pdl) {
  pdl = pdl && k.pdl;  // builds before sm_90 have no griddepcontrol.wait
  const ElementwiseConfig c = elementwise_config_of(k.spec);
  dev::DequantParams p{};
  p.q = a.q;
  p.ldq = a.ldq;
  p.y = a.y;
  p.ldy = a.ldy;
  p.scales = a.scales;
  scale_strides(a.granularity, a.scale_layout, scale_rows(a.granularity, a.m), ceil_div(a.k, kGroup),
                p.scale_rs, p.scale_cs);
  p.M = static_cast<int>(a.m);
  p.K = static_cast<int>(a.k);
  p.vector_ok = max_vec(a) >= c.vec ? 1 : 0;
  const std::int64_t segments = a.m * ceil_div(a.k, c.vec);
  void* args[] = {&p};
  fp8jit::launch(k.functions[0],
                 config(static_cast<unsigned>(ceil_div(segments, std::int64_t{c.threads} * c.unroll)), 1,
                        c.threads, 0, stream, pdl),
                 args);
}

}  // namespace fp8jit::ops
