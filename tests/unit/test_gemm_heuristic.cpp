// The gemm heuristic's measured choices on DeepSeek-V3 shapes (H100, G16-G21): each
// pinned decision names the measurement that made it, so a change to the cost model shows here.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <tuple>

#include "fp8jit/kernel_spec.hpp"
#include "generator/families/gemm_geometry.hpp"

namespace fp8jit {
namespace {

GemmConfig pick(ScaleMode scale, std::int64_t m, std::int64_t n, std::int64_t k,
                bool bias = false) {
  return gemm_config_of(
      default_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, scale, bias}, m, n, k));
}

// The grouped heuristic's config for `groups` groups of about `rows` rows, each against N x K.
GemmConfig pick_grouped(const GemmProblem& p, std::int64_t groups, std::int64_t rows,
                        std::int64_t n, std::int64_t k) {
  return gemm_config_of(default_grouped_gemm_spec(p, groups, rows, n, k));
}

// Block scaling under 2048 rows with K >= 2048 takes 128x256 in two column halves (G18:
// 4096x4096x7168 213 -> 201 µs, 4096x7168x16384 790 -> 763 µs); per tensor, where the halves
// lost, stays unchunked; with bias (256 spills) block scaling stays at 192.
TEST(GemmHeuristic, WideBlockScaledTilesInHalvesOnly) {
  for (auto [n, k] :
       {std::pair<std::int64_t, std::int64_t>{4096, 7168}, {7168, 16384}, {8192, 8192}}) {
    SCOPED_TRACE(n);
    const GemmConfig block = pick(ScaleMode::block, 1024, n, k);
    EXPECT_EQ(block.block_m, 128);
    EXPECT_EQ(block.block_n, 256);
    EXPECT_EQ(gemm_geometry({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block}, block).chunks,
              2);
    EXPECT_LE(pick(ScaleMode::tensor, 1024, n, k).block_n, 208);
    EXPECT_LE(pick(ScaleMode::block, 4096, n, k, true).block_n, 192);
  }
}

// From 2048 rows and 16 K blocks on, block and per-tensor scaling (either accumulation) take
// DeepGEMM's 256x128 in raster groups of 8 tile-rows where its waves leave at most 5 % more tile
// area unused than the model's tile (H100, CUDA events, lab/configs/tall_default.txt:
// 4096x4096x7168 per tensor 176.3 -> 169.5 µs, 8192x5120x8192 per tensor 508.9 -> 478.2,
// 6000x8192x28672 block 2252.8 -> 2091.3); not where they leave more (3000x10240x5120: 7.3 waves
// against 9.8 of 128x192, 241.1 -> 255.1 µs; 4096x2112x7168: 2.1 against 2.7, 103.6 -> 132.8),
// nor at fewer rows or K blocks; per row too (G93, G96), not with a bias.
TEST(GemmHeuristic, TallTilesAtLargeMAndLongK) {
  const GemmConfig tall{256, 128, 3, 8};
  for (ScaleMode scale : {ScaleMode::block, ScaleMode::tensor, ScaleMode::rowwise})
    for (bool bias : {false, true})
      for (auto [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4096, 7168, 2048},
                             {8192, 5120, 8192},
                             {6000, 8192, 28672},
                             {2048, 8192, 8192},
                             {8192, 32768, 8192}}) {
        SCOPED_TRACE(fmt::format("{} bias {} {}x{}x{}", to_string(scale), bias, m, n, k));
        const GemmConfig c = pick(scale, m, n, k, bias);
        if (scale == ScaleMode::rowwise && bias) {  // its 256-row slab is row-major
          EXPECT_EQ(c.block_m, 128);
          continue;
        }
        EXPECT_EQ(c.block_m, tall.block_m);
        EXPECT_EQ(c.block_n, tall.block_n);
        EXPECT_EQ(c.stages, tall.stages);
        EXPECT_EQ(c.group_m, tall.group_m);
      }
  for (ScaleMode scale : {ScaleMode::block, ScaleMode::tensor, ScaleMode::rowwise})
    for (bool bias : {false, true}) {
      SCOPED_TRACE(fmt::format("{} bias {}", to_string(scale), bias));
      EXPECT_EQ(pick(scale, 3000, 10240, 5120, bias).block_m, 128);
      EXPECT_EQ(pick(scale, 4096, 2112, 7168, bias).block_m, 128);
      EXPECT_EQ(pick(scale, 2047, 8192, 8192, bias).block_m, 128);
      EXPECT_EQ(pick(scale, 4096, 8192, 1920, bias).block_m, 128);  // 15 K blocks
    }
  // Fast accumulation too (4096x7168x2048 99.7 -> 89.1 µs, 3000x4096x14336 259.6 -> 230.8).
  const GemmProblem fast{Fp8Format::e4m3,   Fp8Format::e4m3, DType::bf16,
                         ScaleMode::tensor, false,           true};
  for (auto [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4096, 7168, 2048},
                         {3000, 4096, 14336},
                         {8192, 8192, 8192}}) {
    const GemmConfig c = gemm_config_of(default_gemm_spec(fast, m, n, k));
    EXPECT_EQ(c.block_m, 256) << m << "x" << n << "x" << k;
    EXPECT_EQ(c.block_n, 128) << m << "x" << n << "x" << k;
  }
  EXPECT_EQ(gemm_config_of(default_gemm_spec(fast, 4096, 2112, 7168)).block_m, 128);
}

