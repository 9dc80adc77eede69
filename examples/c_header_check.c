/* Compiled as strict C99 with -Wall -Werror -pedantic (tests/examples.cmake): fp8jit.h must stay
 * a valid C header that needs nothing but itself. */
#include <fp8jit/fp8jit.h>

/* Touch every declaration a C caller uses, so that a C++-only construct in any of them fails. */
int fp8jit_c_header_check(void);
int fp8jit_c_header_check(void) {
  fp8jit_quantize_args q;
  fp8jit_dequantize_args dq;
  fp8jit_gemm_args g;
  fp8jit_cache_stats stats;
  fp8jit_runtime* rt = NULL;
  fp8jit_stream_t stream = NULL;
  int64_t count = 0;
  fp8jit_status st;
  fp8jit_dtype dtype = FP8JIT_DTYPE_FP32;
  fp8jit_fp8_format format = FP8JIT_FP8_E5M2;
  fp8jit_granularity granularity = FP8JIT_GRANULARITY_BLOCK128;
  fp8jit_scale_layout layout = FP8JIT_SCALE_LAYOUT_COL_MAJOR_TMA;
  fp8jit_scale_mode mode = FP8JIT_SCALE_MODE_GROUP;

  fp8jit_quantize_args_init(&q);
  fp8jit_dequantize_args_init(&dq);
  fp8jit_gemm_args_init(&g);
  q.input = dtype, q.format = format, q.granularity = granularity, q.scale_layout = layout;
  g.scale_mode = mode;
  st = fp8jit_runtime_create(&rt);
  if (st == FP8JIT_SUCCESS) st = fp8jit_runtime_create_with_cache_dir("", &rt);
  if (st == FP8JIT_SUCCESS) st = fp8jit_quantize(rt, &q, stream);
  if (st == FP8JIT_SUCCESS) st = fp8jit_dequantize(rt, &dq, stream);
  if (st == FP8JIT_SUCCESS) st = fp8jit_gemm(rt, &g, stream);
  if (st == FP8JIT_SUCCESS) st = fp8jit_runtime_cache_stats(rt, &stats);
  if (st == FP8JIT_SUCCESS) st = fp8jit_runtime_reset_cache_stats(rt);
  if (st == FP8JIT_SUCCESS) st = fp8jit_scale_count(granularity, layout, 1, 1, &count);
  (void)fp8jit_runtime_cache_dir(rt);
  fp8jit_runtime_destroy(rt);
  fp8jit_clear_last_error();
  return (int)st + (int)fp8jit_get_last_status() + (int)count + fp8jit_last_error()[0] +
         fp8jit_status_string(st)[0] + fp8jit_version()[0];
}
