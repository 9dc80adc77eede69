// fp8jit from C++: quantize bf16 activations (1x128 groups) and weights (128x128 blocks) to E4M3,
// multiply them with a block-scaled FP8 GEMM (DeepSeek-V3 style) into bf16, and check the result
// against a float64 host product of the dequantized operands.
//
// Exit status: 0 on success, 1 on a wrong result or an error, 77 when there is no Hopper GPU.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

#include <fp8jit/fp8jit.hpp>

#define CUDA_CHECK(expr)                                                                   \
  do {                                                                                     \
    cudaError_t err_ = (expr);                                                             \
    if (err_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s failed: %s\n", #expr, cudaGetErrorString(err_));            \
      return 1;                                                                            \
    }                                                                                      \
  } while (0)

namespace {

constexpr std::int64_t M = 256, N = 512, K = 1024;  // activations [M, K], weights [N, K]

template <class T>
T* device_alloc(std::int64_t count) {
  void* p = nullptr;
  return cudaMalloc(&p, count * sizeof(T)) == cudaSuccess ? static_cast<T*>(p) : nullptr;
}

int run() {
  using namespace fp8jit;

  // Random bf16 inputs, made on the host.
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint16_t> x_host(M * K), w_host(N * K);
  for (auto& v : x_host) v = fp8::float_to_bf16(normal(rng));
  for (auto& v : w_host) v = fp8::float_to_bf16(0.05f * normal(rng));

  // Scale tensor sizes: A by 1x128 groups in the TMA layout the GEMM reads, B by 128x128 blocks.
  const std::int64_t sx_count = scale_count(Granularity::group128, ScaleLayout::col_major_tma, M, K);
  const std::int64_t sw_count = scale_count(Granularity::block128, ScaleLayout::row_major, N, K);

  auto* x = device_alloc<std::uint16_t>(M * K);
  auto* w = device_alloc<std::uint16_t>(N * K);
  auto* xq = device_alloc<std::uint8_t>(M * K);
  auto* wq = device_alloc<std::uint8_t>(N * K);
  auto* sx = device_alloc<float>(sx_count);
  auto* sw = device_alloc<float>(sw_count);
  auto* d = device_alloc<std::uint16_t>(M * N);
  if (!x || !w || !xq || !wq || !sx || !sw || !d) {
    std::fprintf(stderr, "cudaMalloc failed\n");
    return 1;
  }
  CUDA_CHECK(cudaMemcpy(x, x_host.data(), M * K * 2, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(w, w_host.data(), N * K * 2, cudaMemcpyHostToDevice));

  cudaStream_t stream = nullptr;  // the legacy default stream; cudaStream_t is a CUstream

  // Activations: one scale per 1x128 group of a row, laid out column-major for TMA.
  QuantizeArgs qx;
  qx.x = x, qx.m = M, qx.k = K, qx.q = xq, qx.scales = sx;
  qx.granularity = Granularity::group128;
  qx.scale_layout = ScaleLayout::col_major_tma;
  quantize(qx, stream);  // the first call generates, compiles and caches the kernel

  // Weights: one scale per 128x128 block, row-major.
  QuantizeArgs qw;
  qw.x = w, qw.m = N, qw.k = K, qw.q = wq, qw.scales = sw;
  qw.granularity = Granularity::block128;
  qw.scale_layout = ScaleLayout::row_major;
  quantize(qw, stream);

  // D [M, N] = dequant(xq) . dequant(wq)^T, in bf16.
  GemmArgs g;
  g.a = xq, g.b = wq, g.d = d, g.d_dtype = DType::bf16;
  g.m = M, g.n = N, g.k = K;
  g.scale_mode = ScaleMode::block;
  g.scale_a = sx, g.scale_a_size = sx_count, g.scale_a_layout = ScaleLayout::col_major_tma;
  g.scale_b = sw, g.scale_b_size = sw_count, g.scale_b_layout = ScaleLayout::row_major;
  gemm(g, stream);  // the kernel is picked for this shape by the runtime's heuristic
  CUDA_CHECK(cudaStreamSynchronize(stream));

  // Host check: dequantize what the GPU produced and multiply in float64.
  std::vector<std::uint8_t> xq_h(M * K), wq_h(N * K);
  std::vector<float> sx_h(sx_count), sw_h(sw_count);
  std::vector<std::uint16_t> d_h(M * N);
  CUDA_CHECK(cudaMemcpy(xq_h.data(), xq, M * K, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(wq_h.data(), wq, N * K, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(sx_h.data(), sx, sx_count * 4, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(sw_h.data(), sw, sw_count * 4, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(d_h.data(), d, M * N * 2, cudaMemcpyDeviceToHost));
  const std::int64_t groups = K / 128, m_padded = (M + 3) / 4 * 4;
  std::vector<double> a(M * K), b(N * K);
  for (std::int64_t r = 0; r < M; ++r)
    for (std::int64_t c = 0; c < K; ++c)  // col_major_tma: scale (r, g) at g * align4(M) + r
      a[r * K + c] = fp8::to_float(xq_h[r * K + c], Fp8Format::e4m3) * double(sx_h[c / 128 * m_padded + r]);
  for (std::int64_t r = 0; r < N; ++r)
    for (std::int64_t c = 0; c < K; ++c)  // row_major blocks: scale (r/128, c/128)
      b[r * K + c] = fp8::to_float(wq_h[r * K + c], Fp8Format::e4m3) * double(sw_h[r / 128 * groups + c / 128]);

  double err2 = 0, ref2 = 0;
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double ref = 0;
      for (std::int64_t k = 0; k < K; ++k) ref += a[i * K + k] * b[j * K + k];
      const double got = fp8::bf16_to_float(d_h[i * N + j]);
      err2 += (got - ref) * (got - ref);
      ref2 += ref * ref;
    }
  const double rel = std::sqrt(err2 / ref2);
  std::printf("fp8 gemm %lldx%lldx%lld: relative error %.3e (bf16 output)\n", (long long)M,
              (long long)N, (long long)K, rel);

  for (void* p : {(void*)x, (void*)w, (void*)xq, (void*)wq, (void*)sx, (void*)sw, (void*)d}) cudaFree(p);
  return rel < 4e-3 ? 0 : 1;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::puts("no GPU: skipping");
    return 77;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major != 9) {
    std::printf("%s is not a Hopper GPU (sm_90): skipping\n", prop.name);
    return 77;
  }
  try {
    return run();
  } catch (const std::exception& e) {  // fp8jit::Error says what failed and how to fix it
    std::fprintf(stderr, "fp8jit: %s\n", e.what());
    return 1;
  }
}