// Under 16 K blocks, from 1024 rows, where the waves allow it: fast accumulation at any width,
// precise (block, per tensor) from 16384 columns (H200, s28: fast 4096x32768x512 145.7 -> 125.6
// µs, 8192x8192x512 75.1 -> 69.5; block 4096x32768x512 141.4 -> 136.6, 1024x32768x512 40.9 ->
// 38.2; precise at 8192 columns 1.5 % slower, so not there).
TEST(GemmHeuristic, TallTilesAtShortK) {
  const GemmProblem fast{Fp8Format::e4m3,   Fp8Format::e4m3, DType::bf16,
                         ScaleMode::tensor, false,           true};
  auto tall = [](const GemmConfig& c) {
    return c.block_m == 256 && c.block_n == 128 && c.group_m == 8;
  };
  for (auto [m, n, k] : {std::tuple<std::int64_t, std::int64_t, std::int64_t>{4096, 32768, 512},
                         {2048, 32768, 512},
                         {1024, 32768, 512},
                         {8192, 8192, 512},
                         {4096, 24576, 1536}}) {
    SCOPED_TRACE(fmt::format("{}x{}x{}", m, n, k));
    EXPECT_TRUE(tall(gemm_config_of(default_gemm_spec(fast, m, n, k))));
    const bool wide = n >= 16384;
    EXPECT_EQ(tall(pick(ScaleMode::block, m, n, k)), wide);
    EXPECT_EQ(tall(pick(ScaleMode::tensor, m, n, k)), wide);
  }
  EXPECT_FALSE(tall(gemm_config_of(default_gemm_spec(fast, 1023, 32768, 512))));
  EXPECT_FALSE(
      tall(gemm_config_of(default_gemm_spec(fast, 2048, 7168, 512))));  // waves: 4 against 7
  EXPECT_FALSE(tall(pick(ScaleMode::rowwise, 4096, 32768, 512)));
  EXPECT_FALSE(tall(pick(ScaleMode::block, 4096, 32768, 512, true)));  // bias
}

// Contiguous grouped GEMMs, block scaling, bf16 out: 256x128 in raster groups of 8 for groups of
// 1024 expected rows or more over 16 K blocks or more, where the groups' rows round up to its
// tiles no worse than 5 % (8 x 4096 rows, 4096x7168: 1342.7 -> 1237.8 µs; 16 x 1024: 674.0 ->
// 622.5; H100); not for masked layouts, other scale modes or outputs, shorter groups or K.
TEST(GemmHeuristic, GroupedTallTilesForLargeContiguousGroups) {
  GemmProblem contiguous;
  contiguous.layout = GemmLayout::contiguous;
  for (auto [groups, em, n, k] :
       {std::tuple<std::int64_t, std::int64_t, std::int64_t, std::int64_t>{8, 4096, 4096, 7168},
        {8, 4096, 7168, 2048},
        {4, 2048, 4096, 7168},
        {16, 1024, 4096, 7168},
        {32, 2048, 7168, 2048},
        {1, 32768, 4096, 7168}}) {
    SCOPED_TRACE(fmt::format("{} x {} rows, {}x{}", groups, em, n, k));
    const GemmConfig c = pick_grouped(contiguous, groups, em, n, k);
    EXPECT_EQ(c.block_m, 256);
    EXPECT_EQ(c.block_n, 128);
    EXPECT_EQ(c.stages, 3);
    EXPECT_EQ(c.group_m, 8);
    EXPECT_EQ(c.cluster_m * c.cluster_n, 1);
  }
  EXPECT_EQ(pick_grouped(contiguous, 8, 1100, 4096, 7168).block_m,
            128);  // 1280 rows a group against 1152
  EXPECT_EQ(pick_grouped(contiguous, 8, 1023, 4096, 7168).block_m, 128);
  EXPECT_EQ(pick_grouped(contiguous, 8, 4096, 4096, 1920).block_m, 128);  // 15 K blocks
  GemmProblem masked = contiguous, tensor = contiguous, fp16 = contiguous;
  masked.layout = GemmLayout::masked;
  tensor.scale = ScaleMode::tensor;
  fp16.out = DType::fp16;
  for (const GemmProblem& p : {masked, tensor, fp16})
    EXPECT_EQ(pick_grouped(p, 8, 4096, 4096, 7168).block_m, 128);
}

