// Default configs before any tuning. The figures behind them are in bench/NOTES.md (config
// sweeps on an H200): these memory-bound kernels do best with 32 bytes of input per thread,
// small blocks and few segments per thread, i.e. many short-lived CTAs that keep every SM's
// load queue full.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"

namespace fp8jit {
namespace {

// The widest vector (4, 8 or 16 elements) of at most `bytes` bytes that alignment allows.
int pick_vec(int elem_bytes, int bytes, int max_vec) {
  int vec = std::clamp(bytes / elem_bytes, 4, 16);
  while (vec > 4 && vec > max_vec) vec /= 2;
  return vec;
}

}  // namespace

KernelSpec default_quantize_spec(const QuantizeProblem& problem, int max_vec) {
  const int elem = static_cast<int>(dtype_size(problem.input));
  const bool tile = problem.granularity == Granularity::block128 || problem.transpose;
  if (tile) {
    // unroll only matters for the amax pass of per-tensor scaling; 1 elsewhere by rule.
    const int unroll = problem.granularity == Granularity::tensor ? 2 : 1;
    return make_quantize_spec(problem, {pick_vec(elem, 16, max_vec), 256, unroll});
  }
  if (problem.granularity == Granularity::row)
    return make_quantize_spec(problem, {pick_vec(elem, 32, max_vec), 128, 2});
  // Sweep (16384x7168 bf16, 1x128): v16_t128_u1 95% of copy, v8_t256_u2 74%.
  return make_quantize_spec(problem, {pick_vec(elem, 32, max_vec), 128, 1});
}

KernelSpec default_dequantize_spec(const DequantizeProblem& problem, int max_vec) {
  // Sweep (24576x7168 e4m3 -> bf16, 128x128): v8_t128_u2 96% of copy, v16_t256_u2 91%.
  const int vec = std::clamp(std::min(8, max_vec), 4, 16);
  return make_dequantize_spec(problem, {vec, 128, 2});
}

}  // namespace fp8jit

