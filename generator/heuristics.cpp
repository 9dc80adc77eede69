// Default configs before any tuning. Sweeps of all 48 quantize/dequantize configs on an H200
// (v16_t128_u1 at 95 % of copy where v8_t256_u2 reached 74 %) showed that these memory-bound
// kernels do best with 32 bytes of input per thread, small blocks and few segments per thread,
// i.e. many short-lived CTAs that keep every SM's load queue full.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/families/gemm_geometry.hpp"
#include "generator/gemm_cost.hpp"

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

namespace {

// The pipeline the default's tiles are costed with, and its depth where shared memory holds it.
constexpr int kDefaultStages = 6;

// The widest tile up to `from` columns that runs in one pass and stages D in whole 128-byte
// panels (GemmGeometry::panel_bytes 128): 192 columns of bf16 D. 0 if none.
int widest_whole_panel_width(const GemmProblem& p, int block_m, int from) {
  for (int bn = from; bn >= 64; --bn) {
    const GemmGeometry g = gemm_geometry(p, GemmConfig{block_m, bn, kDefaultStages});
    if (g.chunks == 1 && g.panel_bytes == 128 && !g.straddles_three_b_blocks) return bn;
  }
  return 0;
}

// The widths the cost model chooses from: multiples of 16 from 64 up to the widest default tile,
// and that tile itself. The widest is what the registers allow (GemmGeometry), in two column
// halves only for block scaling with 128 rows: 1.04-1.06x on the 4096-row K >= 7168 shapes over
// 192, where per-tensor scaling's 256 lost to its unchunked 208 (G18: 4096x4096x7168 block 213 ->
// 201 µs at 256, per tensor 176 -> 187). With bias, block scaling's registers stop at 224
// columns, which straddle three scale blocks of B, so its widest tile is 208 there.
std::vector<int> candidate_widths(const GemmProblem& p, int block_m, std::int64_t k_blocks) {
  const bool halves = p.scale == ScaleMode::block && block_m == 128;
  const int widest = gemm_widest_block_n(p, block_m, halves ? 2 : 1);
  int max_n = widest;
  // K of 4 blocks or fewer: the epilogue dominates, and a tile's epilogue after all its wgmmas
  // costs more than its width gains: 144 columns won at 4096x32768x512 (G16; G21 with the
  // deferred epilogue: block 183 µs against 189 for 160), 128x192 lost to 128x128 by 1.4-1.5x
  // at 2048x7168, K = 256 and 512 (H100, block), before D's slab went out in swizzled panels
  // (G68: 22.2 against 22.1 µs at K = 512; see the whole-panel tile below).
  if (k_blocks <= 4) max_n = std::min(max_n, 144);
  // K of 16 blocks or fewer without block scaling: tiles up to 168 columns defer their epilogue
  // under the next tile's wgmmas (the kernel's kDeferEpilogue), which beat wider tiles there
  // (G21: 4096x24576x1536 per tensor 277 µs at 168 against 293 at 208). Up to 160 only: 168's
  // 336-byte rows of D are not whole 32-byte sectors, and 160 beat it (H100, per tensor,
  // 4096x24576x1536 268.4 µs against 271.9, K = 768 164.5 against 177.3). Fast accumulation
  // defers too (H100, per tensor: 4096x24576x1536 256.8 µs at 160 against 274.7 at 240,
  // 8192x5120x2048 141.9 against 153.0).
  if (k_blocks <= 16 && p.scale != ScaleMode::block) max_n = std::min(max_n, 160);
  // Not, at 4 K blocks or fewer, a width whose rows of D go out in 32-byte panels
  // (GemmGeometry::panel_bytes): where a CTA runs many such tiles its stores are most of its
  // work, and each 32-byte row of a panel is a TMA request of its own beside the loads'. H200,
  // CUDA events, row-major / 32-byte panels: 4096x32768x512 at 128x144 (55 tiles a CTA) 147.8 /
  // 166.0 µs fast, 161.7 / 180.4 precise; with fewer tiles or longer K they gained (2048x7168x512
  // at 128x144 29.0 / 28.4, 4096x7168x1024 at 128x112 65.7 / 64.5, 777x3072x4096 at 128x176
  // 23.2 / 21.7).
  auto stores_well = [&](int bn) {
    return k_blocks > 4 ||
           gemm_geometry(p, GemmConfig{block_m, bn, kDefaultStages}).panel_bytes != 32;
  };
  std::vector<int> widths;
  for (int bn = 64; bn <= max_n; bn += 16)
    if (stores_well(bn)) widths.push_back(bn);
  if (max_n % 16 != 0 && stores_well(max_n)) widths.push_back(max_n);
  // Tiles in column halves write one half under the other half's wgmmas, and their slab is
  // conflict-free (GemmGeometry::swizzled_slab), so at short K they stay a choice: block 128x256
  // against the 128x144 or 128x112 that the cap above gives, H100, K = 256 and 512, M 500-8192,
  // N 2048-32768: 0.87-1.03x the time (4096x32768x512 156.7 µs against 179.2).
  if (max_n < widest && gemm_geometry(p, GemmConfig{block_m, widest, kDefaultStages}).chunks == 2)
    widths.push_back(widest);
  // So does the widest one-pass tile of whole 128-byte panels of D (192 columns of bf16), whose
  // slab is conflict-free and goes out by TMA store per panel since G50-G54, after the caps
  // above were measured: per tensor it beat the capped 144 and 160 by 12 and 9 % (H200, tuning
  // sweeps at 4096x32768x512: 163.6 -> 143.4 µs, 4096x24576x1536: 268.5 -> 242.9).
  // Not with fast accumulation at 4 K blocks or fewer, where the deferring 144 stayed ahead (H100,
  // peers benchmark: 4096x32768x512 154.3 µs at 144 against 166.6 at 192; at 12 blocks 192 won,
  // 4096x24576x1536 274.6 -> 261.8).
  const bool fast_and_short = p.fast_accum && k_blocks <= 4;
  if (p.scale != ScaleMode::block && !fast_and_short)
    if (const int bn = widest_whole_panel_width(p, block_m, widest); bn > max_n)
      widths.push_back(bn);
  return widths;
}

// The width the cost model finds cheapest among the candidates; ties go to the wider tile, which
// reuses A more. Each is costed with a full pipeline and K in one range: stages and split-K
// follow from the width chosen.
// `launch`: the layout the kernel runs (the cost model's pipelined discount is for dense ones).
int cheapest_width(const GemmProblem& p, int block_m, const std::vector<int>& widths,
                   std::int64_t m, std::int64_t n, std::int64_t k, int sm_count,
                   GemmLayout launch) {
  GemmProblem costed = p;
  costed.layout = launch;
  int best_n = 0;
  double best_cost = 0;
  for (int bn : widths) {
    const GemmConfig c{block_m, bn, kDefaultStages};
    if (gemm_geometry(p, c).straddles_three_b_blocks) continue;
    const double cost = gemm_cost(costed, c, m, n, k, sm_count, 1);
    if (best_n == 0 || cost <= best_cost) {
      best_cost = cost;
      best_n = bn;
    }
  }
  return best_n;
}

}  // namespace