// Masked grouped GEMMs, block scaling, bf16 out, on 128x256 tiles run them in pairs along M (B's
// tile multicast to two tile-rows of one expert): H200, lone -> pair, 16 x 128 rows at 4096x7168
// 161.8 -> 159.0 µs, 8 x 256 139.4 -> 137.3; not 128x192 (still 0-4 % slower in pairs), other
// layouts, scale modes or outputs.
TEST(GemmHeuristic, MaskedPairsAlongMOn128x256Tiles) {
  GemmProblem masked;
  masked.layout = GemmLayout::masked;
  const auto paired_128x256 = [&](std::int64_t groups, std::int64_t rows, std::int64_t n,
                                  std::int64_t k) {
    const GemmConfig c = pick_grouped(masked, groups, rows, n, k);
    return c.block_m == 128 && c.block_n == 256 && c.cluster_m == 2 && c.cluster_n == 1;
  };
  EXPECT_TRUE(paired_128x256(16, 128, 4096, 7168));
  EXPECT_TRUE(paired_128x256(8, 256, 4096, 7168));
  EXPECT_TRUE(paired_128x256(32, 64, 4096, 7168));
  EXPECT_TRUE(paired_128x256(32, 32, 7168, 2048));
  const GemmConfig narrow = pick_grouped(masked, 16, 128, 7168, 2048);
  EXPECT_EQ(narrow.block_n, 192);
  EXPECT_EQ(narrow.cluster_m, 1);
  EXPECT_EQ(pick_grouped(masked, 32, 16, 4096, 7168).cluster_m, 1);  // 64-row tiles
  GemmProblem contiguous = masked, tensor = masked, fp16 = masked;
  contiguous.layout = GemmLayout::contiguous;
  tensor.scale = ScaleMode::tensor;
  fp16.out = DType::fp16;
  for (const GemmProblem& p : {contiguous, tensor, fp16}) {
    const GemmConfig c = pick_grouped(p, 16, 128, 4096, 7168);
    EXPECT_EQ(c.cluster_m * c.cluster_n, 1) << to_string(p.layout) << " " << to_string(p.scale);
  }
}

// Decode-sized M whose widest tiles make one wave run two half-width tiles per SM (tuned 64x96
// and 128x96 over x192 at N = 24576, K = 1536: 1.08-1.12x); narrow tiles and short K do not.
TEST(GemmHeuristic, OneWaveDecodeShapesTakeHalfWidthTiles) {
  for (ScaleMode scale : {ScaleMode::block, ScaleMode::tensor}) {
    EXPECT_EQ(pick(scale, 64, 24576, 1536).block_n, 96);
    EXPECT_EQ(pick(scale, 128, 24576, 1536).block_n, 96);
    // 64-wide or narrower already: the streaming tiles (block scaling 64 columns, 112 tiles; per
    // tensor 56, 128 tiles).
    EXPECT_EQ(pick(scale, 64, 7168, 16384).block_n, scale == ScaleMode::block ? 64 : 56);
    EXPECT_EQ(pick(scale, 64, 32768, 512).block_n, 128);  // two waves already
  }
}

