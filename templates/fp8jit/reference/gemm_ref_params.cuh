// Parameters of the float64 reference GEMM (host-includable).
#pragma once

namespace fp8jit {
namespace dev {

struct GemmRefParams {
  const unsigned char* a;
  long long lda;
  const unsigned char* b;
  long long ldb;
  const float* scale_a;
  long long sa_rs, sa_cs;
  const float* scale_b;
  long long sb_rs, sb_cs;
  const void* bias;
  double* out;  // [M, N] dense
  int M, N, K;
  int a_format, b_format, mode, bias_elem;  // mode: GemmScale values; bias_elem: Elem
};

}  // namespace dev
}  // namespace fp8jit
