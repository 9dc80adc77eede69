/* fp8jit from C: quantize bf16 activations (1x128 groups) and weights (128x128 blocks) to E4M3,
 * multiply them with a block-scaled FP8 GEMM (DeepSeek-V3 style) into bf16, and check the result
 * against a double-precision host product of the dequantized operands.
 *
 * Exit status: 0 on success, 1 on a wrong result or an error, 77 when there is no Hopper GPU. */
#include <cuda_runtime_api.h>
#include <fp8jit/fp8jit.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { M = 256, N = 512, K = 1024 }; /* activations [M, K], weights [N, K] */

/* Every fp8jit call returns a status; the message of a failure is in fp8jit_last_error(). */
#define FP8JIT_CHECK(call)                                                               \
  do {                                                                                   \
    fp8jit_status st_ = (call);                                                          \
    if (st_ != FP8JIT_SUCCESS) {                                                         \
      fprintf(stderr, "%s: %s: %s\n", #call, fp8jit_status_string(st_), fp8jit_last_error()); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

#define CUDA_CHECK(call)                                                                 \
  do {                                                                                   \
    cudaError_t err_ = (call);                                                           \
    if (err_ != cudaSuccess) {                                                           \
      fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(err_));               \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)

/* float -> bf16 bits, rounding to nearest even (the inputs are finite). */
static uint16_t float_to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return (uint16_t)(bits >> 16);
}

static double bf16_to_double(uint16_t h) {
  uint32_t bits = (uint32_t)h << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* E4M3 ("e4m3fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; S.1111.111 is NaN, no inf. */
static double e4m3_to_double(uint8_t b) {
  const int exponent = (b >> 3) & 0xF, mantissa = b & 0x7;
  double v;
  if (exponent == 0xF && mantissa == 0x7) return NAN;
  if (exponent == 0)
    v = ldexp(mantissa / 8.0, -6); /* subnormal */
  else
    v = ldexp(1.0 + mantissa / 8.0, exponent - 7);
  return (b & 0x80) ? -v : v;
}

/* Uniform in [-1, 1). */
static float random_value(void) { return (float)rand() / ((float)RAND_MAX + 1.0f) * 2.0f - 1.0f; }

static int run(fp8jit_runtime* rt) {
  static uint16_t x_host[M * K], w_host[N * K], d_host[M * N];
  static uint8_t xq_host[M * K], wq_host[N * K];
  static double a[M * K], b[N * K];
  int64_t sx_count, sw_count;
  float *sx_host, *sw_host;
  void *x, *w, *xq, *wq, *d;
  float *sx, *sw;
  fp8jit_quantize_args qx, qw;
  fp8jit_gemm_args g;
  cudaStream_t stream = NULL; /* the legacy default stream; any cudaStream_t works */
  double err2 = 0, ref2 = 0, rel;
  int i, j, k;

  /* Random bf16 inputs, made on the host. */
  srand(42);
  for (i = 0; i < M * K; ++i) x_host[i] = float_to_bf16(random_value());
  for (i = 0; i < N * K; ++i) w_host[i] = float_to_bf16(0.05f * random_value());

  /* Scale tensor sizes: A by 1x128 groups in the TMA layout the GEMM reads, B by 128x128 blocks. */
  FP8JIT_CHECK(fp8jit_scale_count(FP8JIT_GRANULARITY_GROUP128, FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA, M, K, &sx_count));
  FP8JIT_CHECK(fp8jit_scale_count(FP8JIT_GRANULARITY_BLOCK128, FP8JIT_SCALE_LAYOUT_ROW_MAJOR, N, K, &sw_count));

  CUDA_CHECK(cudaMalloc(&x, sizeof x_host));
  CUDA_CHECK(cudaMalloc(&w, sizeof w_host));
  CUDA_CHECK(cudaMalloc(&xq, M * K));
  CUDA_CHECK(cudaMalloc(&wq, N * K));
  CUDA_CHECK(cudaMalloc((void**)&sx, (size_t)sx_count * sizeof(float)));
  CUDA_CHECK(cudaMalloc((void**)&sw, (size_t)sw_count * sizeof(float)));
  CUDA_CHECK(cudaMalloc(&d, sizeof d_host));
  CUDA_CHECK(cudaMemcpy(x, x_host, sizeof x_host, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(w, w_host, sizeof w_host, cudaMemcpyHostToDevice));

  /* Activations: one scale per 1x128 group of a row, laid out column-major for TMA. */
  fp8jit_quantize_args_init(&qx); /* defaults: bf16 input, E4M3 output, dense rows */
  qx.x = x, qx.m = M, qx.k = K, qx.q = xq, qx.scales = sx;
  qx.granularity = FP8JIT_GRANULARITY_GROUP128;
  qx.scale_layout = FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA;
  FP8JIT_CHECK(fp8jit_quantize(rt, &qx, stream)); /* compiled on first use, cached after */

  /* Weights: one scale per 128x128 block, row-major. */
  fp8jit_quantize_args_init(&qw);
  qw.x = w, qw.m = N, qw.k = K, qw.q = wq, qw.scales = sw;
  qw.granularity = FP8JIT_GRANULARITY_BLOCK128;
  qw.scale_layout = FP8JIT_SCALE_LAYOUT_ROW_MAJOR;
  FP8JIT_CHECK(fp8jit_quantize(rt, &qw, stream));

  /* D [M, N] = dequant(xq) . dequant(wq)^T, in bf16. */
  fp8jit_gemm_args_init(&g);
  g.a = xq, g.b = wq, g.d = d, g.d_dtype = FP8JIT_DTYPE_BF16;
  g.m = M, g.n = N, g.k = K;
  g.scale_mode = FP8JIT_SCALE_MODE_BLOCK;
  g.scale_a = sx, g.scale_a_size = sx_count, g.scale_a_layout = FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA;
  g.scale_b = sw, g.scale_b_size = sw_count, g.scale_b_layout = FP8JIT_SCALE_LAYOUT_ROW_MAJOR;
  FP8JIT_CHECK(fp8jit_gemm(rt, &g, stream)); /* the kernel is picked for this shape */
  CUDA_CHECK(cudaStreamSynchronize(stream));

  /* Host check: dequantize what the GPU produced and multiply in double precision. */
  sx_host = malloc((size_t)sx_count * sizeof(float));
  sw_host = malloc((size_t)sw_count * sizeof(float));
  if (!sx_host || !sw_host) return 1;
  CUDA_CHECK(cudaMemcpy(xq_host, xq, sizeof xq_host, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(wq_host, wq, sizeof wq_host, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(sx_host, sx, (size_t)sx_count * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(sw_host, sw, (size_t)sw_count * sizeof(float), cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(d_host, d, sizeof d_host, cudaMemcpyDeviceToHost));
  for (i = 0; i < M; ++i) /* col_major_tma: scale (row, group) at group * align4(M) + row */
    for (k = 0; k < K; ++k)
      a[i * K + k] = e4m3_to_double(xq_host[i * K + k]) * sx_host[k / 128 * ((M + 3) / 4 * 4) + i];
  for (j = 0; j < N; ++j) /* row_major 128x128 blocks: scale (row / 128, col / 128) */
    for (k = 0; k < K; ++k)
      b[j * K + k] = e4m3_to_double(wq_host[j * K + k]) * sw_host[j / 128 * (K / 128) + k / 128];
  for (i = 0; i < M; ++i)
    for (j = 0; j < N; ++j) {
      double ref = 0, got = bf16_to_double(d_host[i * N + j]);
      for (k = 0; k < K; ++k) ref += a[i * K + k] * b[j * K + k];
      err2 += (got - ref) * (got - ref);
      ref2 += ref * ref;
    }
  rel = sqrt(err2 / ref2);
  printf("fp8 gemm %dx%dx%d: relative error %.3e (bf16 output)\n", M, N, K, rel);

  free(sx_host);
  free(sw_host);
  cudaFree(x), cudaFree(w), cudaFree(xq), cudaFree(wq), cudaFree(sx), cudaFree(sw), cudaFree(d);
  return rel < 4e-3 ? 0 : 1;
}

int main(void) {
  int devices = 0, status;
  struct cudaDeviceProp prop;
  fp8jit_runtime* rt = NULL;

  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    puts("no GPU: skipping");
    return 77;
  }
  if (cudaGetDeviceProperties(&prop, 0) == cudaSuccess && prop.major != 9) {
    printf("%s is not a Hopper GPU (sm_90): skipping\n", prop.name);
    return 77;
  }

  /* One runtime holds the compiled kernels (disk cache per FP8JIT_CACHE_DIR). */
  FP8JIT_CHECK(fp8jit_runtime_create(&rt));
  printf("fp8jit %s\n", fp8jit_version());
  status = run(rt);
  fp8jit_runtime_destroy(rt);
  return status;
}