// Decode-sized M (fewer than 64 rows) in one wave of 64x64 or narrower tiles, each streaming a
// long K alone (no split-K): the kernel is memory-bound and as fast as the bytes it keeps in
// flight, so these take up to 12 stages, as DeepGEMM 2.6.1 runs 13-16 at such shapes. H100, peers
// benchmark (kernel times, two runs): 1x8192x8192 38.1 -> 35.0 / 35.1 µs, 16x5120x25600 72.2 ->
// 68.4 / 66.2, 37x5120x32768 85.8 -> 79.6 / 80.8, 1x6144x4096 18.5 -> 17.0 / 17.1. Not at 64
// rows (64x6144x5120 19.7 -> 19.8 / 20.0, 64x7168x16384 55.4 -> 55.5 / 56.1, 64x5120x8192 26.8 ->
// 23.3 / 28.5), with split-K (CLI, CUDA events: 64x2112x7168 15.1 -> 15.6), at short K
// (64x2048x768 7.3 either way), nor for wider tiles (64x80 at 11 stages: 64x9216x4096 21.8
// -> 22.8).
namespace {
constexpr int kDeepStages = 12;

// Decode-sized M (up to kGemmSwapMaxM rows) with the operands swapped (GemmConfig::swap_ab): N
// along 64-row tiles where one wave of them covers it, else 128-row ones, M along the narrowest
// multiple of 8 that holds it, and 16 stages (fewer where shared memory is short): per stage 8-16
// rows of A instead of 64. H200, per tensor, CUDA events (G64): 1x6144x4096 17.3 -> 14.7 µs
// (64x8 s16), 1x5120x4096 16.5 -> 13.6, 1x8192x8192 30.0 -> 28.8 (27.5 at 128x8 s12 with K
// split in two), 16x4096x4096 13.8 -> 12.8, 16x10240x8192 35.9 -> 33.7 (128x16 s12); at 37 rows
// (40 columns) nothing: 41.6 -> 41.4.
std::optional<KernelSpec> swapped_gemm_spec(const GemmProblem& problem, std::int64_t m,
                                            std::int64_t n, int sm_count, int smem_bytes) {
  GemmConfig c{(n + 63) / 64 <= sm_count ? 64 : 128, gemm_swap_block_n(m), 16, 8};
  c.swap_ab = 1;
  for (; c.stages > 2 && gemm_geometry(problem, c).smem_bytes > smem_bytes; --c.stages) {
  }
  const GemmGeometry g = gemm_geometry(problem, c);
  if (g.smem_bytes > smem_bytes || !g.fits_registers) return std::nullopt;
  return make_gemm_spec(problem, c);
}

// Decode-sized M over a long K (17-128 rows, 48 K blocks or more): one wave of 64-row tiles,
// each streaming its whole K (no split-K) through 16 stages (12 at 64 columns; fewer where shared
// memory is short), of the width whose tiles come closest to the SM count without a second wave,
// if they fill three quarters of it: a multiple of 8 from 16 to 64, with block scaling 16, 32 or
// 64 only (block 64x40 and 64x56, though pipelined, ran 14 % and 3 % slower than 64x64 s12 at
// 37x5120x32768 and 64x7168x16384 on the H200, 60.7 -> 69.1 and 41.2 -> 42.5 µs, with a loop
// copy per split; 64x40 with the split as data too, 65.9 -> 69.1 in the CLI's timing). Since these
// narrow tiles promote one K block under the next one's wgmmas (the kernel's
// kPipelinedKLoop: 64x32 at 128x2112x7168 block 15.8 -> 13.8 µs) a full wave of them beats
// split-K over fewer, wider tiles. H200, CUDA events, the heuristic before -> this rule (G66):
// 128x2112x7168 block 15.1 -> 13.8 (64x32), per tensor 14.9 -> 12.5; 128x4096x7168 19.1 -> 17.2
// (64x64), per tensor 18.9 -> 16.7; 64x4096x7168 17.6 -> 16.8 (64x32); 64x2112x7168 13.5 -> 13.1
// (64x16), per tensor 13.2 -> 12.1; 64x4096x14336 27.9 -> 26.1; 64x7168x16384 43.1 -> 41.7.
// H100, fast accumulation: 128x2112x7168 16.5 -> 15.1, 128x4096x7168 22.6 -> 20.6, 64x2112x7168
// 15.2 -> 14.4; 64x7168x16384 55.8 -> 56.8 (the same 64x64 tile, deeper); 64x5120x8192 at 64x40
// per tensor 28.3 -> 25.4, fast 28.3 -> 26.1, block 28.9 -> 27.8. Not at 32 K blocks
// (37x2048x4096 at 64x16: 11.0 -> 11.7), nor over two waves (128x4096x7168 at 64x32: 22.1).
// Fast accumulation up to 128 columns where no narrower width gives the wave: its 64-row tiles
// pipeline their K loop that wide (gemm_fast_pipelines, G81), and at 128x7168x16384 a wave of
// 64x112 s8 ran 42.0 µs against 44.8 for the 128-row default (H200, CUDA events, s28;
// lab/configs/fast_64row_waves.txt). Not precise scaling: its 64x112 ran 54.8 there.
constexpr int kStreamingMinKBlocks = 48;
std::optional<GemmConfig> streaming_config(const GemmProblem& problem, std::int64_t m,
                                           std::int64_t n, std::int64_t k, int sm_count) {
  if (m > 128 || (k + 127) / 128 < kStreamingMinKBlocks) return std::nullopt;
  const bool block = problem.scale == ScaleMode::block;
  int best_n = 0;
  std::int64_t best_tiles = 0;
  for (int bn = problem.fast_accum ? 128 : 64; bn >= 16; bn -= 8) {
    if (block && 128 % bn != 0) continue;
    const std::int64_t tiles = (m + 63) / 64 * ((n + bn - 1) / bn);
    if (tiles <= sm_count && 4 * tiles >= 3 * std::int64_t{sm_count} && tiles > best_tiles) {
      best_n = bn;
      best_tiles = tiles;
    }
  }
  if (best_n == 0) return std::nullopt;
  return GemmConfig{64, best_n, best_n >= 64 ? kDeepStages : 16, 8};
}

int max_stages(const GemmConfig& c, std::int64_t m, std::int64_t n, std::int64_t k, int sm_count) {
  const std::int64_t tiles = ((m + c.block_m - 1) / c.block_m) * ((n + c.block_n - 1) / c.block_n);
  const bool streaming = m < 64 && c.block_n <= 64 && (k + 127) / 128 >= 16 && tiles <= sm_count &&
                         gemm_split_k(m, n, k, c, sm_count) == 1;
  return streaming ? kDeepStages : kDefaultStages;
}
}  // namespace

