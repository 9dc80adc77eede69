// The gemm family's validation rules: formats, shared memory, registers, clusters, block-scale
// straddling and closed parameter sets, each against the restatement in gemm_spec_rules.hpp.
#include "tests/unit/gemm_spec_rules.hpp"

namespace fp8jit {
namespace {

using namespace gemm_spec_test;

// ---- cross-parameter rules -----------------------------------------------------------------

TEST(GemmSpecRules, BothOperandsE5m2Rejected) {
  expect_rejected(raw("e5m2", "e5m2", "bf16", "block", 0, 128, 128, 4, 8),
                  {"invalid gemm spec", "e5m2", "E4M3"});
  for (const char* scale : {"tensor", "rowwise", "block", "group"})
    expect_rejected(raw("e5m2", "e5m2", "fp32", scale, 1, 64, 64, 2, 1), {"e5m2"});
  expect_valid(raw("e5m2", "e4m3", "bf16", "block", 0, 128, 128, 4, 8));
  expect_valid(raw("e4m3", "e5m2", "fp16", "tensor", 1, 128, 128, 4, 8));
  expect_valid(raw("e4m3", "e4m3", "fp32", "group", 0, 128, 128, 4, 8));
  invalid_message([] { (void)make_gemm_spec({Fp8Format::e5m2, Fp8Format::e5m2}, {}); });
}

TEST(GemmSpecRules, SharedMemoryOverTheLimitRejectedWithTheBytes) {
  // 8 stages of 256x128 + 256x128 bytes and a 256x256 bf16 tile of D: 656640 bytes.
  expect_rejected(fast("tensor", 256, 256, 8),
                  {"invalid gemm spec", "stages = 8", "256x256", "656640 bytes", "232448"});
  // The boundary: 128x128 tiles with bf16 out fit 6 stages (230624 bytes), not 7 (263408)...
  expect_valid(tile("tensor", 128, 128, 6));
  expect_rejected(tile("tensor", 128, 128, 7), {"263408 bytes", "232448"});
  // ... and with fp32 out (a tile of D twice the size) 5 (230608), not 6 (263392), whatever the
  // scale mode.
  expect_valid(raw("e4m3", "e4m3", "fp32", "rowwise", 0, 128, 128, 5, 8));
  expect_rejected(raw("e4m3", "e4m3", "fp32", "rowwise", 0, 128, 128, 6, 8),
                  {"fp32 out", "263392 bytes"});
  // Block and group scaling also stage each K block's scales: (128 + 8, rounded to 160) and
  // (128 + 128) floats a stage push the fifth stage over (233808 and 235728 bytes).
  expect_valid(raw("e4m3", "e4m3", "fp32", "block", 1, 128, 128, 4, 8));
  expect_rejected(raw("e4m3", "e4m3", "fp32", "block", 1, 128, 128, 5, 8), {"233808 bytes"});
  expect_valid(raw("e4m3", "e4m3", "fp32", "group", 1, 128, 128, 4, 8));
  expect_rejected(raw("e4m3", "e4m3", "fp32", "group", 1, 128, 128, 5, 8), {"235728 bytes"});
  // 64x240 tiles: 5 stages fit (226512 bytes), 6 do not (265440).
  expect_valid(fast("tensor", 64, 240, 5));
  expect_rejected(fast("tensor", 64, 240, 6), {"265440 bytes"});
  const std::string msg = invalid_message([] {
    (void)make_gemm_spec(
        {Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor, false, true},
        {256, 256, 8, 8});
  });
  EXPECT_NE(msg.find("656640"), std::string::npos) << msg;
}

TEST(GemmSpecRules, FastAccumulationOnlyForTensorAndRowwiseScaling) {
  // Block and group scales differ along K: they can only be applied when promoting.
  for (const char* scale : {"block", "group"})
    expect_rejected(fast(scale, 128, 128), {"invalid gemm spec", "accum = fast", scale});
  expect_valid(fast("tensor", 128, 128));
  expect_valid(fast("rowwise", 128, 128));
  invalid_message([] {
    (void)make_gemm_spec(
        {Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false, true}, {});
  });
  expect_rejected(with(tile("tensor", 128, 128), "accum", std::string("FAST")),
                  {"gemm.accum", "one of {precise, fast}"});
  expect_rejected(with(tile("tensor", 128, 128), "accum", std::int64_t{1}), {"gemm.accum = 1"});
}

TEST(GemmSpecRules, AccumulatorRegisterBudget) {
  // Precise accumulation (every scale mode) keeps two register tiles: the wgmma accumulators and
  // the promoted FP32 sums, N/2 each per m64 slab, within 232 registers per consumer thread less
  // what the mode needs besides: 208 fit (tensor, rowwise, block: scales come from shared
  // memory), 160 (group: a scale per column too; 128 with two m64 slabs).
  expect_rejected(tile("group", 128, 216), {"invalid gemm spec", "128x216", "216 accumulator registers", "group"});
  expect_rejected(tile("group", 64, 256), {"invalid gemm spec", "256 accumulator registers"});
  for (const char* scale : {"tensor", "rowwise", "block", "group"}) {
    SCOPED_TRACE(scale);
    expect_valid(tile(scale, 128, 128));
    expect_valid(tile(scale, 64, 64));
  }
  // 256-row tiles: both slabs' temporaries fit up to 104 columns; from 112 to 128 columns the
  // slabs are promoted in turn (128 + 64 registers at 128), except group scaling (its per-column
  // scales) and in a 2-CTA cluster (ptxas spills); past 128 they are refused.
  expect_rejected(tile("group", 256, 112), {"256x112", "224 accumulator registers"});
  for (const char* scale : {"tensor", "rowwise", "block"}) {
    SCOPED_TRACE(scale);
    expect_valid(tile(scale, 256, 104));
    expect_valid(tile(scale, 256, 112));
    expect_valid(tile(scale, 256, 128));
    expect_rejected(tile(scale, 256, 136), {"256x136", "272 accumulator registers"});
  }
  expect_rejected(raw("e4m3", "e4m3", "bf16", "tensor", 0, 256, 128, 2, 8, "precise", 1, 2), {"256 accumulator registers"});
  // Past 208 columns precise tiles with one m64 slab run in two column halves: 128 + 64 registers
  // at 256 columns; halves of whole wgmma widths (multiples of 16), 224 at most with bias.
  for (const char* scale : {"tensor", "rowwise"}) {
    SCOPED_TRACE(scale);
    expect_valid(tile(scale, 128, 208));
    expect_valid(tile(scale, 64, 208));
    expect_valid(tile(scale, 128, 256));
    expect_valid(tile(scale, 64, 224));
    expect_rejected(tile(scale, 128, 216), {"block_n = 216", "multiple of 16"});
    expect_valid(raw("e4m3", "e4m3", "bf16", scale, 1, 128, 224, 2, 8));
    expect_rejected(raw("e4m3", "e4m3", "bf16", scale, 1, 128, 240, 2, 8), {"block_n = 240", "bias", "224"});
    expect_valid(tile(scale, 256, 104));
  }
  // Block: 192 or 256 in halves (200 to 248 straddle three scale blocks; that rule comes first).
  expect_valid(tile("block", 128, 192));
  expect_valid(tile("block", 128, 256));
  expect_rejected(tile("block", 128, 216), {"block_n = 216", "three"});
  expect_rejected(raw("e4m3", "e4m3", "bf16", "block", 1, 128, 256, 2, 8), {"block_n = 256", "bias"});
  expect_valid(tile("block", 256, 96));
  // Group: 160, and 128 with two m64 slabs (ptxas spilled 4 bytes at 128x168 and 256x80).
  expect_valid(tile("group", 128, 160));
  expect_rejected(tile("group", 128, 168), {"168 accumulator registers", "at most 160 fit"});
  expect_valid(tile("group", 256, 64));
  expect_rejected(tile("group", 256, 72), {"144 accumulator registers", "at most 128 fit"});
  // Fast accumulation (tensor and row-wise only) keeps one tile: 240 columns fit with one m64
  // slab per warpgroup (256, the 128-operand wgmma, spilled with bf16 out and bias)...
  for (const char* scale : {"tensor", "rowwise"}) {
    SCOPED_TRACE(scale);
    expect_valid(fast(scale, 128, 240, 3));
    expect_valid(fast(scale, 64, 240, 4));
    expect_rejected(fast(scale, 128, 248, 3),
                    {"128x248", "124 accumulator registers", "fast accumulation", "at most 120 fit"});
    expect_rejected(fast(scale, 64, 248, 3), {"64x248", "124 accumulator registers", "at most 120 fit"});
    expect_rejected(fast(scale, 128, 256, 3), {"128 accumulator registers", "at most 120 fit"});
    // ... but with two (block_m 256) ptxas spills past 2 x 72 registers.
    expect_valid(fast(scale, 256, 144, 2));
    expect_rejected(fast(scale, 256, 152, 2), {"152 accumulator registers", "fast accumulation", "at most 144"});
  }
  // Block scaling with 256-row tiles: 104 columns (2 x 208 registers) fit like tensor scaling's.
  expect_valid(tile("block", 256, 104));
  // Group scaling with one m64 slab (64- and 128-row tiles) alike.
  expect_valid(tile("group", 64, 160));
  expect_rejected(tile("group", 64, 168), {"64x168", "168 accumulator registers", "at most 160 fit"});
}

// Every tile width of every mode and tile height whose 2-stage pipeline fits shared memory (the
// check before this one): rejected for its registers exactly where the restated budget says, with
// the count and the limit in the message.
TEST(GemmSpecRules, AccumulatorBudgetOfEveryModeAndWidth) {
  int rejected = 0;
  std::set<std::string> widest;
  for (const char* scale : {"tensor", "rowwise", "block", "group"})
    for (const char* accum : {"precise", "fast"}) {
      const bool fast_ok = std::string(scale) == "tensor" || std::string(scale) == "rowwise";
      if (std::string(accum) == "fast" && !fast_ok) continue;
      for (int bm : {64, 128, 256}) {
        int max_valid = 0;
        for (const ParamValue& v : param("block_n").allowed) {
          const int bn = static_cast<int>(std::get<std::int64_t>(v));
          if (smem_model(bm, bn, 2, 2, staged_scales(scale, bm, bn)) > kSmemLimit) continue;
          SCOPED_TRACE(fmt::format("{} {} {}x{}", scale, accum, bm, bn));
          const int regs = accumulators(scale, accum, bm, bn), limit = max_accumulators(scale, accum, bm);
          if (regs > limit) {
            ++rejected;
            expect_rejected(tile(scale, bm, bn, 2, accum),
                            {fmt::format("{}x{} tiles need {} accumulator registers", bm, bn, regs),
                             fmt::format("at most {} fit", limit)});
          } else if (std::string(scale) == "block" && straddles_three(bn)) {
            continue;
          } else if (!chunks_ok(scale, accum, bm, bn, 0)) {
            expect_rejected(tile(scale, bm, bn, 2, accum), {fmt::format("block_n = {}", bn), "multiple of 16"});
          } else {
            expect_valid(tile(scale, bm, bn, 2, accum));
            max_valid = std::max(max_valid, bn);
          }
        }
        widest.insert(fmt::format("{} {} {}: {}", scale, accum, bm, max_valid));
      }
    }
  EXPECT_GT(rejected, 0);
  // The widest valid tiles, as the register model has them (ptxas, sm_90a): 256 columns for
  // precise accumulation with one m64 slab (in two halves; 128 with two slabs, promoted in
  // turn), 160 / 64 for group scaling, 240 / 144 for fast accumulation.
  const std::set<std::string> expected = {
      "tensor precise 64: 256",  "tensor precise 128: 256",  "tensor precise 256: 128",
      "tensor fast 64: 240",     "tensor fast 128: 240",     "tensor fast 256: 144",
      "rowwise precise 64: 256", "rowwise precise 128: 256", "rowwise precise 256: 128",
      "rowwise fast 64: 240",    "rowwise fast 128: 240",    "rowwise fast 256: 144",
      "block precise 64: 256",   "block precise 128: 256",   "block precise 256: 128",
      "group precise 64: 160",   "group precise 128: 160",   "group precise 256: 64"};
  EXPECT_EQ(widest, expected);
}

// A spec of `scale` scaling on block_m x block_n tiles (2 stages) in a cluster_m x cluster_n cluster.
KernelSpec clustered(const std::string& scale, int block_m, int block_n, int cluster_m, int cluster_n,
                     const std::string& accum = "precise") {
  return raw("e4m3", "e4m3", "bf16", scale, 0, block_m, block_n, 2, 8, accum, cluster_m, cluster_n);
}

TEST(GemmSpecRules, ClustersOfTwoAlongOneAxis) {
  expect_valid(raw("e4m3", "e4m3", "bf16", "block", 0, 128, 160, 4, 8, "precise", 1, 2));
  expect_valid(raw("e4m3", "e4m3", "bf16", "block", 0, 128, 128, 4, 8, "precise", 2, 1));
  expect_valid(raw("e4m3", "e4m3", "fp32", "tensor", 1, 256, 96, 2, 16, "precise", 1, 2));
  expect_valid(raw("e4m3", "e4m3", "bf16", "tensor", 0, 128, 224, 3, 8, "fast", 1, 2));
  // Every scale mode but group, at every tile height but block scaling's 256, along either axis.
  for (const char* scale : {"tensor", "rowwise", "block"})
    for (int bm : {64, 128, 256}) {
      if (std::string(scale) == "block" && bm == 256) continue;
      SCOPED_TRACE(fmt::format("{} {}", scale, bm));
      expect_valid(clustered(scale, bm, 64, 2, 1));
      expect_valid(clustered(scale, bm, 64, 1, 2));
    }
  expect_valid(clustered("rowwise", 256, 144, 2, 1, "fast"));
  expect_valid(clustered("tensor", 64, 240, 1, 2, "fast"));
  // Two CTAs at most: not both axes.
  expect_rejected(raw("e4m3", "e4m3", "bf16", "tensor", 0, 128, 128, 4, 8, "precise", 2, 2),
                  {"invalid gemm spec", "cluster_m = 2", "cluster_n = 2", "at most 2 CTAs"});
  expect_rejected(clustered("block", 64, 64, 2, 2), {"cluster_m = 2", "cluster_n = 2", "at most 2 CTAs"});
  // Sizes other than 1 and 2 are outside the parameters' sets.
  expect_rejected(raw("e4m3", "e4m3", "bf16", "tensor", 0, 128, 128, 4, 8, "precise", 4, 1),
                  {"gemm.cluster_m = 4", "one of {1, 2}"});
  expect_rejected(clustered("tensor", 128, 128, 1, 4), {"gemm.cluster_n = 4", "one of {1, 2}"});
  expect_rejected(clustered("tensor", 128, 128, 0, 1), {"gemm.cluster_m = 0", "one of {1, 2}"});
  expect_rejected(clustered("tensor", 128, 128, 1, -2), {"gemm.cluster_n = -2"});
  expect_rejected(with(clustered("tensor", 128, 128, 1, 1), "cluster_n", std::string("2")),
                  {"gemm.cluster_n = \"2\""});
  // Halves of B's tile must be whole 8-row swizzle atoms.
  expect_rejected(raw("e4m3", "e4m3", "bf16", "tensor", 0, 128, 88, 4, 8, "precise", 2, 1),
                  {"cluster_m = 2", "block_n = 88", "multiple of 16"});
  expect_valid(raw("e4m3", "e4m3", "bf16", "tensor", 0, 128, 88, 4, 8, "precise", 1, 2));
  expect_valid(clustered("tensor", 128, 80, 2, 1));
  expect_valid(clustered("tensor", 128, 96, 2, 1));
  // Register spills (ptxas): group scaling (any tile, either axis), and block scaling with 256-row
  // tiles; the message names the scale mode, the tile height and the way out.
  for (int bm : {64, 128, 256})
    for (const auto& [cm, cn] : {std::pair{2, 1}, std::pair{1, 2}}) {
      SCOPED_TRACE(fmt::format("group {} rows, cluster {}x{}", bm, cm, cn));
      expect_valid(clustered("group", bm, 64, 1, 1));
      expect_rejected(clustered("group", bm, 64, cm, cn),
                      {"invalid gemm spec", cm == 2 ? "cluster_m = 2:" : "cluster_n = 2:", "2-CTA clusters",
                       "group scaling", fmt::format("{}-row tiles", bm), "use cluster_m = cluster_n = 1"});
    }
  expect_rejected(raw("e4m3", "e4m3", "bf16", "group", 0, 128, 128, 4, 8, "precise", 1, 2),
                  {"clusters", "group scaling", "cluster_m = cluster_n = 1"});
  for (const auto& [cm, cn] : {std::pair{2, 1}, std::pair{1, 2}}) {
    SCOPED_TRACE(fmt::format("block 256 rows, cluster {}x{}", cm, cn));
    expect_valid(clustered("block", 256, 96, 1, 1));
    expect_rejected(clustered("block", 256, 96, cm, cn),
                    {"invalid gemm spec", "2-CTA clusters", "block scaling", "256-row tiles",
                     "use cluster_m = cluster_n = 1"});
  }
  expect_rejected(raw("e4m3", "e4m3", "bf16", "block", 0, 256, 96, 3, 8, "precise", 1, 2),
                  {"clusters", "block scaling", "256-row"});
  // The typed front door rejects the same.
  invalid_message([] {
    (void)make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::group}, {128, 128, 4, 8, 1, 2});
  });
  invalid_message([] { (void)make_gemm_spec({}, {128, 128, 4, 8, 2, 2}); });
  invalid_message([] { (void)make_gemm_spec({}, {128, 88, 4, 8, 2, 1}); });
  EXPECT_EQ(spec_cluster_size(raw("e4m3", "e4m3", "bf16", "block", 0, 128, 128, 4, 8, "precise", 2, 1)), 2);
  EXPECT_EQ(spec_cluster_size(clustered("tensor", 128, 128, 1, 2)), 2);
  EXPECT_EQ(spec_cluster_size(tile("block", 128, 128)), 1);
  invalid_message([] { (void)spec_cluster_size(clustered("group", 128, 128, 1, 2)); });
}