// K of 4 blocks or fewer: at most 144 columns (G16, G21: 4096x32768x512 per tensor 165 µs against
// 175 at 160), or the one-pass tile of whole panels of D, 128x192, where the model would take a
// wider one (tuning sweeps, H100: block 4096x32768x512 142.0 µs against 155.5 for 128x256 in
// column halves; per tensor 142.2 against 162.7 at 144). With bias block scaling's widest is 208,
// one chunk, not whole panels: capped.
TEST(GemmHeuristic, ShortKCapsTheTileWidth) {
  EXPECT_EQ(pick(ScaleMode::block, 4096, 8192, 512).block_n, 192);
  EXPECT_EQ(pick(ScaleMode::block, 2048, 7168, 256).block_n, 192);
  // With a bias (no whole-panel 192 there): 128, not the cap's 144, whose 288-byte rows of D go
  // out in 32-byte panels (GemmGeometry::panel_bytes), which lose where stores are the work.
  EXPECT_EQ(pick(ScaleMode::block, 4096, 32768, 512, true).block_n, 128);
  EXPECT_EQ(pick(ScaleMode::block, 128, 2048, 512).block_n, 64);  // 16 tiles of 128: narrow fills SMs
  // One wave of 256-wide tiles at decode M: half the width, two tiles per CTA.
  EXPECT_EQ(pick(ScaleMode::block, 128, 32768, 512).block_n, 128);
  EXPECT_EQ(pick(ScaleMode::tensor, 4096, 8192, 512).block_n, 192);
  EXPECT_EQ(pick(ScaleMode::rowwise, 4096, 32768, 512).block_n,
            192);  // 256x128 from 16384 columns: TallTilesAtShortK
  {  // fast accumulation keeps a deferring tile narrower than 192 there (H100: 144 154.3 µs
     // against 166.6 at 192), 128 rather than 144 for the same reason as above
    const GemmProblem fast{Fp8Format::e4m3,   Fp8Format::e4m3, DType::bf16,
                           ScaleMode::tensor, false,           true};
    EXPECT_EQ(gemm_config_of(default_gemm_spec(fast, 512, 32768, 512)).block_n, 128);
    EXPECT_EQ(gemm_config_of(default_gemm_spec(fast, 512, 24576, 1536)).block_n, 192);
  }
  // 192 where its waves, costed with the stages each tile gets, cost no more than 256's (H100:
  // 8192x8192x512 86.4 -> 74.6 µs); 256 where 192 needs a wave more than that pays for
  // (1024x4096x512: one wave of 256 against two of 192, 11.7 against 12.8 µs).
  EXPECT_EQ(pick(ScaleMode::block, 8192, 8192, 512).block_n, 192);
  EXPECT_EQ(pick(ScaleMode::block, 1024, 4096, 512).block_n, 256);
  EXPECT_EQ(pick(ScaleMode::block, 1024, 8192, 1024).block_n, 256);
  for (std::int64_t m : {500, 2048, 8192})
    for (std::int64_t n : {2048, 7168, 32768}) {
      const int bn = pick(ScaleMode::block, m, n, 512).block_n;
      EXPECT_TRUE(bn <= 144 || bn == 192 || bn == 256) << m << "x" << n << ": " << bn;
      const GemmProblem block{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block};
      EXPECT_NE(gemm_geometry(block, GemmConfig{128, bn, 6}).panel_bytes, 32) << m << "x" << n;
    }
}

// K under 16 blocks without block scaling: tiles narrow enough to defer their epilogue (G21:
// 4096x24576x1536 per tensor 277 µs at 168 against 293 at 208), whose rows of D are whole
// 32-byte sectors (168's 336 bytes are not: 4096x24576x768 per tensor 177.3 µs against 164.5 at
// 160); pipelined 128x128 tiles, which do not defer, lost there (H200: 246.5 against 238.4 µs).
// Beside them the one-pass tile of whole panels, 128x192, which the model takes where waves allow
// (H100, per tensor: 4096x24576x1536 239.8 µs against 271.3 at 160), for block scaling too in
// place of 128x256 up to 12 K blocks (266.9 -> 251.8); at 16 blocks block scaling keeps 256 (at
// 4096 rows the 256x128 of TallTilesAtLargeMAndLongK).
TEST(GemmHeuristic, MidKTakesDeferrableTiles) {
  // (At 24576 columns precise scaling's 256x128 takes over: TallTilesAtShortK.)
  EXPECT_EQ(pick(ScaleMode::tensor, 4096, 12288, 1536).block_n, 192);
  EXPECT_EQ(pick(ScaleMode::tensor, 4096, 12288, 768).block_n, 192);
  EXPECT_EQ(pick(ScaleMode::rowwise, 4096, 24576, 1536).block_n, 192);
  EXPECT_EQ(pick(ScaleMode::block, 4096, 12288, 1536).block_n, 192);
  EXPECT_EQ(pick(ScaleMode::block, 1024, 7168, 2048).block_n, 256);
  for (std::int64_t n : {2048, 7168, 16384}) {  // the rest stay deferrable
    const int bn = pick(ScaleMode::tensor, 4096, n, 1536).block_n;
    EXPECT_TRUE(bn <= 160 || bn == 192) << n << ": " << bn;
  }
}