namespace fp8jit {

// Tiles: 64 rows when M is small (one consumer warpgroup), else 128. BLOCK_N minimises a sweep's
// estimated time on a persistent grid: waves x (BLOCK_N + kFixedCols), a tile's time per K block
// being its MMA work (proportional to BLOCK_N) plus a fixed cost (barrier round trip, wgmma
// issue and drain, promotion) worth about kFixedCols columns; ties go to the wider tile, which
// reuses A more. On an H100 (bench/NOTES.md, G6) 128x64 tiles ran block scaling at half the
// TFLOP/s of 128x192 ones: narrow tiles only pay where they fill a wave that wide ones cannot.
// From the H100 tuning sweeps (bench/NOTES.md, G11 and G15): with 4 or fewer K blocks per tile
// the epilogue dominates and tiles up to 160 columns won (1.10x at 4096x32768x512); raster
// groups of 16 tile-rows won on every shape with 16 or more of them. As many stages as shared
// memory holds, up to 6.
KernelSpec default_gemm_spec(const GemmProblem& problem, std::int64_t m, std::int64_t n, std::int64_t k,
                             int sm_count, int smem_bytes) {
  constexpr double kFixedCols = 48;
  const int block_m = m <= 64 ? 64 : 128;
  // Widest tile the register budget allows (see max_accumulators in families/gemm.cpp). Block
  // scaling with 128 rows takes up to 256 columns in two halves (gemm_chunks): 1.04-1.06x on the
  // 4096-row K >= 7168 shapes over 192, where per-tensor scaling's 256 lost to its unchunked 208
  // (bench/NOTES.md, G18).
  int max_n = problem.fast_accum ? 240 : problem.scale == ScaleMode::group ? 160 : 208;
  if (problem.scale == ScaleMode::block && block_m == 128 && !problem.bias) max_n = 256;
  // K of 4 blocks or fewer: the epilogue dominates; 144 columns won at 4096x32768x512 in both
  // modes (G16; G21 with the deferred epilogue: block 183 µs against 189 for 160).
  const std::int64_t k_blocks = (k + 127) / 128;
  if (k_blocks <= 4) max_n = std::min(max_n, 144);
  // K of 16 blocks or fewer without block scaling: tiles up to 168 columns defer their epilogue
  // under the next tile's wgmmas (the kernel's kDeferEpilogue), which beat wider tiles there
  // (G21: 4096x24576x1536 per tensor 277 µs at 168 against 293 at 208).
  if (k_blocks <= 16 && !problem.fast_accum && problem.scale != ScaleMode::block) max_n = std::min(max_n, 168);
  int best_n = 128;
  double best_cost = 0;
  // Multiples of 16, and the cap itself (168, the widest deferrable tile, is a multiple of 8).
  std::vector<int> widths;
  for (int bn = 64; bn <= max_n; bn += 16) widths.push_back(bn);
  if (max_n % 16 != 0) widths.push_back(max_n);
  for (int bn : widths) {
    // Block scaling: a tile may touch at most two 128-wide scale blocks of B.
    if (problem.scale == ScaleMode::block && 128 - std::gcd(bn, 128) > 256 - bn) continue;
    const std::int64_t tiles = ((m + block_m - 1) / block_m) * ((n + bn - 1) / bn);
    const std::int64_t waves = (tiles + sm_count - 1) / sm_count;
    const double cost = static_cast<double>(waves) * (bn + kFixedCols);
    if (best_cost == 0 || cost <= best_cost) {
      best_cost = cost;
      best_n = bn;
    }
  }
  // Decode-sized M with one wave of wide tiles: each CTA runs one tile, whose pipeline fill and
  // epilogue nothing overlaps; two tiles per CTA of half the width overlap them (tuned: 64x96
  // and 128x96 won 1.08-1.10x over x192 at N = 24576, K = 1536; G16).
  const std::int64_t tiles = (n + best_n - 1) / best_n;
  if (m <= 128 && best_n >= 128 && k_blocks >= 8 && tiles <= sm_count && tiles * 4 >= sm_count * 3)
    best_n = best_n / 16 * 8;
  const int group_m = (m + block_m - 1) / block_m >= 16 ? 16 : 8;
  GemmConfig c{block_m, best_n, 2, group_m};
  // The deepest pipeline that fits, up to 6 stages; on a GPU with less shared memory, narrower
  // (then shorter) tiles until 2 stages fit.
  for (;;) {
    for (c.stages = 6; c.stages > 2 && gemm_smem_bytes(problem, c) > smem_bytes; --c.stages) {
    }
    if (gemm_smem_bytes(problem, c) <= smem_bytes) return make_gemm_spec(problem, c);
    if (c.block_n > 16) c.block_n = std::max(16, c.block_n - 16);
    else if (c.block_m > 64) c.block_m /= 2;
    else throw_unsupported(fmt::format("no gemm tile fits {} bytes of shared memory per block", smem_bytes));
  }
}

}  // namespace fp8jit

namespace fp8jit {

// Split-K when the output tiles leave most SMs idle (decode-sized M): enough K ranges to cover
// the SMs, each at least 4 K blocks long so the pipeline still fills.
int gemm_split_k(std::int64_t m, std::int64_t n, std::int64_t k, const GemmConfig& c, int sm_count) {
  const std::int64_t tiles = ((m + c.block_m - 1) / c.block_m) * ((n + c.block_n - 1) / c.block_n);
  const std::int64_t k_blocks = (k + 127) / 128;
  if (tiles * 2 > sm_count || k_blocks < 8) return 1;
  std::int64_t splits = std::min<std::int64_t>(sm_count / tiles, k_blocks / 4);
  splits = std::clamp<std::int64_t>(splits, 1, 16);
  // Equal ranges: the last split must not be empty.
  const std::int64_t per = (k_blocks + splits - 1) / splits;
  return static_cast<int>((k_blocks + per - 1) / per);
}

}  // namespace fp8jit