namespace {
// Config c with its epilogue and the deepest pipeline that fits: `stages` (0: up to 6, or what
// max_stages allows); on a GPU with less shared memory, narrower (then shorter) tiles until 2
// stages fit.
KernelSpec fitted(const GemmProblem& problem, GemmConfig c, std::int64_t m, std::int64_t n,
                  std::int64_t k, int sm_count, int smem_bytes, int stages) {
  c.epilogue = gemm_epilogue_for(problem, m, n, k, c, sm_count);
  auto smem = [&] { return gemm_geometry(problem, c).smem_bytes; };
  for (;;) {
    for (c.stages = stages ? stages : max_stages(c, m, n, k, sm_count);
         c.stages > 2 && smem() > smem_bytes; --c.stages) {
    }
    if (smem() <= smem_bytes) return make_gemm_spec(problem, c);
    if (c.block_n > 16)
      c.block_n = std::max(16, c.block_n - 16);
    else if (c.block_m > 64)
      c.block_m /= 2;
    else
      throw_unsupported(
          fmt::format("no gemm tile fits {} bytes of shared memory per block", smem_bytes));
    c.epilogue = gemm_epilogue_for(problem, m, n, k, c, sm_count);
  }
}

// DeepGEMM's large-shape tile: 256 rows (two warpgroups of 128, promoting in turn) by 128
// columns, in raster groups of 8 tile-rows, 2048 rows as the 128-row tiles' groups of 16 span
// (groups of 16 ran 1-2 % slower: 4096x4096x7168 block 184.4 against 180.5 µs, 8192^3 832.8
// against 820.4). It loads as many operand bytes per MAC as 128x256 but needs no column halves,
// whose turns cost 128x256 ~75 cycles more a pass of 4 wgmmas (its K loop: 89.5k cycles a tile
// against 80.8k at 4096x4096x7168, H100), meets one scale of B per K block, and loads 7-12 % fewer
// bytes per MAC than the 128x176-208 tiles per tensor takes.
constexpr GemmConfig kTallTile{256, 128, 2, 8};
constexpr std::int64_t kTallShortKMinN = 16384;  // takes_tall_tile under 16 K blocks, precise

// Whether kTallTile's waves over `groups` groups of `rows` rows (each rounded up to whole tiles)
// leave at most 5 % more tile area unused than `chosen`'s: more it does not repay (below).
bool tall_tile_waves_allow(std::int64_t groups, std::int64_t rows, std::int64_t n,
                           const GemmConfig& chosen, int sm_count) {
  const auto wave_area = [&](const GemmConfig& c) {
    const std::int64_t waves = (groups * gemm_tile_count(c, rows, n) + sm_count - 1) / sm_count;
    return waves * c.block_m * c.block_n;
  };
  return 20 * wave_area(kTallTile) <= 21 * wave_area(chosen);
}

// Whether a dense GEMM at M >= 2048 over 16 K blocks or more, block, per-tensor or per-row scaling
// (per row without a bias), takes kTallTile in place of `chosen`: unless its waves leave more than 5 % more tile
// area unused, which it does not repay. H100, CUDA events, heuristic (shipped rows off) against
// 256x128 (lab/configs/tall_default.txt, both shape lists): of the 25 shapes where the waves allow
// it, 21 gained up to 1.077x (6000x8192x28672 block), 1.064x (8192x5120x8192 and 8192x28672x4096
// per tensor), 1.035-1.040x (4096x4096x7168 and 4096x7168x2048 per tensor, 4096x7168x2048 block),
// two were equal and two lost 1.4-1.6 % (8192^3 and 4096x6144x4096 per tensor); waves worse by
// 6.7 % lost 5.5-7.0 % (3000x10240x5120), by 33-46 % lost 22-24 % (4096x2112x7168), by 2.7 %
// gained 2.9 % (6000x8192x28672 per tensor). Fast accumulation (lab/configs/tall_fast.txt, 12
// shapes): 1.04-1.12x on all (4096x7168x2048 99.7 -> 89.1 µs, 3000x4096x14336 259.6 -> 230.8,
// 8192^3 747.7 -> 715.7). Per row (no bias), H100, explicit tiles: 256x128 with D staged in
// panels (its TMA-only build since G96) against the row-major slab before, tree / panels / tree,
// 8192x32768x8192 3488 / 3206 / 3431 µs (the 128x208 it replaces there 3623-3698),
// 32768x8192x8192 3649 / 3065 / 3317, 8192x8192x32768 3353 / 3341 / 3419 (where G93 had the old
// tile 3076 against the slab's 3134: a tie with panels). With a bias, per tensor and block, H100,
// the heuristic before / after / before (lab/configs/tall_bias.txt; on the slab per tensor lost
// 3.7 %, G93): per tensor 8192x8192x2048 260.4 / 230.9 / 260.4 µs, 8192x16384x4096 872.6 / 812.7 /
// 870.6, 8192x32768x8192 3445 / 3085 / 3195, 4096x6144x4096 159.2 / 156.7 / 158.5, 8192x8192x32768
// 3079 / 3106 / 3064 (1 % behind at 256 K blocks); block 8192x32768x8192 3267 / 3274 / 3374. Not
// per row with a bias: its 256-row tiles keep a row-major slab (their panels spill). Grouped
// launches: takes_grouped_tall_tile.
// Under 16 K blocks, from 1024 rows: fast accumulation always, precise from 16384 columns. H200,
// CUDA events, default -> 256x128 s3 g8 (lab/configs/short_k_tall_modes.txt, s28): fast
// 4096x32768x512 145.7 -> 125.6 µs, 2048x32768x512 75.4 -> 64.7, 1024x32768x512 40.7 -> 36.2,
// 8192x8192x512 75.1 -> 69.5, 4096x24576x1536 234.6 -> 224.3; block and per tensor at 32768 and
// 24576 columns 1.5-6.6 % faster (4096x32768x512 block 141.4 -> 136.6, 1024x32768x512 40.9 ->
// 38.2), at 8192 and 7168 0.7-2.3 % slower (8192x8192x512 block 72.0 -> 73.1, 2048x7168x512 per
// tensor 21.7 -> 22.2), where the waves allow it (2048x7168x512 fast: 4 against 7 of 128x128,
// 15 % more area; 2.6 % faster all the same).
bool takes_tall_tile(const GemmProblem& p, GemmLayout launch, const GemmConfig& chosen,
                     std::int64_t m, std::int64_t n, std::int64_t k_blocks, int sm_count) {
  // Not group scaling (at most 64 columns at 256 rows), nor per row with a bias: precise, its
  // 256-row tiles stage D in a row-major slab (GemmGeometry: its panels spill); fast, their TMA
  // build spills 2-4 words with panels (CUDA 13.0 ptxas, 256x128 bf16 and fp32 out).
  if (launch != GemmLayout::dense || p.scale == ScaleMode::group ||
      (p.scale == ScaleMode::rowwise && p.bias))
    return false;
  // Per row scaling and a bias: timed over 16 K blocks only.
  const bool short_k_mode = p.scale != ScaleMode::rowwise && !p.bias;
  const bool shape_allows =
      k_blocks >= 16 ? m >= 2048
                     : short_k_mode && m >= 1024 && (p.fast_accum || n >= kTallShortKMinN);
  return shape_allows && tall_tile_waves_allow(1, m, n, chosen, sm_count);
}

// Whether a contiguous grouped GEMM, block scaling, bf16 out, groups of 1024 expected rows or more
// over 16 K blocks or more, takes kTallTile in place of `chosen`: unless its waves, each group's
// rows rounded up to its tiles, leave more than 5 % more tile area unused (as the dense rule).
// H100, CUDA events (lab/probes/grouped_probe.sh), 128x256 g16 -> 256x128 g8: 8 groups of 4096
// rows, N 4096, K 7168 1342.7 -> 1237.8 µs; N 7168, K 2048 715.6 -> 677.6; 4 x 2048 (4096x7168)
// 342.8 -> 319.6; 16 x 1024 674.0 -> 622.5; 32 x 2048 (7168x2048) 1430.8 -> 1324.1. Not for
// masked layouts: there 256x128 depends on the rows per group as much as on their mean (H200,
// 4096x7168: 8 x 256 expected rows 137 -> 128 µs on two draws of rows, but 16 x 256 249 -> 285
// over two others), so their tuned rows decide. Untimed: the other scale modes and outputs.
bool takes_grouped_tall_tile(const GemmProblem& p, std::int64_t groups, std::int64_t expected_m,
                             std::int64_t n, std::int64_t k_blocks, const GemmConfig& chosen,
                             int sm_count) {
  if (p.layout != GemmLayout::contiguous || p.scale != ScaleMode::block || p.out != DType::bf16 ||
      expected_m < 1024 || k_blocks < 16)
    return false;
  return tall_tile_waves_allow(groups, expected_m, n, chosen, sm_count);
}

// Whether a masked grouped GEMM on `chosen` runs it in pairs along M (two tile-rows of one
// expert, B's tile multicast to both): block scaling, bf16 out, 128x256 tiles. Since a cluster's
// idle threads exit at once such pairs run no slower than the tile alone on every masked case
// timed, where before they lost 0-9 %. H200, lab/probes/grouped_configs.sh, two routings each,
// lone -> pair, µs: 4096x7168, 16 experts x 128 expected rows (M_max 256) 161.8
// -> 159.0 and 152.7 -> 148.8; 8 x 256 (M_max 1024) 139.4 -> 137.3 and 137.3 -> 135.8; 32 x 64
// 252.8 -> 251.1 and 252.1 -> 250.9; 7168x2048, 32 x 32 135.1 -> 134.7 and 134.8 -> 134.6, 8 x
// 256 67.6 -> 67.1 and 75.7 -> 75.6, 16 x 128 90.4 -> 90.2 and 98.8 -> 98.5. Not 128x192, whose
// pairs still lose 0-4 % (8 x 256 at 4096x7168: 111.8 -> 115.4, 144.1 -> 148.7), nor contiguous
// layouts, other scale modes or outputs (untimed since the idle threads exit).
bool takes_masked_pair(const GemmProblem& p, const GemmConfig& chosen) {
  return p.layout == GemmLayout::masked && p.scale == ScaleMode::block && p.out == DType::bf16 &&
         chosen.block_m == 128 && chosen.block_n == 256 && chosen.cluster_m * chosen.cluster_n == 1;
}

// Swapped operands up to 16 rows, streaming tiles where streaming_config finds a wave of them
// (`launch` dense; grouped launches take only the width and their own pipeline depth),
// else the cost model's pick under the rules the H100 sweeps added. Tiles: 64 rows when M is
// small (one consumer warpgroup), else 128, and the width gemm_cost finds cheapest up to the
// widest the rules allow; at large M and long K 256x128 in its place (takes_tall_tile). From the H100 tuning sweeps (G11, G15): with 4 or fewer K blocks per
// tile the epilogue dominates and tiles up to 160 columns won (1.10x at 4096x32768x512); raster
// groups of 16 tile-rows won on every shape with 16 or more of them. As many stages as shared
// memory holds, up to 6 (12 where max_stages says).
KernelSpec dense_default(const GemmProblem& problem, std::int64_t m, std::int64_t n, std::int64_t k,
                         int sm_count, int smem_bytes, GemmLayout launch) {
  const bool streaming = launch == GemmLayout::dense;
  if (problem.layout == GemmLayout::dense && m <= kGemmSwapMaxM)
    if (auto swapped = swapped_gemm_spec(problem, m, n, sm_count, smem_bytes)) return *swapped;
  if (const auto s = streaming ? streaming_config(problem, m, n, k, sm_count) : std::nullopt)
    return fitted(problem, *s, m, n, k, sm_count, smem_bytes, s->stages);
  const int block_m = m <= 64 ? 64 : 128;
  const std::int64_t k_blocks = (k + 127) / 128;
  int best_n = cheapest_width(problem, block_m, candidate_widths(problem, block_m, k_blocks), m, n,
                              k, sm_count, launch);
  // Decode-sized M with one wave of wide tiles: each CTA runs one tile, whose pipeline fill and
  // epilogue nothing overlaps; two tiles per CTA of half the width overlap them (tuned: 64x96
  // and 128x96 won 1.08-1.10x over x192 at N = 24576, K = 1536; G16). From 4 K blocks on: at
  // 128x32768x512 block the H200's tuning took 128x128 s5 (13.25 µs against 14.43 for the 128x256
  // s3 this rule left at 8 blocks), as DeepGEMM takes 128x128 there on the H100 (12.3 µs against
  // fp8jit's 128x256 14.1, G67).
  const std::int64_t tiles = (n + best_n - 1) / best_n;
  if (m <= 128 && best_n >= 128 && k_blocks >= 4 && tiles <= sm_count && tiles * 4 >= sm_count * 3)
    best_n = best_n / 16 * 8;
  const int group_m = (m + block_m - 1) / block_m >= 16 ? 16 : 8;
  // Block scaling over 12 K blocks or fewer: where the model picks (and the rule above keeps) the
  // column halves (128x256, three stages), the one-pass tile of whole panels (128x192, four) runs
  // a tile's short K with less fixed cost, where its waves cost no more once each is costed with
  // the stages it gets (cheapest_width costs both with full pipelines). H100, CUDA events, 256 ->
  // 192: 8192x8192x512 86.4 -> 74.6 µs, 2048x7168x512 24.8 -> 22.2, 4096x24576x1536 261.5 ->
  // 252.2, 8192x16384x1536 337.5 -> 335.0, and at 4096x32768x512 (tuning) 155.5 -> 142.0; where
  // 192 needs more waves than the stages pay for it lost, as the staged costs say: 1024x4096x512
  // 11.7 -> 12.8 (one wave against two), 1024x16384x1024 38.5 -> 39.2.
  // Dense launches only: the grouped kernels' 128x192 is untimed there.
  if (launch == GemmLayout::dense && problem.scale == ScaleMode::block && k_blocks <= 12 &&
      gemm_geometry(problem, GemmConfig{block_m, best_n, kDefaultStages}).chunks == 2) {
    if (const int bn = widest_whole_panel_width(problem, block_m, best_n); bn > 0) {
      GemmProblem costed = problem;
      costed.layout = launch;
      auto staged_cost = [&](int width) {
        const KernelSpec s = fitted(problem, GemmConfig{block_m, width, 2, group_m}, m, n, k,
                                    sm_count, smem_bytes, 0);
        return gemm_cost(costed, gemm_config_of(s), m, n, k, sm_count, 1);
      };
      if (staged_cost(bn) <= staged_cost(best_n)) best_n = bn;
    }
  }
  const GemmConfig chosen{block_m, best_n, 2, group_m};
  if (takes_tall_tile(problem, launch, chosen, m, n, k_blocks, sm_count))
    return fitted(problem, kTallTile, m, n, k, sm_count, smem_bytes, 0);
  return fitted(problem, chosen, m, n, k, sm_count, smem_bytes, 0);
}
}  // namespace