// Along M a cluster halves B's tile between its two CTAs: every width within the register and
// shared-memory budgets is valid with cluster_m = 2 exactly where it is a multiple of 16; along N
// (A's 64..256 rows halve into whole swizzle atoms) every such width is.
TEST(GemmSpecRules, ClusterAlongMNeedsBlockNMultipleOf16) {
  int odd = 0;
  for (const ParamValue& v : param("block_n").allowed) {
    const int bn = static_cast<int>(std::get<std::int64_t>(v));
    if (chunks("tensor", "precise", 128, bn) == 2) continue;  // halves: their own rules
    if (accumulators("tensor", "precise", 128, bn) > max_accumulators("tensor", "precise", 128)) continue;
    SCOPED_TRACE(bn);
    expect_valid(clustered("tensor", 128, bn, 1, 2));
    if (bn % 16 == 0) {
      expect_valid(clustered("tensor", 128, bn, 2, 1));
    } else {
      ++odd;
      expect_rejected(clustered("tensor", 128, bn, 2, 1),
                      {"cluster_m = 2", fmt::format("block_n = {}", bn), "multiple of 16"});
    }
  }
  EXPECT_GT(odd, 0);
}

TEST(GemmSpecRules, BlockScalingTileStraddlingThreeScaleBlocksRejected) {
  // 152-wide tiles at column 152 * 5 = 760 cover 760..911: blocks 5, 6 and 7; 176-wide ones at
  // 880..1055 (blocks 6, 7, 8).
  EXPECT_TRUE(straddles_three(152));
  EXPECT_TRUE(straddles_three(176));
  EXPECT_FALSE(straddles_three(160));
  expect_rejected(tile("block", 128, 152),
                  {"invalid gemm spec", "block_n = 152", "three 128x128 scale blocks"});
  expect_rejected(tile("block", 64, 152), {"block_n = 152", "three"});
  expect_rejected(tile("block", 128, 176), {"invalid gemm spec", "block_n = 176", "three"});
  expect_valid(tile("block", 128, 160));
  expect_valid(tile("block", 128, 192));
  expect_valid(tile("block", 128, 144));
  expect_valid(tile("block", 128, 136));
  // Group scaling reads a scale per column: no such rule.
  expect_valid(tile("group", 64, 120));
  // Every width within the register budget: block scaling is valid exactly where no tile spans
  // three 128-wide blocks.
  int straddling = 0;
  for (const ParamValue& v : param("block_n").allowed) {
    const int bn = static_cast<int>(std::get<std::int64_t>(v));
    SCOPED_TRACE(bn);
    const KernelSpec s = tile("block", 64, bn);
    if (accumulators("block", "precise", 64, bn) > max_accumulators("block", "precise", 64)) continue;
    if (straddles_three(bn)) {
      ++straddling;
      expect_rejected(s, {fmt::format("block_n = {}", bn), "three"});
    } else {
      expect_valid(s);
    }
  }
  EXPECT_GT(straddling, 0);
}