// At 16-31 K blocks, tiles that promote under the next K block's wgmmas (GemmGeometry::
// pipelined; 128x128 with two free-running warpgroups) cost 0.88 of the model's time per K
// block: per tensor 4096x7168x2048 98.5 µs at 128x128 against 104.5 at 128x160 (H100, peers
// benchmark; H200 96.6 against 102.5). From 32 blocks on the H100 ran them 2-29 % slower than
// the wider tiles (4096x4096x7168 per tensor 188.4 against 180.1 at 128x208), and under 16 the
// deferring tiles won; fast accumulation does not promote.
TEST(GemmHeuristic, PipelinedTilesAtSixteenToThirtyOneKBlocks) {
  // Under 2048 rows (from there on TallTilesAtLargeMAndLongK), whatever the scaling.
  EXPECT_EQ(pick(ScaleMode::tensor, 1024, 7168, 2048).block_n, 128);
  EXPECT_EQ(pick(ScaleMode::tensor, 2000, 5120, 2048).block_n, 128);
  EXPECT_EQ(pick(ScaleMode::rowwise, 2000, 7168, 2048).block_n, 128);
  EXPECT_GT(pick(ScaleMode::rowwise, 2000, 4096, 7168).block_n, 168);
  EXPECT_EQ(pick(ScaleMode::rowwise, 4096, 7168, 2048).block_m, 256);
  EXPECT_GT(pick(ScaleMode::tensor, 4096, 8192, 512).block_n, 128);
  const GemmProblem fast{Fp8Format::e4m3,   Fp8Format::e4m3, DType::bf16,
                         ScaleMode::tensor, false,           true};
  EXPECT_GT(gemm_config_of(default_gemm_spec(fast, 1024, 7168, 2048)).block_n, 128);
  // Block scaling's 128x256 in column halves stays ahead of a pipelined 128x128 (H200: 185.0
  // against 180.0 µs at 4096x4096x7168, 103.4 against 100.3 at 4096x7168x2048).
  EXPECT_EQ(pick(ScaleMode::block, 1024, 7168, 2048).block_n, 256);
}

// Decode M over a long K, fast accumulation: a wave of 64-row tiles up to 128 columns where no
// width up to 64 gives one (H200: 128x7168x16384 64x112 s8 42.0 µs against 44.8 at 128 rows);
// precise scaling keeps its 128-row tile there, and where a narrow width fills the wave nothing
// changes.
TEST(GemmHeuristic, FastStreamingTilesUpTo128Columns) {
  const GemmProblem fast{Fp8Format::e4m3,   Fp8Format::e4m3, DType::bf16,
                         ScaleMode::tensor, false,           true};
  const GemmConfig wide = gemm_config_of(default_gemm_spec(fast, 128, 7168, 16384));
  EXPECT_EQ(wide.block_m, 64);
  EXPECT_EQ(wide.block_n, 112);
  EXPECT_GE(wide.stages, 6);
  EXPECT_EQ(pick(ScaleMode::tensor, 128, 7168, 16384).block_m, 128);
  EXPECT_EQ(gemm_config_of(default_gemm_spec(fast, 128, 4096, 7168)).block_n, 64);
  EXPECT_EQ(gemm_config_of(default_gemm_spec(fast, 128, 2112, 7168)).block_n, 32);
  EXPECT_EQ(gemm_config_of(default_gemm_spec(fast, 128, 7168, 2048)).block_m, 128);  // 16 K blocks
}

}  // namespace
}  // namespace fp8jit