KernelSpec default_gemm_spec(const GemmProblem& problem, std::int64_t m, std::int64_t n,
                             std::int64_t k, int sm_count, int smem_bytes) {
  return dense_default(problem, m, n, k, sm_count, smem_bytes, GemmLayout::dense);
}

// Grouped GEMMs run their groups' tiles in one persistent grid, without split-K: the dense
// heuristic's tile for the stacked rows (every group's expected rows, rounded up to whole tiles),
// with 64-row tiles where groups are decode-sized (grouped_short_tile_max_rows), 256x128 where
// contiguous groups are large (takes_grouped_tall_tile), and pairs along M only for masked
// 128x256 tiles (takes_masked_pair): before a cluster's idle threads exited at once, pairs
// sharing B ran 0-9 % slower than the same tile alone on every masked and contiguous case of the
// MoE suite timed (H100, lab/probes/grouped_configs.sh; masked 8 x 256 gate-up 128x192 127.9
// against 121.4 µs, contiguous 4 x 8192 128x256 1402.9 against 1295.8), and contiguous launches
// are untimed since.
KernelSpec default_grouped_gemm_spec(const GemmProblem& problem, std::int64_t groups, std::int64_t expected_m,
                                     std::int64_t n, std::int64_t k, int sm_count, int smem_bytes) {
  if (problem.layout == GemmLayout::dense)
    throw_invalid("layout", "dense", "default_grouped_gemm_spec is for contiguous and masked layouts");
  GemmProblem dense = problem;
  dense.layout = GemmLayout::dense;
  const int block_m = expected_m <= grouped_short_tile_max_rows(problem.layout) ? 64 : 128;
  const std::int64_t tiles_per_group = (std::max<std::int64_t>(expected_m, 1) + block_m - 1) / block_m;
  const std::int64_t rows = std::max<std::int64_t>(groups, 1) * tiles_per_group * block_m;
  GemmConfig c =
      gemm_config_of(dense_default(dense, rows, n, k, sm_count, smem_bytes, problem.layout));
  c.block_m = block_m;
  c.cluster_m = 1;
  c.swap_ab = 0;  // dense-only (rows stacked from groups are never decode-sized anyway)
  c.epilogue = GemmEpilogue::any;  // grouped launches never split K; their kernels serve any D
  // As many stages as shared memory holds, up to kDefaultStages (at least 2).
  const auto deepest = [&](GemmConfig t) {
    for (t.stages = kDefaultStages;
         t.stages > 2 && gemm_geometry(problem, t).smem_bytes > smem_bytes; --t.stages) {
    }
    return t;
  };
  if (takes_grouped_tall_tile(problem, groups, expected_m, n, (k + 127) / 128, c, sm_count)) {
    GemmConfig tall = kTallTile;
    tall.epilogue = GemmEpilogue::any;
    tall = deepest(tall);
    const GemmGeometry g = gemm_geometry(problem, tall);
    if (g.smem_bytes <= smem_bytes && g.fits_registers) return make_gemm_spec(problem, tall);
  }
  // The chosen width, or the widest narrower one whose registers and pipeline fit these rows.
  for (;; c.block_n -= 16) {
    c = deepest(c);
    const GemmGeometry g = gemm_geometry(problem, c);
    if (g.smem_bytes <= smem_bytes && g.fits_registers && !g.straddles_three_b_blocks) {
      if (takes_masked_pair(problem, c)) {
        GemmConfig pair = c;
        pair.cluster_m = 2;
        try {
          return make_gemm_spec(problem, pair);
        } catch (const Error&) {  // a rule of the family's check: the tile alone
        }
      }
      try {
        return make_gemm_spec(problem, c);
      } catch (const Error&) {  // a rule of the family's check: try narrower
      }
    }
    if (c.block_n <= 16)
      throw_unsupported(fmt::format("no grouped gemm tile fits {} bytes of shared memory per block", smem_bytes));
  }
}

}  // namespace fp8jit