TEST(GemmSpecValidation, OutOfSetAndHostileValuesRejected) {
  const KernelSpec good = tile("block", 128, 128, 4);
  expect_valid(good);
  expect_rejected(with(good, "block_n", std::int64_t{20}),
                  {"gemm.block_n = 20", "one of {8, 16, 24, 32"});
  expect_rejected(with(good, "block_n", std::int64_t{264}), {"gemm.block_n = 264"});
  expect_rejected(with(good, "block_n", std::int64_t{4}), {"gemm.block_n = 4"});
  expect_rejected(with(good, "block_n", std::int64_t{0}), {"gemm.block_n = 0"});
  expect_rejected(with(good, "block_n", std::int64_t{-128}), {"gemm.block_n = -128"});
  expect_rejected(
      with(good, "stages", std::int64_t{1}),
      {"gemm.stages = 1", "one of {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17"});
  expect_rejected(with(good, "stages", std::int64_t{33}), {"gemm.stages = 33"});
  expect_rejected(with(good, "swap_ab", std::int64_t{2}), {"gemm.swap_ab = 2", "one of {0, 1}"});
  expect_rejected(with(good, "swap_ab", std::string("1")), {"gemm.swap_ab = \"1\""});
  expect_rejected(with(good, "block_m", std::int64_t{32}),
                  {"gemm.block_m = 32", "one of {64, 128, 256}"});
  expect_rejected(with(good, "block_m", std::int64_t{192}), {"gemm.block_m = 192"});
  expect_rejected(with(good, "block_m", std::int64_t{1} << 40), {"gemm.block_m = 1099511627776"});
  expect_rejected(with(good, "group_m", std::int64_t{2}),
                  {"gemm.group_m = 2", "one of {1, 4, 8, 16}"});
  expect_rejected(with(good, "bias", std::int64_t{2}), {"gemm.bias = 2", "one of {0, 1}"});
  expect_rejected(with(good, "accum", std::string("fast\"; //")), {"gemm.accum"});
  expect_rejected(with(good, "block_n", std::string("128")), {"gemm.block_n = \"128\""});
  expect_rejected(with(good, "scale", std::string("blockwise")), {"gemm.scale = \"blockwise\""});
  expect_rejected(with(good, "scale", std::int64_t{2}), {"gemm.scale = 2"});
  expect_rejected(with(good, "out", std::string("e4m3")),
                  {"gemm.out", "one of {bf16, fp16, fp32}"});
  expect_rejected(with(good, "a_format", std::string("e4m3fn")),
                  {"gemm.a_format", "one of {e4m3, e5m2}"});
  for (const std::string& h :
       {std::string("e4m3\"; asm(\"trap;\"); //"), std::string("e4m3\n#include <x>"),
        std::string(""), std::string("E4M3")}) {
    expect_rejected(with(good, "a_format", h), {"gemm.a_format"});
    expect_rejected(with(good, "b_format", h), {"gemm.b_format"});
  }
  expect_rejected(with(good, "swizzle", std::int64_t{128}), {"gemm.swizzle", "unknown parameter"});
  KernelSpec missing = good;
  missing.params.erase("stages");
  expect_rejected(missing, {"gemm.stages", "<missing>"});
  invalid_message([] { (void)make_gemm_spec({}, {128, 20, 4, 8}); });
  invalid_message([] { (void)make_gemm_spec({}, {128, 128, 1, 8}); });
  invalid_message([] { (void)make_gemm_spec({}, {32, 128, 4, 8}); });
  invalid_message([] { (void)gemm_problem_of(make_quantize_spec({}, {})); });
}

}  // namespace
}  // namespace fp8jit
