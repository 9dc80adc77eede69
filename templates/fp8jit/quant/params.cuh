// Kernel parameter blocks of the quantize and dequantize families. Included by device code and
// by the host launcher alike, so the two can never disagree on the layout.
#pragma once

namespace fp8jit {
namespace dev {

// Scale (i, j) of a scale tensor sits at i * rs + j * cs, where i indexes rows (or 128-row
// blocks) and j indexes 128-column groups. The host picks rs/cs for the layout.
struct QuantParams {
  const void* x;  // [M, K] input, row stride ldx elements
  long long ldx;
  void* q;  // [M, K] FP8 output
  long long ldq;
  void* qt;  // [K, M] transposed FP8 output, or null
  long long ldqt;
  float* scales;
  long long scale_rs, scale_cs;
  float* scales_t;  // scales of qt (1x128 groups of the transpose), or null
  long long scale_t_rs, scale_t_cs;
  const float* static_scale;  // static per-tensor scale, or null
  float* amax_out;            // optional amax output (zeroed by the host before launch), or null
  float* tensor_amax;         // dynamic per-tensor: amax accumulated by the amax pass
  int M, K;
  int pow2;       // round scales up to powers of two
  int vector_ok;  // x and q (and their leading dimensions) are aligned for VEC-wide accesses
  // Column sums (QuantizeProblem::column_sums), else null: the cast writes the fp32 sum of each
  // column over each 128-row tile into col_partials [ceil(M/128), K], and fp8jit_colsum adds
  // the tiles' partials of each column, in tile order, into col_sums [K].
  float* col_partials;
  float* col_sums;
};

// fp8jit_colsum's block (QuantParams::col_sums): a thread per column.
constexpr int kColumnSumThreads = 256;

struct DequantParams {
  const void* q;  // [M, K] FP8
  long long ldq;
  void* y;  // [M, K] output
  long long ldy;
  const float* scales;
  long long scale_rs, scale_cs;
  int M, K;
  int vector_ok;  // q and y (and their leading dimensions) are aligned for VEC-wide accesses
  int pad_;
};

}  // namespace dev
}  // namespace fp8jit