namespace fp8jit {

// Split-K when the output tiles leave most SMs idle (decode-sized M): enough K ranges to cover
// the SMs, each at least 4 K blocks long so the pipeline still fills.
int gemm_split_k(std::int64_t m, std::int64_t n, std::int64_t k, const GemmConfig& c,
                 int sm_count) {
  // A public entry point (also through gemm_epilogue_for): an empty shape or tile would divide by
  // zero below.
  for (const auto& [name, v] : {std::pair{"m", m}, std::pair{"n", n}, std::pair{"k", k},
                                std::pair{"block_m", std::int64_t{c.block_m}},
                                std::pair{"block_n", std::int64_t{c.block_n}}})
    if (v < 1) throw_invalid(name, std::to_string(v), "at least 1");
  const std::int64_t tiles = gemm_tile_count(c, m, n);
  const std::int64_t k_blocks = (k + 127) / 128;
  if (tiles * 2 > sm_count || k_blocks < 8) return 1;
  std::int64_t splits = std::min<std::int64_t>(sm_count / tiles, k_blocks / 4);
  splits = std::clamp<std::int64_t>(splits, 1, 16);
  // Equal ranges: the last split must not be empty.
  const std::int64_t per = (k_blocks + splits - 1) / splits;
  return static_cast<int>((k_blocks + per - 1) / per);
}

// Dense launches with K in one range take the tma build: the same kernel without the split-K and
// direct-store paths, about half the code and 1.5-2.6x less NVRTC time (a build host: per tensor
// 128x160 0.63 -> 0.29 s, block 64x64 0.31 -> 0.20), and on the H100 within ±1 % of the any build
// (4096x2112x7168 block 109.9 -> 104.6 µs, 1000x9216x4096 64.5 -> 62.3). Except tiles computed in
// column halves (block 128x256): the tma build of those ran 0.9-1.6 % slower (4096x4096x7168
// 182.7 -> 184.9 µs, 8192^3 819.4 -> 832.7, 4096x24576x1536 258.8 -> 263.4), so they keep the
// kernel they had.
GemmEpilogue gemm_epilogue_for(const GemmProblem& problem, std::int64_t m, std::int64_t n,
                               std::int64_t k, const GemmConfig& config, int sm_count) {
  if (problem.layout != GemmLayout::dense || config.swap_ab ||
      gemm_split_k(m, n, k, config, sm_count) != 1)
    return GemmEpilogue::any;
  GemmConfig any = config;
  any.epilogue = GemmEpilogue::any;
  return gemm_geometry(problem, any).chunks == 2 ? GemmEpilogue::any : GemmEpilogue::tma;
}

KernelSpec with_gemm_epilogue(const KernelSpec& spec, std::int64_t m, std::int64_t n,
                              std::int64_t k, int sm_count) {
  GemmConfig c = gemm_config_of(spec);
  const GemmEpilogue e = gemm_epilogue_for(gemm_problem_of(spec), m, n, k, c, sm_count);
  if (e == c.epilogue) return spec;
  c.epilogue = e;
  return make_gemm_spec(gemm_problem_of(spec), c);
}

}  // namespace fp8jit
