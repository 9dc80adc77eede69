// Row-major 1x128 scales of A ([rows][K blocks], the layout of DeepSeek-V3's act_quant and of
// fp8jit's quantize by default) copied into the column-major layout the GEMM's producer reads by
// one TMA load a stage ([K block][rows padded to 4]). Without it the producer's warp copies each
// row's scale with its own 4-byte cp.async, one 32-byte sector a row and stage, which ran
// 1.05-1.65x slower than the TMA path on an H200 (64x2112x7168 block 13.0 -> 21.5 µs,
// 4096x4096x7168 171.3 -> 237.8). The runtime launches this kernel before the GEMM, into its
// per-stream workspace, when the caller's scales are row-major.
#pragma once

#include "fp8jit/common/defs.cuh"
#include "fp8jit/common/grid_dependency.cuh"
#include "fp8jit/gemm/geometry.cuh"

namespace fp8jit {
namespace dev {

struct ScaleColumns {
  static constexpr int kTile = kScaleColumnsTile;
  static constexpr int kRowsPerPass = kScaleColumnsRowsPerPass;  // blockDim (kTile, kRowsPerPass)

  // dst[c * ld + r] = src[r * rs + c * cs] for r < rows, c < cols; CTA (x, y) takes rows
  // 32x.. and columns 32y.. through shared memory, so that both sides move whole lines.
  static FP8JIT_DEVICE void run(const float* src, i64 rs, i64 cs, int rows, int cols, float* dst,
                                i64 ld) {
    // Dynamic (kScaleColumnsSmemBytes): the module's functions share one opt-in to the GEMM's
    // dynamic shared memory, which static shared memory here would push past the limit.
    extern __shared__ float columns_smem[];
    float(*tile)[kTile + 1] = reinterpret_cast<float(*)[kTile + 1]>(columns_smem);  // +1: 32 banks
    // The scales are usually the previous kernel's (a quantize), and PDL may start this one early.
    enter_dependent_grid();
    const int r0 = blockIdx.x * kTile, c0 = blockIdx.y * kTile;
    const int tx = threadIdx.x, ty = threadIdx.y;
    // Each row's 32 scales are contiguous in src: lanes along the columns.
    for (int i = ty; i < kTile; i += kRowsPerPass) {
      const int r = r0 + i, c = c0 + tx;
      if (r < rows && c < cols) tile[i][tx] = src[r * rs + c * cs];
    }
    __syncthreads();
    for (int i = ty; i < kTile; i += kRowsPerPass) {
      const int c = c0 + i, r = r0 + tx;
      if (r < rows && c < cols) dst[c * ld + r] = tile[tx][i];
    }
  }
};

}  // namespace dev
}  // namespace fp8jit
